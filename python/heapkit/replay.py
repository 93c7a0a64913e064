"""Replaying a trace on a real allocator, in a fresh process each run."""

from __future__ import annotations

import ctypes.util
import json
import os
import statistics
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from os import PathLike
from pathlib import Path
from typing import Callable, Optional

from heapkit._paths import library, program

#: Allocators known by name: a shared library to preload (None: the C library's malloc).
#: heapkit's own come with the package; the others are the Debian packages
#: libjemalloc2, libmimalloc2.0 and libtcmalloc-minimal4.
ALLOCATORS: dict[str, tuple[str, ...] | None] = {
    "glibc": None,
    "jemalloc": ("libjemalloc.so.2",),
    "mimalloc": ("libmimalloc.so.2", "libmimalloc.so"),
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4"),
    "kingsley": ("heapkit:libheapkit-kingsley.so",),
    "lea": ("heapkit:libheapkit-lea.so",),
    "heapkit": ("heapkit:libheapkit.so",),  # the scalable general-purpose allocator
}
#: "spec:FILE" names a DMM design (docs/dmm-spec.md) run as a real allocator by the replayer
#: itself: the same heap the simulator runs, over real memory.
SPEC_PREFIX = "spec:"

_SYSTEM_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                "/usr/local/lib", "/lib/x86_64-linux-gnu")


def resolve_allocator(name: str) -> Optional[Path]:
    """The library to preload for ``name`` (a key of :data:`ALLOCATORS` or a path to a
    ``.so``); None for glibc and for a ``spec:FILE`` design, which the replayer runs
    itself. Raises FileNotFoundError if it is not installed."""
    if name.startswith(SPEC_PREFIX):
        return None
    if "/" in name or name.endswith(".so") or ".so." in name:
        path = Path(name).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"{name}: no such library")
        return path
    if name not in ALLOCATORS:
        raise ValueError(f"unknown allocator {name!r}: choose from {', '.join(ALLOCATORS)} or give a path to a .so")
    candidates = ALLOCATORS[name]
    if candidates is None:
        return None
    for candidate in candidates:
        if candidate.startswith("heapkit:"):
            found = library(candidate.split(":", 1)[1])
            if found:
                return found
            continue
        for d in _SYSTEM_DIRS:
            path = Path(d) / candidate
            if path.is_file():
                return path
        found = ctypes.util.find_library(candidate.removeprefix("lib").split(".so")[0])
        if found and Path(found).is_absolute():
            return Path(found)
    raise FileNotFoundError(f"allocator {name!r} is not installed (looked for {', '.join(candidates)})")


@dataclass(frozen=True)
class ReplayRun:
    seconds: float  # the replay loop's wall time, as the replayer measures it
    ns_per_op: float
    footprint_bytes: int  # peak resident set during the replay minus the one before it
    peak_rss_bytes: int
    failed_allocations: int
    # A spec: the design's own footprint, as the simulator counts it: its peak resident bytes
    # (bytes held less the pages purged; the same as bytes held unless the design purges,
    # as page_segregated does). The replayer's JSON has both figures.
    heap_peak_bytes_held: Optional[int] = None
    footprint_samples: Optional[list] = None  # (operation, resident growth) when asked for
    cpu_seconds: float = 0.0  # user + system time of the replayer's process (decoding the trace included)
    malloc_library: str = ""  # the file defining the malloc the replayer called
    operations: int = 0
    max_live_bytes: int = 0


def parse_replay_output(stdout: str, cpu_seconds: float = 0.0) -> ReplayRun:
    """The one place that reads heapkit-replay's JSON line (its last line of output)."""
    data = json.loads(stdout.strip().splitlines()[-1])
    return ReplayRun(data["seconds"], data["ns_per_op"], data["footprint_bytes"], data["peak_rss_bytes"],
                     data["failed_allocations"], data.get("heap_peak_resident_bytes", data.get("heap_peak_bytes_held")),
                     data.get("footprint_samples"),
                     cpu_seconds, data.get("malloc_library", ""), data["operations"], data["max_live_bytes"])


@dataclass(frozen=True)
class ReplayResult:
    allocator: str
    library: Optional[Path]
    operations: int
    max_live_bytes: int  # from the trace: the least footprint any allocator could have
    runs: list[ReplayRun] = field(default_factory=list)

    @property
    def median_seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def median_ns_per_op(self) -> float:
        return statistics.median(r.ns_per_op for r in self.runs)

    @property
    def median_footprint_bytes(self) -> int:
        return int(statistics.median(r.footprint_bytes for r in self.runs))

    @property
    def fragmentation(self) -> float:
        """Median footprint over the trace's peak live bytes (1.0 would be perfect)."""
        return self.median_footprint_bytes / self.max_live_bytes if self.max_live_bytes else 0.0


class ReplayError(RuntimeError):
    pass


def _same_file(a: str, b: Path) -> bool:
    try:
        return bool(a) and os.path.samefile(a, b)
    except OSError:
        return False


def _run_replayer(cmd: list[str], env: dict, allocator: str, lib: Optional[Path]) -> ReplayRun:
    """One run of heapkit-replay, its process's CPU time taken by wait4."""
    from heapkit import TraceError

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace").strip()
    if returncode == 2:
        raise TraceError(stderr.removeprefix("heapkit-replay: "))
    if returncode != 0:
        raise ReplayError(f"replay on {allocator} failed (status {returncode}): {stderr}")
    run = parse_replay_output(stdout, usage.ru_utime + usage.ru_stime)
    if lib is not None and not _same_file(run.malloc_library, lib):
        # The dynamic linker ignores a preload it cannot load, and a library without a
        # malloc leaves the C library's: either way the figures would not be lib's.
        reason = stderr.splitlines()[0] if stderr else "it does not define malloc"
        raise ReplayError(f"{allocator} is not a malloc library: the replay called the malloc of "
                          f"{run.malloc_library or 'an unknown file'} ({reason})")
    return run


def _command(trace: str | PathLike, allocator: str, touch: bool) -> tuple[list[str], dict, Optional[Path]]:
    lib = resolve_allocator(allocator)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if lib is not None:
        env["LD_PRELOAD"] = str(lib)
    cmd = [str(program("heapkit-replay")), str(trace)] + ([] if touch else ["--no-touch"])
    if allocator.startswith(SPEC_PREFIX):
        from heapkit.dmm import load_spec

        spec_path = allocator[len(SPEC_PREFIX):]
        load_spec(spec_path)  # a spec that does not validate fails here, naming the field
        cmd += ["--spec", spec_path]
    return cmd, env, lib


def replay_once(trace: str | PathLike, allocator: str | Path | None = "glibc", touch: bool = True) -> ReplayRun:
    """One replay of ``trace`` in a fresh process on ``allocator`` (a name, a ``spec:FILE``,
    a library path, or None for glibc), with the process's CPU time."""
    name = "glibc" if allocator is None else str(allocator)
    cmd, env, lib = _command(trace, name, touch)
    return _run_replayer(cmd, env, name, lib)


def replay(
    trace: str | PathLike,
    allocator: str = "glibc",
    runs: int = 3,
    touch: bool = True,
    on_run: Optional[Callable[[int, int], None]] = None,
    footprint_samples: int = 0,
) -> ReplayResult:
    """Replays ``trace`` ``runs`` times on ``allocator``, each run a fresh process.

    The replayer (heapkit-replay) decodes the trace first and then times only the
    allocator's work; every object gets one byte written per page unless ``touch`` is
    False. Operations run on one thread, in trace order. A bad trace raises
    :class:`heapkit.TraceError` with the replayer's message.
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    cmd, env, lib = _command(trace, allocator, touch)
    result = None
    for i in range(runs):
        run = _run_replayer(cmd, env, allocator, lib)
        if result is None:
            result = ReplayResult(allocator, lib, run.operations, run.max_live_bytes)
        result.runs.append(run)
        if on_run:
            on_run(i + 1, runs)
    if footprint_samples > 0:
        try:
            sampled = _run_replayer(cmd + ["--footprint-samples", str(footprint_samples)], env, allocator, lib)
            result.runs[0] = replace(result.runs[0], footprint_samples=sampled.footprint_samples)
        except ReplayError:
            pass  # the timeline is an extra: the figures above stand without it
    return result
