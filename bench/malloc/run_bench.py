#!/usr/bin/env python3
"""Drop-in malloc benchmarks: every workload under glibc, jemalloc, mimalloc, tcmalloc and
every heapkit preload library, in one run, in fresh processes. Reports wall time and peak
RSS as ratios to glibc (and the scalable library against mimalloc), system calls per
second and page faults per allocator, checks that every allocator gives the same
checksum, and writes the "## Drop-in malloc" section of docs/benchmarks.md. Run by
`make bench-malloc`.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SYSTEM_LIBS = Path("/usr/lib/x86_64-linux-gnu")
PEERS = [
    ("glibc", None),
    ("jemalloc", SYSTEM_LIBS / "libjemalloc.so.2"),
    ("mimalloc", SYSTEM_LIBS / "libmimalloc.so.2"),
    ("tcmalloc", SYSTEM_LIBS / "libtcmalloc_minimal.so.4"),
]
HEAPKIT = [
    ("heapkit", "libheapkit.so"),
    ("heapkit-lea", "libheapkit-lea.so"),
    ("heapkit-kingsley", "libheapkit-kingsley.so"),
]
SECTION = "## Drop-in malloc"
SINGLE_THREADED = ("cfrac", "espresso", "gcbench", "lindsay", "alloctest")
# The shipped libraries without their hardening (bench/malloc/CMakeLists.txt), run beside
# the hardened ones on these workloads to measure what the checks cost.
UNHARDENED = [
    ("heapkit", "libheapkit-unhardened-scalable.so"),
    ("heapkit-lea", "libheapkit-unhardened-lea.so"),
    ("heapkit-kingsley", "libheapkit-unhardened-kingsley.so"),
]
HARDENING_WORKLOADS = SINGLE_THREADED + ("server x1", "churn x1")
MULTI_THREADED = ("server", "churn", "falseshare", "buffers", "bigblocks", "prodcons", "mixedstress")
# Issue 21's medium- and large-block workloads: libheapkit.so's system calls per second
# and page faults within 2x of the best peer's, its time within 1.05x of the best peer's.
MEDIUM_BLOCKS = ("prodcons", "mixedstress", "buffers", "bigblocks")
PEER_NAMES = [name for name, _ in PEERS]
# The fast peers the single-threaded fast path is measured against (issue 21: within 1.03x
# of the best one's time).
FAST_PEERS = ("jemalloc", "mimalloc", "tcmalloc")
# The misuse suite (tests/hardening/misuse.c): its sized cases are <kind>-<size>.
MISUSE_KINDS = ("double-free", "invalid-free", "unaligned-free", "overflow-1", "overflow-32", "underflow-1",
                "underflow-32", "write-after-free", "overflow-1m")
MISUSE_SIZES = ("small", "medium", "large")
MISUSE_MARKS = {"abort": "A", "abort, no line": "a", "fault": "F", "other signal": "S", "error": "E", "-": "-"}


def misuse_table(build, allocators):
    """The misuse suite under every allocator and libheapkit-secure.so, as kind x size per
    allocator (each cell: small, medium, large), and the cases each stops of all of them;
    with the stopped counts of glibc and the secure library. None when it is not built."""
    program = build / "tests" / "hardening" / "heapkit_misuse"
    secure = build / "src" / "preload" / "libheapkit-secure.so"
    if not program.exists() or not secure.exists():
        print(f"note: {program} or {secure} not built: no misuse table", file=sys.stderr)
        return None
    columns = [(name, path) for name, path in allocators] + [("heapkit-secure", secure.resolve())]
    process = subprocess.run([str(program), "--table"] + [f"{name}={path or ''}" for name, path in columns],
                             capture_output=True, text=True)
    # Exit 1 means the last column (the secure library) stops fewer cases than the first
    # (glibc): a target the caller reports, not a failure of the run.
    if process.returncode not in (0, 1):
        sys.exit(f"FAILED ({process.returncode}): {program} --table\n{process.stderr}")
    rows = {}
    for line in process.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == len(columns) + 1 and cells[0] not in ("case", "---"):
            rows[cells[0].strip("*")] = [c.strip("*") for c in cells[1:]]
    names = [name for name, _ in columns]
    lines = ["| kind | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for kind in MISUSE_KINDS:
        cells = [kind]
        for index in range(len(names)):
            marks = [MISUSE_MARKS.get(rows[f"{kind}-{size}"][index], "?") if f"{kind}-{size}" in rows else " "
                     for size in MISUSE_SIZES]
            cells.append(" ".join(marks).strip())
        lines.append("| " + " | ".join(cells) + " |")
    total = next((key for key in rows if key.startswith("stopped, of")), None)
    if total is None:
        sys.exit(f"{program} --table printed no total:\n{process.stdout}")
    lines.append(f"| {total} (every case) | " + " | ".join(rows[total]) + " |")
    stopped = dict(zip(names, (int(c) for c in rows[total])))
    return "\n".join(lines), stopped


def preload_env(preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = str(preload)
    return env


def run_measured(command, preload):
    """Wall seconds, CPU seconds (user + system), peak RSS in KiB, page faults (minor +
    major) and stdout of one fresh process. /usr/bin/time forks the program from a small
    process: a child forked from Python would count Python's own pages in its peak RSS."""
    # Preloaded into /usr/bin/time itself, whose child inherits it: an `env` in between
    # would be the measured process first, and its pages would count in the peak RSS.
    prefix = ["/usr/bin/time", "-f", "HEAPKIT-BENCH %e %M %U %S %R %F", "--"]
    process = subprocess.run(prefix + list(command), env=preload_env(preload), capture_output=True)
    raise_if_failed(command, preload, process.returncode, process.stderr)
    match = re.search(rb"HEAPKIT-BENCH ([0-9.]+) ([0-9]+) ([0-9.]+) ([0-9.]+) ([0-9]+) ([0-9]+)", process.stderr)
    if match is None:
        sys.exit(f"no timing from /usr/bin/time: {process.stderr.decode()}")
    cpu = float(match.group(3)) + float(match.group(4))
    faults = int(match.group(5)) + int(match.group(6))
    return float(match.group(1)), cpu, int(match.group(2)), faults, process.stdout.decode()


# The system calls an allocator makes for memory; the others (futex above all) are mostly
# the program's own synchronisation, whose count depends on timing.
MEMORY_SYSCALLS = ("mmap", "munmap", "mremap", "madvise", "mprotect", "brk")


def syscall_counter():
    """How to count a process's system calls (its threads' too): perf's tracepoints when
    the kernel lets us (counters, no slowdown), else strace -c -f. None when neither works."""
    if shutil.which("perf"):
        probe = subprocess.run(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter", "--", "true"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and re.search(r"^\d+,", probe.stderr, re.M):
            return "perf"
    if shutil.which("strace"):
        return "strace"
    return None


def count_syscalls(counter, command, preload):
    """(all system calls, memory system calls) of one run of the command, a run of its own:
    tracing is not timed."""
    if counter == "perf":
        events = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{name}" for name in MEMORY_SYSCALLS]
        process = subprocess.run(["perf", "stat", "-x,", "-e", ",".join(events), "--"] + list(command),
                                 env=preload_env(preload), capture_output=True, text=True)
        raise_if_failed(command, preload, process.returncode, process.stderr.encode())
        counts = {m.group(2): int(m.group(1)) for m in re.finditer(r"^(\d+),[^,]*,([^,]+),", process.stderr, re.M)}
        if "raw_syscalls:sys_enter" not in counts:
            return None
        return counts["raw_syscalls:sys_enter"], sum(counts.get(f"syscalls:sys_enter_{n}", 0) for n in MEMORY_SYSCALLS)
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        # strace runs the program itself: the preload goes to the traced program only.
        traced = ["strace", "-f", "-c", "-o", out.name] + (["-E", f"LD_PRELOAD={preload}"] if preload else []) + list(command)
        process = subprocess.run(traced, env=preload_env(None), capture_output=True, text=True)
        raise_if_failed(command, preload, process.returncode, process.stderr.encode())
        calls = {}
        for line in out.read().splitlines():
            fields = line.split()
            if len(fields) >= 5 and fields[3].isdigit():
                calls[fields[-1]] = int(fields[3])
        if "total" not in calls:
            return None
        return calls["total"], sum(calls.get(n, 0) for n in MEMORY_SYSCALLS)


def raise_if_failed(command, preload, code, err):
    if code != 0:
        sys.exit(f"FAILED ({code}): LD_PRELOAD={preload or ''} {' '.join(map(str, command))}\n{err.decode()}")


def checksum_of(output):
    match = re.search(r"checksum ([0-9a-f]+)", output)
    return match.group(1) if match else output.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default="build", help="the CMake build directory")
    parser.add_argument("--doc", default="docs/benchmarks.md")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", default="1,2", help="thread counts of the multi-threaded workloads")
    parser.add_argument("--no-doc", action="store_true", help="print the table only")
    parser.add_argument("--only", default="", help="comma-separated workload names to run (default: all)")
    args = parser.parse_args()
    build = Path(args.build)

    allocators = []
    for name, path in PEERS:
        if path is not None and not path.exists():
            print(f"skipping {name}: {path} not installed (scripts/deps/malloc.txt)", file=sys.stderr)
            continue
        allocators.append((name, path))
    for name, file in HEAPKIT:
        path = build / "src" / "preload" / file
        if not path.exists():
            sys.exit(f"{path} is missing: build the heapkit-* preload targets first")
        allocators.append((name, path.resolve()))

    unhardened = []  # (the hardened library's name, the unhardened one's name, path)
    for name, file in UNHARDENED:
        path = build / "bench" / "malloc" / file
        if not path.exists():
            sys.exit(f"{path} is missing: build the heapkit-unhardened-* targets first (make bench-malloc does)")
        unhardened.append((name, f"{name} unhardened", path.resolve()))

    workloads = []
    single = build / "bench" / "heapkit-workload"
    if single.exists():
        for name in SINGLE_THREADED:
            workloads.append((f"{name}", [str(single), name]))
    else:
        print(f"note: {single} not built; single-threaded workloads skipped", file=sys.stderr)
    multi = build / "bench" / "malloc" / "heapkit-mt-workload"
    for threads in args.threads.split(","):
        for name in MULTI_THREADED:
            workloads.append((f"{name} x{threads}", [str(multi), name, threads]))
    if args.only:
        wanted = set(args.only.split(","))
        workloads = [(w, c) for w, c in workloads if w.split(" ")[0] in wanted]

    # What each allocator costs a program that allocates nothing of its own.
    baseline = {}
    for name, preload in allocators:
        peaks = [run_measured(["/bin/true"], preload)[2] for _ in range(args.repeats)]
        baseline[name] = statistics.median(peaks)
        print(f"{'/bin/true':16} {name:17} {baseline[name]:8.0f} KiB", file=sys.stderr)

    counter = syscall_counter()
    if counter is None:
        print("note: neither perf nor strace works here: no system-call counts", file=sys.stderr)
    results = {}  # (workload, allocator) -> (median seconds, median peak KiB)
    cpu_results = {}  # (workload, allocator) -> median CPU seconds (user + system)
    faults = {}  # (workload, allocator) -> median page faults (minor + major)
    syscalls = {}  # (workload, allocator) -> system calls of one run (a run of its own)
    for workload, command in workloads:
        checksums = {}
        measured = list(allocators)
        if workload in HARDENING_WORKLOADS:
            measured += [(name, path) for _, name, path in unhardened]
        samples = {name: ([], [], [], []) for name, _ in measured}
        # Rounds of every allocator once, not one allocator's runs back to back: on a shared
        # machine the load drifts, and it should fall on every allocator alike.
        for _ in range(args.repeats):
            for name, preload in measured:
                elapsed, cpu, peak, faulted, output = run_measured(command, preload)
                samples[name][0].append(elapsed)
                samples[name][1].append(cpu)
                samples[name][2].append(peak)
                samples[name][3].append(faulted)
                checksums[name] = checksum_of(output)
        for name, preload in measured:
            times, cpus, peaks, faulted = samples[name]
            results[workload, name] = (statistics.median(times), statistics.median(peaks))
            cpu_results[workload, name] = statistics.median(cpus)
            faults[workload, name] = statistics.median(faulted)
            if counter is not None and name in [n for n, _ in allocators]:
                syscalls[workload, name] = count_syscalls(counter, command, preload)
            print(f"{workload:16} {name:17} {results[workload, name][0]:7.3f} s {cpu_results[workload, name]:7.3f} s cpu "
                  f"{results[workload, name][1]:8d} KiB {faults[workload, name]:8.0f} faults "
                  f"{str(syscalls.get((workload, name), '')):>16} syscalls (all, memory)", file=sys.stderr)
        if len(set(checksums.values())) != 1:
            sys.exit(f"{workload}: allocators disagree on the checksum: {checksums}")

    names = [name for name, _ in allocators]
    lines = []
    lines.append("| workload | glibc time | glibc peak RSS | " + " | ".join(n for n in names if n != "glibc") +
                 " | heapkit / mimalloc time | heapkit CPU time / glibc, / mimalloc | heapkit peak RSS − glibc's |")
    lines.append("|---" * (len(names) + 5) + "|")
    misses = []
    for workload, _ in workloads:
        base_time, base_rss = results[workload, "glibc"]
        cells = [workload, f"{base_time:.3f} s", f"{base_rss / 1024:.1f} MiB"]
        for name in names:
            if name == "glibc":
                continue
            t, rss = results[workload, name]
            cells.append(f"{t / base_time:.2f} / {rss / base_rss:.2f}")
        mimalloc = results.get((workload, "mimalloc"))
        scalable_time, scalable_rss = results[workload, "heapkit"]
        cells.append(f"{scalable_time / mimalloc[0]:.2f}" if mimalloc else "n/a")
        scalable_cpu = cpu_results[workload, "heapkit"]
        mimalloc_cpu = cpu_results.get((workload, "mimalloc"))
        cells.append(f"{scalable_cpu / cpu_results[workload, 'glibc']:.2f} / " +
                     (f"{scalable_cpu / mimalloc_cpu:.2f}" if mimalloc_cpu else "n/a"))
        cells.append(f"{scalable_rss - base_rss:+.0f} KiB")
        lines.append("| " + " | ".join(cells) + " |")
        name_only = workload.split(" ")[0]
        # Issue 15's targets: the single-threaded fast path against mimalloc, large blocks
        # (both general-purpose libraries) against glibc.
        if name_only in SINGLE_THREADED:
            fast = [n for n in FAST_PEERS if n in names]
            if fast:
                best = min(fast, key=lambda n: results[workload, n][0])
                best_time = results[workload, best][0]
                if scalable_time > 1.03 * best_time:
                    misses.append(f"{workload}: heapkit {scalable_time / best_time:.2f}x the best fast peer's time "
                                  f"({best}; target 1.03x)")
            if scalable_rss > base_rss + 256:
                misses.append(f"{workload}: heapkit peak RSS glibc's {scalable_rss - base_rss:+.0f} KiB (target +256 KiB)")
        if name_only in ("bigblocks", "buffers"):
            for library in ("heapkit", "heapkit-lea"):
                t, rss = results[workload, library]
                if t > 1.2 * base_time:
                    misses.append(f"{workload}: {library} {t / base_time:.2f}x glibc's time (target 1.2x)")
                if name_only == "bigblocks" and rss > 1.2 * base_rss:
                    misses.append(f"{workload}: {library} peak RSS {rss / base_rss:.2f}x glibc's (target 1.2x)")
        if scalable_time > base_time:
            misses.append(f"{workload}: heapkit slower than glibc ({scalable_time / base_time:.2f}x)")
        if mimalloc and scalable_time > 1.2 * mimalloc[0]:
            misses.append(f"{workload}: heapkit {scalable_time / mimalloc[0]:.2f}x mimalloc's time (target 1.2x)")
        if scalable_rss > 1.2 * base_rss:
            misses.append(f"{workload}: heapkit peak RSS {scalable_rss / base_rss:.2f}x glibc's (target 1.2x)")

    table = "\n".join(lines)

    # System calls per second (of the median wall time) and page faults, per allocator.
    kernel_lines = ["| workload | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for workload, _ in workloads:
        cells = [workload]
        for name in names:
            counted = syscalls.get((workload, name))
            seconds = results[workload, name][0]
            if counted is None:
                calls_text = "n/a"
            else:
                calls_text = f"{counted[1]:,} ({counted[1] / seconds:,.0f}/s) of {counted[0]:,}"
            cells.append(f"{calls_text}; {faults[workload, name]:,.0f}")
        kernel_lines.append("| " + " | ".join(cells) + " |")
        if workload.split(" ")[0] not in MEDIUM_BLOCKS:
            continue
        peers = [n for n in PEER_NAMES if n in names]
        best_time = min(results[workload, n][0] for n in peers)
        heapkit_time = results[workload, "heapkit"][0]
        if heapkit_time > 1.05 * best_time:
            misses.append(f"{workload}: heapkit {heapkit_time / best_time:.2f}x the best peer's time (target 1.05x)")
        best_faults = min(faults[workload, n] for n in peers)
        if faults[workload, "heapkit"] > 2 * max(best_faults, 1):
            misses.append(f"{workload}: heapkit {faults[workload, 'heapkit'] / max(best_faults, 1):.1f}x the best peer's "
                          "page faults (target 2x)")
        if all(syscalls.get((workload, n)) is not None for n in peers + ["heapkit"]):
            best_calls = min(syscalls[workload, n][1] for n in peers)
            if syscalls[workload, "heapkit"][1] > 2 * max(best_calls, 1):
                misses.append(f"{workload}: heapkit {syscalls[workload, 'heapkit'][1] / max(best_calls, 1):.1f}x the best "
                              "peer's memory system calls (target 2x)")
    kernel_table = "\n".join(kernel_lines)

    # What hardening costs: each library's time over its unhardened twin's, same rounds.
    hardening_lines = ["| workload | " + " | ".join(name for name, _, _ in unhardened) + " |",
                       "|---" * (len(unhardened) + 1) + "|"]
    ratios = {name: [] for name, _, _ in unhardened}
    for workload, _ in workloads:
        if workload not in HARDENING_WORKLOADS:
            continue
        cells = [workload]
        for name, twin, _ in unhardened:
            ratio = results[workload, name][0] / results[workload, twin][0]
            ratios[name].append(ratio)
            cells.append(f"{ratio:.3f}")
        hardening_lines.append("| " + " | ".join(cells) + " |")
    if any(ratios.values()):
        cells = ["geometric mean"]
        for name, _, _ in unhardened:
            mean = statistics.geometric_mean(ratios[name])
            cells.append(f"**{mean:.3f}**")
            if mean > 1.02:
                misses.append(f"hardening costs {name} {100 * (mean - 1):.1f}% (geometric mean; target 2%)")
        hardening_lines.append("| " + " | ".join(cells) + " |")
    hardening_table = "\n".join(hardening_lines)

    misuse = misuse_table(build, allocators)
    if misuse is None:
        misuse_text = "(not measured: tests/hardening/heapkit_misuse or libheapkit-secure.so was not built)"
    else:
        misuse_text, stopped = misuse
        if "glibc" in stopped and stopped["heapkit-secure"] < stopped["glibc"]:
            misses.append(f"misuse: libheapkit-secure.so stops {stopped['heapkit-secure']} cases, glibc "
                          f"{stopped['glibc']} (target: at least glibc's)")
    baseline_line = ", ".join(f"{name} {baseline[name]:.0f} KiB" for name in names)
    target_text = "\n".join(f"- {miss}" for miss in misses) if misses else "- all met"
    cpu = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    section = f"""{SECTION} (issue: malloc replacement)

Regenerate with `make bench-malloc` (bench/malloc/run_bench.py: every allocator preloaded
into fresh processes, median of {args.repeats} rounds that run every allocator once each, the
same checksum required from all).
Measured on the {cpu}-core development machine, shared with other builds, so single runs
vary by about 10%; 1 and 2 threads only (no 16-core machine was available).

Each cell is **time / peak RSS as ratios to glibc** (lower is better). The last three
columns are heapkit's general-purpose allocator (libheapkit.so, ScalableHeap): its time
against mimalloc's; its CPU time (user + system) against glibc's and mimalloc's, which a
busy machine disturbs less than wall time (the targets are checked on wall time); and its
peak RSS minus glibc's.
Peak RSS is the whole process's (ru_maxrss), about 2-3 MiB of which is the program itself.

Workloads: cfrac, espresso, gcbench, lindsay are the layers benchmarks' single-threaded
programs, and alloctest (after alloc-test: random replacement in a 1000-object working set,
sizes 8 B-16 KiB skewed small) is a fifth (`heapkit-workload`); server (threads free each
other's objects through a shared table), churn (thread-private random replacement in a
2000-object working set), falseshare (Hoard's cache-scratch: small objects written hard by
different threads), buffers (large short-lived buffers, 16-256 KiB, one byte written a
page; 200,000 replacements), bigblocks (two live 5-25 MiB blocks per thread replaced in a
loop, every page written), prodcons (after xmalloc-test: <threads> producers fill
32,776-byte records of 4096 pointers to 64-byte objects, at most 100 in flight, and
<threads> consumers free them) and mixedstress (eight 120-710 KiB blocks per thread
replaced at random, swapped with a shared table a quarter of the time; 100,000
replacements) are `heapkit-mt-workload <name> <threads>` (bench/malloc/mt_workloads.cpp).
buffers and mixedstress run 5 times the replacements they ran before: the allocators that
reuse large blocks finished them in 10-60 ms, near the 10 ms resolution of the time
measurement; now in 0.1-0.4 s (glibc: some 1.3 s of CPU time on buffers, 0.2 s on
mixedstress). prodcons' peak RSS follows the records in flight at the peak (at most 100,
some 290 KiB each), which the producer's and consumer's relative speed decides: a
faster producer fills the queue (the program prints the most records in flight to
stderr). Freed large blocks are kept for reuse by both
general-purpose libraries (docs/malloc-replacement.md, "Medium and large blocks").

Peak RSS of an empty program (`/bin/true`, median of {args.repeats}) under each allocator, what
it costs a program that allocates nothing: {baseline_line}.

{table}

System calls and page faults per allocator. Each cell is the memory system calls (mmap,
munmap, mremap, madvise, mprotect, brk), their rate over the median wall time, of all
system calls; then the page faults (minor + major, median). Calls are counted in a run of
their own, with {counter or "nothing: neither perf nor strace worked"}. Every run does the same work, so the
targets compare counts per run, which is what calls per second measure on a benchmark that
runs for a fixed time (xmalloc-test); the rate of a faster run is higher for the same calls.
The other system calls are mostly futex, the program's own waiting (prodcons' queue), whose
count changes from run to run with the threads' timing.

{kernel_table}

What hardening costs (docs/malloc-replacement.md, "Hardening"): each library's time over
that of the same library built without its checks (`heapkit-unhardened-*`, measured in the
same rounds), so 1.02 is 2% slower:

{hardening_table}

What each allocator stops of the misuse suite (`tests/hardening/misuse.c`; every case in a
fresh child, docs/malloc-replacement.md, "Hardening"), kind by size: each cell is the
small (24 B), medium (100 KiB) and large (4 MiB) case, **A** stopped with SIGABRT (for
heapkit's libraries with the one line naming the pointer; **a**: SIGABRT with a heapkit
line that names another address, as when a corrupted size word is found elsewhere: not
counted as stopped), **F** stopped by a fault
(SIGSEGV: a guard page, an unmapped block, or a free list followed into garbage), **S**
another signal, **-** not stopped; overflow-1m is large only. The last row counts every case of the suite, the double
and invalid frees of other shapes included; the case-by-case table is in "Misuse: what
each allocator stops" below (`make bench-misuse`). heapkit-secure is libheapkit-secure.so:

{misuse_text}

Targets, as checked by the script on this run: libheapkit.so no slower than glibc, within
1.2x of mimalloc's time, peak RSS at most 1.2x glibc's; on the single-threaded workloads
within 1.03x of the best fast peer's time (jemalloc, mimalloc, tcmalloc) with peak RSS at
most glibc's + 256 KiB; on bigblocks
libheapkit.so and libheapkit-lea.so within 1.2x of glibc's time and peak RSS, and on
buffers within 1.2x of glibc's time; on prodcons, mixedstress, buffers and bigblocks
libheapkit.so's time within 1.05x of the best peer's (glibc, jemalloc, mimalloc,
tcmalloc), its memory system calls and page faults within 2x of the best peer's;
hardening at most 2% (geometric mean); libheapkit-secure.so stops at least as many misuse
cases as glibc:
{target_text}
"""
    print(section)
    if args.no_doc:
        return
    doc = Path(args.doc)
    text = doc.read_text()
    start = text.find(SECTION)
    if start < 0:
        sys.exit(f"{doc} has no '{SECTION}' section")
    end = text.find("\n## ", start + len(SECTION))
    end = len(text) if end < 0 else end + 1
    doc.write_text(text[:start] + section + ("\n" if end < len(text) else "") + text[end:])
    print(f"updated {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
