"""The heapkit package end to end: convert, stats, bad input, record, replay."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

import heapkit
from helpers import run

TEXT = """0 new 0x55d0a0 24
1 new 0x55d0c0 100
2 delete 0x55d0a0
3 new 0x55d0a0 8
4 delete 0x55d0c0
5 delete 0x55d0a0
"""


@pytest.fixture
def small_trace(tmp_path) -> Path:
    log = tmp_path / "small.txt"
    log.write_text(TEXT)
    out = tmp_path / "small.hkt"
    summary = heapkit.import_log(log, out)
    assert summary["events"] == 6
    return out



# ---- format, convert, stats -----------------------------------------------------------------


def test_text_log_converts_and_profiles(small_trace):
    assert heapkit.detect_format(small_trace.with_suffix(".txt")) == "text"
    header = heapkit.read_header(small_trace)
    assert header.source == "text" and header.version == heapkit.FORMAT_VERSION
    s = heapkit.stats(small_trace)
    assert (s.objects, s.total_bytes, s.max_live_bytes, s.max_live_objects) == (3, 132, 124, 2)
    assert s.average_size == 44.0
    assert s.total_to_max_ratio == pytest.approx(132 / 124)
    assert s.top_sizes[0] == (8, 1)
    assert max(p[2] for p in s.live_over_time) == 124
    cols = np.concatenate([c["op"] for c in heapkit.events(small_trace)])
    assert list(cols) == [0, 0, 4, 0, 4, 4]


def test_round_trip_through_text_and_mtrace(small_trace, tmp_path):
    for fmt in ("text", "mtrace"):
        log = tmp_path / f"out.{fmt}"
        assert heapkit.export_log(small_trace, log, fmt) == 6
        again = tmp_path / f"again-{fmt}.hkt"
        heapkit.import_log(log, again, fmt)
        a = heapkit.stats(small_trace)
        b = heapkit.stats(again)
        assert (a.objects, a.total_bytes, a.max_live_bytes) == (b.objects, b.total_bytes, b.max_live_bytes)


def test_compressed_logs(tmp_path):
    import gzip

    import zstandard

    (tmp_path / "log.gz").write_bytes(gzip.compress(TEXT.encode()))
    (tmp_path / "log.zst").write_bytes(zstandard.ZstdCompressor().compress(TEXT.encode()))
    for name in ("log.gz", "log.zst"):
        out = tmp_path / (name + ".hkt")
        assert heapkit.import_log(tmp_path / name, out)["events"] == 6


def test_cli_stats_and_convert(small_trace, tmp_path, heapkit_cli):
    done = run(heapkit_cli, "stats", small_trace)
    assert done.returncode == 0, done.stderr
    assert "max bytes in use" in done.stdout and "124" in done.stdout
    done = run(heapkit_cli, "stats", "--json", small_trace)
    import json

    assert json.loads(done.stdout)["max_live_bytes"] == 124
    out = tmp_path / "back.txt"
    done = run(heapkit_cli, "convert", small_trace, "-o", out)
    assert done.returncode == 0, done.stderr
    assert out.read_text().splitlines()[0] == "0 new 0x10000 24"


def test_mtrace_log_of_a_real_program(programs, tmp_path):
    log = tmp_path / "mtrace.log"
    env = {**os.environ, "MALLOC_TRACE": str(log)}
    # Since glibc 2.34 mtrace() works only with the malloc debugging library preloaded.
    debug = sorted(Path("/").glob("usr/lib/*/libc_malloc_debug.so*")) + sorted(Path("/").glob("lib/*/libc_malloc_debug.so*"))
    if debug:
        env["LD_PRELOAD"] = str(debug[0])
    subprocess.run([programs["mtrace"]], env=env, check=True)
    out = tmp_path / "mtrace.hkt"
    summary = heapkit.import_log(log, out, lenient=True)
    s = heapkit.stats(out)
    assert s.reallocs == 1
    sizes = dict(s.top_sizes)
    assert sizes.get(100) == 1 and sizes.get(200) == 1 and sizes.get(300) == 1
    assert summary["events"] >= 5


@pytest.mark.skipif(shutil.which("heaptrack") is None, reason="heaptrack is not installed")
def test_heaptrack_raw_file_of_a_real_program(programs, tmp_path):
    subprocess.run(["heaptrack", "--raw", "-o", str(tmp_path / "ht"), programs["known"]], check=True,
                   capture_output=True)
    raw = next(tmp_path.glob("ht*.raw*"))
    out = tmp_path / "ht.hkt"
    heapkit.import_log(raw, out, lenient=True)
    sizes = dict(heapkit.stats(out, top_sizes=50).top_sizes)
    assert sizes.get(4321) == 1000
    assert sizes.get(12345) == 1


def _stats_json(cli, trace) -> dict:
    import json

    done = run(cli, "stats", "--json", trace)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _all_events(trace) -> dict:
    chunks = list(heapkit.events(trace))
    return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}


# What a heaptrack file cannot carry: nanoseconds (its clock ticks in milliseconds), the
# header, and so the encoded size.
_TIMED = {"header", "duration_ns", "lifetime_ns_mean", "live_over_time", "trace_bytes", "bytes_per_event"}


@pytest.mark.skipif(shutil.which("heaptrack_print") is None, reason="heaptrack is not installed")
@pytest.mark.parametrize("program", ["known", "threads_fork_exec"])
def test_heaptrack_export_reads_in_heaptrack_print_and_round_trips(programs, tmp_path, heapkit_cli, program):
    trace = tmp_path / f"{program}.hkt"
    done = run(heapkit_cli, "record", "-o", trace, "--", programs[program])
    assert done.returncode in (0, 5), done.stderr
    exported = tmp_path / f"heaptrack.{program}.zst"
    done = run(heapkit_cli, "convert", trace, "-o", exported, "--to", "heaptrack")
    assert done.returncode == 0, done.stderr
    original = _stats_json(heapkit_cli, trace)

    # heaptrack's own reader: its totals are the trace's.
    stacks = tmp_path / "peak.stacks"
    shown = subprocess.run(["heaptrack_print", "-f", str(exported), "-F", str(stacks), "--flamegraph-cost-type", "peak"],
                           capture_output=True, text=True, check=True)
    assert "failed" not in shown.stderr.lower(), shown.stderr
    calls = int(shown.stdout.split("calls to allocation functions:")[1].split()[0])
    assert calls == original["objects"]
    # The flame graph's "peak" cost is each backtrace's bytes at the peak: they add up to it.
    peak = sum(int(line.rsplit(" ", 1)[1]) for line in stacks.read_text().splitlines() if line.strip())
    assert peak == original["max_live_bytes"]
    leaked = tmp_path / "leaked.stacks"
    subprocess.run(["heaptrack_print", "-f", str(exported), "-F", str(leaked), "--flamegraph-cost-type", "leaked"],
                   capture_output=True, check=True)
    assert sum(int(line.rsplit(" ", 1)[1]) for line in leaked.read_text().splitlines() if line.strip()) == original["end_live_bytes"]
    # Every kind of call is a frame of its own.
    if program == "known":
        for frame in ("malloc", "calloc", "realloc", "aligned_alloc [alignment 4096]", "aligned_alloc [alignment 256]"):
            assert f"\n{frame}\n" in shown.stdout, frame

    # And back: the same operations on the same objects in the same threads.
    back = tmp_path / f"{program}.back.hkt"
    done = run(heapkit_cli, "convert", exported, "-o", back)
    assert done.returncode == 0, done.stderr
    imported = _stats_json(heapkit_cli, back)
    assert {k: v for k, v in imported.items() if k not in _TIMED} == {k: v for k, v in original.items() if k not in _TIMED}
    a, b = _all_events(trace), _all_events(back)
    for column in ("op", "thread", "id", "old_id", "size", "alignment"):
        assert np.array_equal(a[column], b[column]), column
    assert np.array_equal(a["time"] // 1_000_000, b["time"] // 1_000_000)
    assert [t["os_tid"] for t in imported["threads"]] == [t["os_tid"] for t in original["threads"]]


def test_heaptrack_interpreted_file_errors_name_the_line(tmp_path, heapkit_cli):
    head = "v 10400 3\nX prog\ns d heapkit-trace\ns 6 malloc\ni 1000 1 2\nt 1 0\na 20 1\n"
    cases = {
        "+ 7\n": "allocation site 7 is not defined yet",
        "- 0\n": "no live allocation",
        "a 20 9\n": "backtrace 9 is not defined yet",
        "s 9 short\n": "string of 5 bytes where its line says 9",
        "m 1 -\n": "a line of heaptrack's raw file ('m') in its interpreted file",
        "# heapkit thread x tid 1\n": "expected '# heapkit thread <index> tid <os thread id>'",
    }
    for n, (tail, message) in enumerate(cases.items()):
        log = tmp_path / f"bad{n}.heaptrack"
        log.write_text(head + tail)
        done = run(heapkit_cli, "convert", "--from", "heaptrack", log, "-o", tmp_path / "bad.hkt")
        assert done.returncode == 1, (tail, done.stdout)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "line 8 (offset" in lines[0] and message in lines[0], (tail, done.stderr)
        assert not (tmp_path / "bad.hkt").exists()
    log = tmp_path / "lenient.heaptrack"
    log.write_text(head + "- 0\n+ 0\n")
    assert heapkit.import_log(log, tmp_path / "ok.hkt", "heaptrack", lenient=True)["unknown_frees"] == 1


# ---- bad input ------------------------------------------------------------------------------


def test_bad_traces_give_one_line_with_the_offset(small_trace, tmp_path, heapkit_cli):
    data = small_trace.read_bytes()
    cases = {
        "truncated": data[:-3],
        "version": data[:4] + b"\x07" + data[5:],
        "garbage": b"not a trace at all",
        "empty": b"",
    }
    # A free of an object that was never allocated: replace the end record.
    cases["unknown-free"] = data[:-2] + bytes([4, 50, 6, 7])
    for name, content in cases.items():
        bad = tmp_path / f"{name}.hkt"
        bad.write_bytes(content)
        with pytest.raises(heapkit.TraceError, match="offset"):
            heapkit.stats(bad)
        for command in ("stats", "check", "replay"):
            done = run(heapkit_cli, command, bad, timeout=60)
            assert done.returncode == 1, (name, command, done.stdout, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and "offset" in lines[0], (name, command, done.stderr)
            assert "Traceback" not in done.stderr
    err = run(heapkit_cli, "stats", tmp_path / "version.hkt").stderr
    assert "unsupported trace format version 7.0" in err


def test_bad_logs_name_the_line(tmp_path, heapkit_cli):
    log = tmp_path / "bad.txt"
    log.write_text("0 new 0x10 8\n1 delete 0x20\n")
    done = run(heapkit_cli, "convert", log, "-o", tmp_path / "bad.hkt")
    assert done.returncode == 1
    assert "line 2" in done.stderr and "unknown address 0x20" in done.stderr
    assert not (tmp_path / "bad.hkt").exists()
    done = run(heapkit_cli, "convert", "--lenient", log, "-o", tmp_path / "ok.hkt")
    assert done.returncode == 0, done.stderr


# ---- record ---------------------------------------------------------------------------------


def test_record_every_entry_point(programs, tmp_path):
    result = heapkit.record([str(programs["known"])], tmp_path / "known.hkt")
    assert result.returncode == 0
    s = heapkit.stats(result.main.path, top_sizes=100)
    sizes = dict(s.top_sizes)
    assert sizes[4321] == 1000
    assert sizes[12345] == 1 and sizes[7777] == 1 and sizes[23456] == 1 and sizes[3333] == 1 and sizes[2560] == 1
    assert s.callocs >= 1 and s.reallocs >= 1 and s.aligned >= 2
    chunks = list(heapkit.events(result.main.path))
    ops = np.concatenate([c["op"] for c in chunks])
    size = np.concatenate([c["size"] for c in chunks])
    align = np.concatenate([c["alignment"] for c in chunks])
    assert set(align[(ops == 3) & (size == 3333)]) == {4096}
    assert set(align[(ops == 3) & (size == 2560)]) == {256}
    # The program frees 1004 objects (the realloc ends the 1005th); libc frees none of its own.
    assert s.frees == 1004


def test_a_c_programs_trace_holds_only_its_own_calls(programs, tmp_path):
    """The recorder loads no C++ runtime: a C program's trace is exactly the calls the
    program made, in order (libstdc++'s start-up allocation, a 72,704-byte emergency
    pool, used to come first in every trace)."""
    result = heapkit.record([str(programs["known"])], tmp_path / "known.hkt")
    assert result.returncode == 0
    chunks = list(heapkit.events(result.main.path))
    ops = np.concatenate([c["op"] for c in chunks]).tolist()
    sizes = np.concatenate([c["size"] for c in chunks]).tolist()
    malloc, calloc, realloc, aligned, free = 0, 1, 2, 3, 4
    expected_ops = [malloc, calloc, realloc, aligned, aligned, free, free, free, free] + [malloc, free] * 1000
    assert ops == expected_ops
    allocated = [size for op, size in zip(ops, sizes) if op != free]
    assert allocated == [12345, 7777, 23456, 3333, 2560] + [4321] * 1000


def test_record_orders_threads_that_hand_objects_over(programs, tmp_path, heapkit_cli):
    out = tmp_path / "handoff.hkt"
    done = run(heapkit_cli, "record", "-o", out, "--", programs["handoff"])
    assert done.returncode == 0, done.stderr
    assert run(heapkit_cli, "check", out).returncode == 0
    s = heapkit.stats(out, top_sizes=100)
    sizes = dict(s.top_sizes)
    assert sizes[4040] == 20000 and sizes[3131] == 1000
    consumer = [t for t in s.threads if t.remote_frees >= 20000]
    assert len(consumer) == 1, s.threads  # every object freed by the thread that did not allocate it
    ops = _all_events(out)
    freed = set(ops["id"][ops["op"] == 4].tolist())
    made = ops["id"][(ops["op"] == 0) & (ops["size"] == 4040)]
    assert all(int(i) in freed for i in made)


def test_record_threads_fork_and_exec(programs, tmp_path, heapkit_cli):
    out = tmp_path / "tfe.hkt"
    done = run(heapkit_cli, "record", "-o", out, "--", programs["threads_fork_exec"])
    assert done.returncode == 5, done.stderr  # the program's own status
    main = heapkit.stats(out, top_sizes=100)
    assert dict(main.top_sizes)[5555] == 1500
    assert len([t for t in main.threads if t.allocations >= 500]) == 3
    others = sorted(tmp_path.glob("tfe.*.hkt"), key=lambda p: "-" in p.name)
    assert len(others) == 2, others  # the child before (tfe.PID.hkt) and after (tfe.PID-1.hkt) its exec
    before, after = (heapkit.stats(p, top_sizes=100) for p in others)
    assert dict(before.top_sizes).get(6666) == 1
    assert 5555 not in dict(before.top_sizes)  # the parent's records stay the parent's
    assert dict(after.top_sizes).get(7070) == 1


def test_record_survives_a_crash(programs, tmp_path, heapkit_cli):
    out = tmp_path / "crash.hkt"
    done = run(heapkit_cli, "record", "-o", out, "--", programs["crash"])
    assert done.returncode == 128 + 11, done.stderr
    s = heapkit.stats(out, top_sizes=5)
    assert dict(s.top_sizes)[8888] == 200000  # every block, written or queued, reached the spool


def test_record_leaves_a_programs_signal_handlers_alone(tmp_path, heapkit_cli):
    # Python reads its handlers at start: a foreign SIGINT handler would cost it
    # KeyboardInterrupt, and its forkserver pool would respawn failing workers forever.
    script = tmp_path / "signals.py"
    script.write_text(
        "import multiprocessing, signal, sys\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGINT)\n"
        "assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, signal.getsignal(signal.SIGTERM)\n"
        "if __name__ == '__main__':\n"
        "    with multiprocessing.get_context('forkserver').Pool(2) as pool:\n"
        "        print(sum(pool.map(abs, [-1, -2, -3])))\n")
    # The recorder starts with the default handlers (a shell ignores SIGINT in the jobs it
    # puts in the background, and its children inherit that), so the program must see them.
    def default_handlers():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    done = run(heapkit_cli, "record", "-o", tmp_path / "py.hkt", "--", shutil.which("python3"), script, timeout=120,
               preexec_fn=default_handlers)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "6"


# ---- replay ---------------------------------------------------------------------------------


def test_replay_on_glibc_and_heapkit_allocators(programs, tmp_path, heapkit_cli):
    result = heapkit.record([str(programs["known"])], tmp_path / "known.hkt")
    r = heapkit.replay(result.main.path, "glibc", runs=2)
    assert r.operations == result.main.events and len(r.runs) == 2
    assert r.median_seconds > 0 and r.max_live_bytes >= 23456
    for name in ("kingsley", "lea"):
        assert heapkit.resolve_allocator(name).name == f"libheapkit-{name}.so"
        assert heapkit.replay(result.main.path, name, runs=1).operations == r.operations
    done = run(heapkit_cli, "replay", result.main.path, "-a", "glibc", "-a", "lea", "-n", "1")
    assert done.returncode == 0, done.stderr
    assert "lea" in done.stdout and "glibc" in done.stdout


def test_replay_uses_the_preloaded_library(tmp_path):
    # A malloc that fails exactly the trace's three sizes proves the replayer runs on the
    # preloaded library.
    cc = shutil.which("cc")
    src = tmp_path / "nomem.c"
    src.write_text("#include <stddef.h>\nvoid* __libc_malloc(size_t);\n"
                   "void* malloc(size_t n) { return n >= 12340 && n < 12350 ? NULL : __libc_malloc(n); }\n")
    lib = tmp_path / "libnomem.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    log = tmp_path / "t.txt"
    log.write_text("0 new 0x10 12341\n1 new 0x20 12342\n2 new 0x30 9000\n3 delete 0x30\n")
    heapkit.import_log(log, tmp_path / "t.hkt")
    r = heapkit.replay(tmp_path / "t.hkt", str(lib), runs=1)
    assert r.runs[0].failed_allocations == 2
    assert heapkit.replay(tmp_path / "t.hkt", "glibc", runs=1).runs[0].failed_allocations == 0


def test_unknown_allocator_is_a_clear_error(small_trace, heapkit_cli):
    done = run(heapkit_cli, "replay", small_trace, "-a", "nosuchmalloc")
    assert done.returncode == 1 and "unknown allocator" in done.stderr


# ---- bad input that must neither crash nor lose data ----------------------------------------


def test_failed_convert_keeps_the_existing_output(small_trace, tmp_path, heapkit_cli):
    precious = tmp_path / "precious.hkt"
    precious.write_bytes(small_trace.read_bytes())
    truncated = tmp_path / "truncated.hkt"
    truncated.write_bytes(small_trace.read_bytes()[:-3])
    done = run(heapkit_cli, "convert", truncated, "-o", precious)
    assert done.returncode == 1 and "offset" in done.stderr
    assert precious.read_bytes() == small_trace.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.hkt", "small.hkt", "small.txt", "truncated.hkt"]


def test_convert_a_log_onto_itself(tmp_path, heapkit_cli):
    log = tmp_path / "same.txt"
    log.write_text(TEXT)
    done = run(heapkit_cli, "convert", log, "-o", log)
    assert done.returncode == 0, done.stderr
    assert heapkit.stats(log).events == 6


def test_unwritable_outputs_and_unrunnable_commands_are_one_line(small_trace, tmp_path, heapkit_cli):
    cases = [
        ("convert", small_trace, "-o", tmp_path / "missing" / "x.txt"),
        ("convert", small_trace, "-o", "/dev/full"),
        ("record", "-o", tmp_path / "p.hkt", "--", "/etc/passwd"),
        ("record", "-o", tmp_path / "d.hkt", "--", tmp_path),
    ]
    for args in cases:
        done = run(heapkit_cli, *args, timeout=60)
        assert done.returncode == 1, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, (args, done.stderr)


def test_a_fifo_is_refused_not_waited_on(tmp_path, heapkit_cli):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in (("stats", fifo), ("check", fifo), ("convert", fifo, "-o", tmp_path / "x.hkt")):
        done = run(heapkit_cli, *args, timeout=30)
        assert done.returncode == 1 and "not a regular file" in done.stderr, (args, done.stderr)


def test_corrupt_and_truncated_compressed_logs(tmp_path, heapkit_cli):
    import gzip
    import lzma

    import zstandard

    text = (TEXT * 200).encode()
    for suffix, compress in ((".gz", gzip.compress), (".xz", lzma.compress), (".zst", zstandard.compress)):
        whole = compress(text)
        for name, data in (("truncated", whole[: len(whole) // 2]),
                           ("corrupt", whole[:12] + bytes(b ^ 0x5A for b in whole[12:40]) + whole[40:])):
            log = tmp_path / f"{name}{suffix}"
            log.write_bytes(data)
            out = tmp_path / "out.hkt"
            done = run(heapkit_cli, "convert", "--from", "text", log, "-o", out, timeout=60)
            assert done.returncode == 1, (log.name, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert not out.exists()


def test_log_contents_that_no_program_produces(tmp_path, heapkit_cli):
    cases = {
        "backwards.txt": ("5 new 0x10 24\n1 delete 0x10\n", "is before the previous line's"),
        "huge.txt": ("0 new 0x10 18446744073709551615\n", "larger than any allocation"),
        "heaptrack.txt": ("+ 10 1 1000\n", "must begin with the version line"),
        "thread.txt": ("v 10400 3\ns 1 x\n# heapkit thread 4294967294 tid 1\na 8 0\n+ 0\n", "too large"),
    }
    for name, (content, message) in cases.items():
        log = tmp_path / name
        log.write_text(content)
        fmt = "heaptrack" if name.startswith(("heaptrack", "thread")) else "text"
        done = run(heapkit_cli, "convert", "--from", fmt, log, "-o", tmp_path / "x.hkt", timeout=60)
        assert done.returncode == 1 and message in done.stderr and "line" in done.stderr, (name, done.stderr)
    done = run(heapkit_cli, "convert", "--lenient", tmp_path / "backwards.txt", "-o", tmp_path / "x.hkt")
    assert done.returncode == 0, done.stderr


def test_trace_text_is_shown_as_text(tmp_path, heapkit_cli):
    # Header strings are bytes in the file: invalid UTF-8 and rich markup in them are shown,
    # never interpreted.
    log = tmp_path / "[red]odd.txt"
    log.write_text(TEXT)
    trace = tmp_path / "odd.hkt"
    heapkit.import_log(log, trace)
    data = bytearray(trace.read_bytes())
    data[data.index(b"odd")] = 0xFF
    trace.write_bytes(bytes(data))
    for command in ("stats", "check"):
        done = run(heapkit_cli, command, trace)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (command, done.stderr)
    assert "[red]" in run(heapkit_cli, "stats", trace).stdout
    assert "\ufffd" in heapkit.read_header(trace).command
    bad = tmp_path / "a[" / "b]"  # a path that reads as a closing markup tag: a[/b]
    bad.mkdir(parents=True)
    (bad / "t.hkt").write_bytes(b"not a trace")
    done = run(heapkit_cli, "stats", bad / "t.hkt")
    assert done.returncode == 1 and "a[/b]" in done.stderr and "Traceback" not in done.stderr


def test_replay_refuses_a_library_without_malloc(small_trace, heapkit_cli):
    for library in ("/etc/passwd", next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                                                   "/lib/aarch64-linux-gnu/libm.so.6") if os.path.exists(p))):
        done = run(heapkit_cli, "replay", "-n", "1", "-a", library, small_trace, timeout=60)
        assert done.returncode == 1 and "is not a malloc library" in done.stderr, (library, done.stderr)
