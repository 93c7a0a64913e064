"""Replaying a trace on a real allocator, in a fresh process each run."""

from __future__ import annotations

import ctypes.util
import json
import os
import statistics
import subprocess
from dataclasses import dataclass, field
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
    seconds: float
    ns_per_op: float
    footprint_bytes: int  # peak resident set during the replay minus the one before it
    peak_rss_bytes: int
    failed_allocations: int
    heap_peak_bytes_held: Optional[int] = None  # a spec: design's own footprint, as the simulator counts it
    footprint_samples: Optional[list] = None  # (operation, resident growth) when asked for


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
    from heapkit import TraceError

    if runs < 1:
        raise ValueError("runs must be at least 1")
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
    result = None
    for i in range(runs):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode == 2:
            raise TraceError(done.stderr.strip().removeprefix("heapkit-replay: "))
        if done.returncode != 0:
            raise ReplayError(f"replay on {allocator} failed (status {done.returncode}): {done.stderr.strip()}")
        data = json.loads(done.stdout.strip().splitlines()[-1])
        if lib is not None and not _same_file(data.get("malloc_library", ""), lib):
            # The dynamic linker ignores a preload it cannot load, and a library without a
            # malloc leaves the C library's: either way the figures would not be lib's.
            reason = done.stderr.strip().splitlines()[0] if done.stderr.strip() else "it does not define malloc"
            raise ReplayError(f"{allocator} is not a malloc library: the replay called the malloc of "
                              f"{data.get('malloc_library') or 'an unknown file'} ({reason})")
        if result is None:
            result = ReplayResult(allocator, lib, data["operations"], data["max_live_bytes"])
        result.runs.append(ReplayRun(data["seconds"], data["ns_per_op"], data["footprint_bytes"],
                                     data["peak_rss_bytes"], data["failed_allocations"],
                                     data.get("heap_peak_bytes_held")))
        if on_run:
            on_run(i + 1, runs)
    if footprint_samples > 0:
        done = subprocess.run(cmd + ["--footprint-samples", str(footprint_samples)], env=env, capture_output=True,
                              text=True)
        if done.returncode == 0:
            samples = json.loads(done.stdout.strip().splitlines()[-1]).get("footprint_samples")
            first = result.runs[0]
            result.runs[0] = ReplayRun(first.seconds, first.ns_per_op, first.footprint_bytes, first.peak_rss_bytes,
                                       first.failed_allocations, first.heap_peak_bytes_held, samples)
    return result
