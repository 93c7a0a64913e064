"""One trace loop, one realloc(p, 0): the simulator, heapkit-replay and the verifier that
`heapkit build` compiles apply a trace with the same loop (include/heapkit/trace/TraceLoop.h),
with glibc's semantics: realloc(p, 0) frees p and returns NULL, which is no failed
allocation, and the new object of the trace's realloc is then no object."""

from __future__ import annotations

import json
import subprocess

import pytest

import heapkit
from heapkit import build as hb

REALLOCS = 200


@pytest.fixture(scope="module")
def realloc_zero_trace(tmp_path_factory):
    """An mtrace log of realloc(p, 0) calls (as a program on another allocator logs them)
    turned into a trace: each 5000-byte object is realloc'ed to 0 bytes and the result freed."""
    d = tmp_path_factory.mktemp("realloc0")
    lines = ["= Start"]
    for i in range(REALLOCS):
        old, new = 0x100000 + i * 0x10000, 0x100000 + i * 0x10000 + 0x8000
        lines += [f"@ ./prog:[0x401000] + {old:#x} 0x1388", f"@ ./prog:[0x401000] < {old:#x}",
                  f"@ ./prog:[0x401000] > {new:#x} 0x0", f"@ ./prog:[0x401000] - {new:#x}"]
    lines.append("= End")
    log = d / "realloc0.mtrace"
    log.write_text("\n".join(lines) + "\n")
    trace = d / "realloc0.hkt"
    heapkit.import_log(log, trace, format="mtrace")
    assert heapkit.stats(trace).reallocs == REALLOCS
    return trace


def test_the_simulator_frees_on_realloc_to_zero(realloc_zero_trace):
    for name in ("KNG", "LEA", "S10"):
        r = heapkit.simulate(realloc_zero_trace, heapkit.dmm.preset_path(name))[0]
        assert r.reallocs == REALLOCS
        assert r.failed == 0, name
        # One 5000-byte object at a time: realloc(p, 0) gave each back.
        assert r.live_bytes_at_peak <= 5000, name


def test_the_replayer_frees_on_realloc_to_zero(realloc_zero_trace):
    glibc = heapkit.replay(realloc_zero_trace, "glibc", runs=1)
    assert glibc.runs[0].failed_allocations == 0
    for name in ("KNG", "LEA"):
        preset = heapkit.dmm.preset_path(name)
        measured = heapkit.replay(realloc_zero_trace, f"spec:{preset}", runs=1, touch=False)
        assert measured.runs[0].failed_allocations == 0, name
        assert measured.runs[0].heap_peak_bytes_held == heapkit.simulate(realloc_zero_trace, preset)[0].peak_footprint


def test_the_verifier_frees_on_realloc_to_zero(realloc_zero_trace, tmp_path):
    built = hb.build(heapkit.preset("KNG"), tmp_path / "libkng.so")
    done = subprocess.run([str(built.verifier), str(realloc_zero_trace), "--no-touch"], capture_output=True, text=True,
                          check=True)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert data["operations"] == 3 * REALLOCS
    assert data["failed_allocations"] == 0
    assert data["heap_peak_bytes_held"] == heapkit.simulate(realloc_zero_trace, heapkit.dmm.preset_path("KNG"))[0].peak_footprint


def test_a_bad_trace_is_one_error_with_its_offset(realloc_zero_trace, tmp_path):
    broken = tmp_path / "broken.hkt"
    broken.write_bytes(realloc_zero_trace.read_bytes()[:-3])
    with pytest.raises(heapkit.TraceError, match=r"^.*offset \d+: "):
        heapkit.replay(broken, "glibc", runs=1)
    with pytest.raises(heapkit.SimulationError, match=r"offset \d+: "):
        heapkit.simulate(broken, heapkit.dmm.preset_path("KNG"))
