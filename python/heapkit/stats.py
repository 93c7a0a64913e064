"""The allocation profile of a trace: the numbers the DMM methodology starts from."""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from typing import Callable, Optional

from heapkit import _core
from heapkit.trace import Header


@dataclass(frozen=True)
class ThreadProfile:
    os_tid: int
    allocations: int
    frees: int
    bytes: int
    remote_frees: int  # frees of objects another thread allocated
    first_allocation_event: int = 0  # index of its first allocation among the trace's operations
    last_allocation_event: int = 0  # and of its last


@dataclass(frozen=True)
class TraceStats:
    """Statistics of one trace (sizes in bytes, times in ns since the trace began).

    ``size_histogram[b]`` counts objects whose size is in [2**(b-1), 2**b) (b = 0: size 0);
    ``lifetime_events_histogram`` does the same for lifetimes measured in operations
    between allocation and free. ``live_over_time`` holds (time, operations so far,
    largest live bytes since the previous point, live objects then), at most a few
    hundred points whatever the trace's length.
    """

    header: Header
    events: int
    mallocs: int
    callocs: int
    reallocs: int
    aligned: int
    frees: int
    objects: int
    total_bytes: int
    max_live_bytes: int
    max_live_objects: int
    max_live_bytes_event: int
    end_live_bytes: int
    end_live_objects: int
    min_size: int
    max_size: int
    duration_ns: int
    size_histogram: list[int]
    top_sizes: list[tuple[int, int]]  # (size, count), most frequent first
    distinct_sizes: int
    lifetime_events_histogram: list[int]
    lifetime_events_median: int
    lifetime_events_mean: float
    lifetime_ns_mean: float
    threads: list[ThreadProfile] = field(default_factory=list)
    live_over_time: list[tuple[int, int, int, int]] = field(default_factory=list)
    trace_bytes: int = 0

    @property
    def average_size(self) -> float:
        return self.total_bytes / self.objects if self.objects else 0.0

    @property
    def total_to_max_ratio(self) -> float:
        """Bytes ever allocated over the peak of live bytes: how much memory reuse matters."""
        return self.total_bytes / self.max_live_bytes if self.max_live_bytes else 0.0

    @property
    def concurrent_allocating_threads(self) -> int:
        """The most threads allocating at once: threads whose spans from first to last
        allocation overlap. 1 when one thread allocates, or threads take turns one after
        another; from 2, a design gets a heap per thread (:func:`heapkit.grammar.generate`)."""
        edges = []
        for t in self.threads:
            if t.allocations >= 2 and t.last_allocation_event > t.first_allocation_event:
                edges += [(t.first_allocation_event, 1), (t.last_allocation_event, -1)]
        most, now = 0, 0
        for _, step in sorted(edges):
            now += step
            most = max(most, now)
        return max(most, 1 if any(t.allocations for t in self.threads) else 0)

    @property
    def bytes_per_event(self) -> float:
        return self.trace_bytes / self.events if self.events else 0.0

    def to_dict(self) -> dict:
        from dataclasses import asdict

        d = asdict(self)
        d.update(average_size=self.average_size, total_to_max_ratio=self.total_to_max_ratio,
                 bytes_per_event=self.bytes_per_event,
                 concurrent_allocating_threads=self.concurrent_allocating_threads)
        return d


def stats(
    path: str | PathLike,
    top_sizes: int = 10,
    live_points: int = 200,
    progress: Optional[Callable[[int, int], None]] = None,
) -> TraceStats:
    """Computes :class:`TraceStats` in one pass; ``progress(bytes_done, bytes_total)``.

    Raises :class:`heapkit.TraceError` on a corrupt trace (with the byte offset).
    """
    builder = _core.StatsBuilder(str(path), top_sizes, live_points)
    while builder.step(1 << 20):
        if progress:
            progress(builder.offset, builder.size)
    if progress:
        progress(builder.size, builder.size)
    raw = builder.result()
    raw["header"] = Header(**raw["header"])
    raw["threads"] = [ThreadProfile(**t) for t in raw["threads"]]
    raw["top_sizes"] = [tuple(t) for t in raw["top_sizes"]]
    raw["live_over_time"] = [tuple(p) for p in raw["live_over_time"]]
    return TraceStats(**raw)


def size_profile(path: str | PathLike) -> dict:
    """The trace's request sizes below 64 KiB, ascending, with how many objects of each
    were requested and how many were live when live bytes peaked, in one pass:
    ``{"sizes", "counts", "live_at_peak"}`` (numpy arrays), ``max_live_bytes``,
    ``max_live_bytes_event``, ``objects``. :mod:`heapkit.sizeclasses` fits size classes to it.
    """
    import numpy as np

    builder = _core.StatsBuilder(str(path), 0, 2)
    while builder.step(1 << 20):
        pass
    raw = builder.small_sizes()
    for key in ("sizes", "counts", "live_at_peak"):
        raw[key] = np.asarray(raw[key], dtype=np.int64)
    return raw
