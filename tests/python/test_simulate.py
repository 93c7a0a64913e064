"""The DMM simulator from Python and the command line: specs and their schema, presets,
prediction against the same design running for real, libheapkit-dmm.so under real
programs, and bad input."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import heapkit
from helpers import run
from heapkit._paths import library

LIBDMM = library("libheapkit-dmm.so")




def preset_files() -> list[Path]:
    return [heapkit.dmm.preset_path(name) for name in heapkit.PRESETS]


# ---- specs, presets, schema -------------------------------------------------------------------

def test_presets_are_valid_and_match_the_published_schema():
    schema = heapkit.dmm.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in preset_files():
        spec = heapkit.load_spec(path)
        jsonschema.validate(json.loads(path.read_text()), schema)
        jsonschema.validate(spec.data, schema)  # the normalised form too
        assert heapkit.parse_spec(spec.normalized).normalized == spec.normalized
        assert spec.name == path.stem


def _random_allocator(rng: random.Random, low: int, high) -> dict:
    mechanism = rng.choice(["segregated_lists", "segregated_fit", "simple_segregated_storage", "exact_segregated_fit",
                            "strict_segregated_fit", "kingsley", "lea", "region", "binary_buddy", "fibonacci_buddy",
                            "weighted_buddy", "double_buddy", "page_segregated", "adaptive_lea"])
    a = {"range": [low, high], "mechanism": mechanism}
    if mechanism in ("kingsley", "lea", "adaptive_lea"):
        return a
    if mechanism == "page_segregated":
        return _random_page_segregated(rng, a)
    if mechanism.endswith("_buddy"):
        a.update(min_block_bytes=rng.choice([32, 48, 40]), area_bytes=rng.choice([4096, 65536, 100]),
                 coalesce=rng.choice(["none", "immediate", "deferred"]), trim=rng.random() < 0.5)
        return a
    a["header"] = rng.choice(["size8", "size16", "boundary_tags"])
    if mechanism == "region":
        return a
    if mechanism in ("segregated_fit",) or (mechanism in ("strict_segregated_fit", "simple_segregated_storage")
                                           and rng.random() < 0.5):
        a["class_sizes"] = sorted(rng.sample(range(8, 4096, 16), rng.randint(1, 6)))
    elif mechanism != "exact_segregated_fit":
        a["classes"] = rng.randint(1, 12)
    if mechanism != "simple_segregated_storage":
        a["list"] = {"structure": rng.choice(["singly_linked", "doubly_linked", "size_tree"]),
                     "fit": rng.choice(["first", "next", "best", "exact", "worst"]),
                     "order": rng.choice(["lifo", "fifo", "address", "size"])}
    a["split"] = rng.random() < 0.5
    a["coalesce"] = rng.choice(["none", "immediate", "deferred"])
    a["trim"] = rng.random() < 0.3
    return a


def _random_page_segregated(rng: random.Random, a: dict) -> dict:
    """Every field or none, mostly valid; now and then out of bounds (both reject) or
    inconsistent (descending classes, min above max: heapkit alone rejects)."""
    if rng.random() < 0.7:
        sizes = sorted(rng.sample(range(16, 32769, 16), rng.randint(0, 64)))
        if sizes and rng.random() < 0.1:
            sizes[0] += rng.choice([8, 40000])
        if len(sizes) > 1 and rng.random() < 0.1:
            sizes.reverse()
        a["class_sizes"] = sizes
    if rng.random() < 0.5:
        a["span_max_bytes"] = rng.choice([65536, 1 << 20, 33554432, 1 << 30, 4096, (1 << 30) + 1])
    if rng.random() < 0.5:
        a["purge_delay"] = rng.choice([0, 1, 4096, 1 << 32, (1 << 32) + 1, -1])
    if rng.random() < 0.5:
        a["resident_free"] = {"min_bytes": rng.choice([0, 1 << 20, 1 << 26]),
                              "max_bytes": rng.choice([0, 1 << 24, 1 << 27]),
                              "in_use_percent": rng.choice([0, 150, 10000, 10001])}
    if rng.random() < 0.5:
        a["warm_superblocks"] = rng.choice([0, 64, 65536, 65537])
    if rng.random() < 0.5:
        a["large_cache"] = {"max_blocks": rng.choice([0, 8, 1024, 1025]), "fit_slack": rng.choice([0, 1, 4]),
                            "idle_operations": rng.choice([1, 1024, 0])}
    return a


def test_schema_and_validator_agree(tmp_path):
    """Whatever the schema rejects, heapkit rejects; what heapkit accepts, the schema accepts.
    (heapkit rejects more: the combinations the layers cannot honour.)"""
    schema = heapkit.dmm.schema()
    rng = random.Random(7)
    accepted = rejected_by_heapkit_only = 0
    for _ in range(400):
        n = rng.randint(1, 3)
        bounds = sorted(rng.sample(range(16, 100000), n))
        allocators = [_random_allocator(rng, 0 if i == 0 else bounds[i - 1], bounds[i] if i + 1 < n else None)
                      for i in range(n)]
        document = {"format": "heapkit-dmm/1", "allocators": allocators}
        if rng.random() < 0.1:
            document["allocators"][0]["unknown_field"] = 1
        schema_ok = jsonschema.Draft202012Validator(schema).is_valid(document)
        try:
            heapkit.parse_spec(json.dumps(document))
            heapkit_ok = True
        except heapkit.SpecError as error:
            heapkit_ok = False
            assert str(error).startswith(("allocators", "fallback", "format")), str(error)
        assert not (heapkit_ok and not schema_ok), document
        accepted += heapkit_ok
        rejected_by_heapkit_only += schema_ok and not heapkit_ok
    assert accepted > 50 and rejected_by_heapkit_only > 10


def test_a_spec_error_names_the_field(tmp_path, heapkit_cli):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "heapkit-dmm/1", "allocators": [
        {"range": [0, None], "mechanism": "segregated_lists", "header": "size16", "coalesce": "immediate"}]}))
    with pytest.raises(heapkit.SpecError, match=r"bad.json: allocators\[0\].coalesce: coalescing needs boundary tags"):
        heapkit.load_spec(bad)
    done = run(heapkit_cli, "validate", bad)
    assert done.returncode == 1 and done.stdout == ""
    assert "allocators[0].coalesce" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    good = heapkit.dmm.preset_path("S10")
    done = run(heapkit_cli, "validate", good)
    assert done.returncode == 0 and "valid (S10" in done.stdout


# ---- simulating -----------------------------------------------------------------------------------

def test_simulate_is_deterministic_across_threads(churn_trace):
    one = heapkit.simulate(churn_trace, heapkit.PRESETS, threads=1)
    two = heapkit.simulate(churn_trace, heapkit.PRESETS, threads=2)
    for a, b in zip(one, two):
        assert (a.name, a.work, a.accesses, a.peak_footprint, a.footprint_samples) == \
               (b.name, b.work, b.accesses, b.peak_footprint, b.footprint_samples)
        assert a.events > 15000 and a.failed == 0
        assert a.peak_footprint >= a.max_live_bytes
        assert 0 <= a.internal_fragmentation < 1 and 0 <= a.external_fragmentation < 1
        # Every malloc and aligned request reaches an allocator; a realloc does unless it stays in place.
        served = sum(u.requests for u in a.dmm_map)
        assert a.mallocs + a.aligned <= served <= a.mallocs + a.aligned + a.reallocs
    kng = next(r for r in one if r.name == "KNG")
    lea = next(r for r in one if r.name == "LEA")
    assert lea.peak_footprint < kng.peak_footprint  # coalescing beats power-of-two classes on this mix


@pytest.mark.parametrize("name", heapkit.PRESETS)
def test_prediction_equals_the_design_running_for_real(churn_trace, name):
    """The footprint the simulator predicts is the bytes the real allocator holds, to the byte."""
    predicted = heapkit.simulate(churn_trace, name)[0]
    measured = heapkit.replay(churn_trace, f"spec:{heapkit.dmm.preset_path(name)}", runs=1)
    assert measured.runs[0].heap_peak_bytes_held == predicted.peak_footprint
    assert measured.runs[0].failed_allocations == predicted.failed == 0


def test_cli_simulate_prints_the_comparison_and_writes_json(churn_trace, tmp_path, heapkit_cli):
    out = tmp_path / "sim.json"
    energy = tmp_path / "energy.json"
    energy.write_text(json.dumps({"access_nj": 0.01}))
    done = run(heapkit_cli, "simulate", churn_trace, "-p", "LEA", "-s", heapkit.dmm.preset_path("BOX"), "--json", out,
               "--energy", energy)
    assert done.returncode == 0, done.stderr
    assert "normalised to KNG" in done.stdout and "KNG added as the baseline" in done.stdout
    assert "DMM map: BOX" in done.stdout
    data = json.loads(out.read_text())
    assert [r["name"] for r in data["results"]] == ["BOX", "LEA", "KNG"]  # spec files, presets, the baseline
    assert data["energy_model"]["access_nj"] == 0.01
    box = data["results"][0]
    assert [row["mechanism"] for row in box["dmm_map"]] == ["simple_segregated_storage", "segregated_fit", "os (fallback)"]
    assert sum(row["requests"] for row in box["dmm_map"]) > 0
    assert box["footprint_samples"][-1][0] == box["events"]


def test_cli_simulate_bad_input_is_one_line(churn_trace, tmp_path, heapkit_cli):
    corrupt = tmp_path / "corrupt.hkt"
    corrupt.write_bytes(churn_trace.read_bytes()[: churn_trace.stat().st_size // 2])
    done = run(heapkit_cli, "simulate", corrupt, "-p", "KNG")
    assert done.returncode == 1 and "truncated" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    bad_energy = tmp_path / "energy.json"
    bad_energy.write_text('{"watts": 3}')
    done = run(heapkit_cli, "simulate", churn_trace, "-p", "KNG", "--energy", bad_energy)
    assert done.returncode == 1 and "unknown energy parameter 'watts'" in done.stderr
    done = run(heapkit_cli, "simulate", churn_trace, "-p", "KNG", "--reserve", "1")
    assert done.returncode == 0  # 1 GiB is plenty for this trace
    huge = tmp_path / "huge.txt"
    huge.write_text("0 new 0x1000 3000000000\n")
    heapkit.import_log(huge, tmp_path / "huge.hkt")
    done = run(heapkit_cli, "simulate", tmp_path / "huge.hkt", "-p", "KNG", "--reserve", "1")
    assert done.returncode == 1 and "does not fit the 1024 MiB reserved" in done.stderr


# ---- any spec as the process's malloc -----------------------------------------------------------

@pytest.mark.parametrize("name", heapkit.PRESETS)
def test_libheapkit_dmm_runs_real_programs(programs, name):
    assert LIBDMM is not None
    expected = subprocess.run([programs["churn"], "20000"], capture_output=True, text=True, check=True).stdout
    env = dict(os.environ, LD_PRELOAD=str(LIBDMM), HEAPKIT_SPEC=str(heapkit.dmm.preset_path(name)))
    done = subprocess.run([programs["churn"], "20000"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout == expected
    script = "import json, collections; d = collections.Counter(str(i % 977) for i in range(200000)); " \
             "print(len(json.dumps(sorted(d.items()))), sum(d.values()))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "13568 200000", done.stderr


def test_libheapkit_dmm_refuses_a_bad_spec(programs, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "heapkit-dmm/1", "allocators": [{"range": [0, null], "mechanism": "lea", "x": 1}]}')
    for spec in (None, bad):
        env = dict(os.environ, LD_PRELOAD=str(LIBDMM))
        if spec is not None:
            env["HEAPKIT_SPEC"] = str(spec)
        done = subprocess.run([programs["churn"], "10"], capture_output=True, text=True, env=env)
        assert done.returncode == 127 and done.stdout == ""
        assert done.stderr.startswith("heapkit-dmm: ")
        assert ("allocators[0].x: not a field" if spec else "HEAPKIT_SPEC is not set") in done.stderr


def test_a_design_too_slow_to_finish_is_abandoned(tmp_path):
    """20 000 objects freed in random order onto one address-ordered list: every free walks
    the list, thousands of steps an operation. With a budget the simulation stops early."""
    rng = random.Random(1)
    addresses = [0x10000 + 64 * i for i in range(20000)]
    lines = [f"{i} new {hex(a)} 40" for i, a in enumerate(addresses)]
    rng.shuffle(addresses)
    lines += [f"{20000 + i} delete {hex(a)}" for i, a in enumerate(addresses)]
    log = tmp_path / "walk.txt"
    log.write_text("\n".join(lines) + "\n")
    trace = tmp_path / "walk.hkt"
    heapkit.import_log(log, trace)
    slow = {"format": "heapkit-dmm/1", "allocators": [{"range": [0, None], "mechanism": "segregated_lists", "classes": 1,
                                                       "list": {"order": "address"}, "split": False, "coalesce": "none",
                                                       "header": "size8"}]}
    finished, abandoned = heapkit.simulate(trace, slow)[0], heapkit.simulate(trace, slow, max_steps_per_event=50)[0]
    assert not finished.abandoned and finished.work > 50 * finished.events
    assert abandoned.abandoned and abandoned.events < finished.events
    from heapkit.search import INFEASIBLE, Design

    assert Design(heapkit.parse_spec(json.dumps(slow)), abandoned.to_dict()).objective("work") == INFEASIBLE


def test_a_heap_per_thread_is_predicted_as_replayed(programs, tmp_path):
    """A recorded program of two threads (one allocates, the other frees: remote frees) on
    the thread-aware design: the simulator's heap per trace thread and heapkit-replay's
    (one thread naming each run's thread) hold the same bytes; a design with one heap for
    every thread too."""
    trace = tmp_path / "handoff.hkt"
    heapkit.record([str(programs["handoff"])], trace)
    assert len(heapkit.stats(trace).threads) == 2
    for name in ("HKS", "LEA"):
        predicted = heapkit.simulate(trace, name)[0]
        measured = heapkit.replay(trace, f"spec:{heapkit.dmm.preset_path(name)}", runs=1)
        assert measured.runs[0].heap_peak_bytes_held == predicted.peak_footprint, name


def test_free_pages_kept_below_the_peak_never_raise_the_simulated_peak(tmp_path):
    """resident_free.below_peak: 20 spans of 320 KiB, every other one freed (holes no later
    request fits), then 6 of 704 KiB, climbing past the first peak. libheapkit.so's budget
    keeps the holes' pages through the climb; capped below the peak in use, they go, and
    the peak footprint is the bytes in use at the peak and the segments' metadata. The
    grammar offers such budgets to the search."""
    from heapkit.grammar import PAGE_SEGREGATED_CHOICES

    kib = 1024
    lines, t = [], 0
    small = [0x100000 + 0x100000 * i for i in range(20)]
    for a in small:
        lines.append(f"{t} new {hex(a)} {320 * kib}")
        t += 1
    for a in small[::2]:
        lines.append(f"{t} delete {hex(a)}")
        t += 1
    for i in range(6):
        lines.append(f"{t} new {hex(0x8000000 + 0x100000 * i)} {704 * kib}")
        t += 1
    log = tmp_path / "climb.txt"
    log.write_text("\n".join(lines) + "\n")
    trace = tmp_path / "climb.hkt"
    heapkit.import_log(log, trace)

    def spec(below_peak: bool) -> dict:
        budget = {"min_bytes": 4194304, "max_bytes": 134217728, "in_use_percent": 150}
        if below_peak:
            budget["below_peak"] = True
        return {"format": "heapkit-dmm/1", "name": "capped" if below_peak else "default",
                "allocators": [{"range": [0, None], "mechanism": "page_segregated", "resident_free": budget}]}

    default, capped = heapkit.simulate(trace, [spec(False), spec(True)])
    peak_in_use = (10 * 320 + 6 * 704) * kib
    assert default.peak_footprint > peak_in_use + 3 * 1024 * kib, "the default budget keeps the holes"
    assert capped.peak_footprint <= peak_in_use + 256 * kib, "free pages raised the peak"
    assert '"below_peak":true' in heapkit.parse_spec(json.dumps(spec(True))).normalized
    assert '"below_peak"' not in heapkit.parse_spec(json.dumps(spec(False))).normalized
    assert any('"below_peak": true' in c for c in PAGE_SEGREGATED_CHOICES["resident_free"])
