"""Placement by lifetime: which request sizes a trace shows to die young.

A design may route the sizes whose objects are short-lived to an area of their own (the
spec's ``short_lived`` field, include/heapkit/dmm/ShortLivedSizes.h), so that the objects
that stay pack densely in the allocators of the ranges, and the churn of the others (most
of a program's operations) stays in chunks or superblocks that empty and are reused as a
whole. The trace knows every object's lifetime; the statistic used here is, per 16-byte
granule of request size, the share of its objects still live when the program's live
bytes peak (the moment that sets the footprint)::

    from heapkit.lifetimes import short_lived_sizes
    ranges = short_lived_sizes("app.hkt", 0.05)   # [(0, 64), (96, 256), ...]: (min, max] each

A granule is short-lived when at most ``share`` of its objects are live at the peak;
granules no request has join their short-lived neighbours (they cost nothing), and when
the set needs more than :data:`MAX_RANGES` ranges, the gaps holding the fewest live bytes
at the peak are closed first.
"""

from __future__ import annotations

from os import PathLike
from typing import Sequence

import numpy as np

GRANULE = 16
MAX_BYTES = 64 * 1024  # ShortLivedSizes::kMaxBytes
MAX_RANGES = 32  # ShortLivedSizes::kMaxRanges
#: The shares of objects live at the peak under which a size counts as short-lived, one
#: set of sizes each, that the design grammar offers.
SHARES = (0.02, 0.1, 0.3)


def ranges_from_profile(sizes: Sequence[int], counts: Sequence[int], live_at_peak: Sequence[int],
                        share: float) -> list[tuple[int, int]]:
    """The short-lived ranges (min, max], 16-byte bounds up to 64 KiB, from a size profile
    (:func:`heapkit.stats.size_profile`'s arrays)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    live = np.asarray(live_at_peak, dtype=np.int64)
    keep = (sizes > 0) & (sizes <= MAX_BYTES) & (counts > 0)
    sizes, counts, live = sizes[keep], counts[keep], live[keep]
    if not len(sizes):
        return []
    granule = (sizes + GRANULE - 1) // GRANULE  # 1 .. 4096: the sizes (16 (g-1), 16 g]
    n = MAX_BYTES // GRANULE
    requested = np.bincount(granule, weights=counts, minlength=n + 1)[1:]
    alive = np.bincount(granule, weights=live, minlength=n + 1)[1:]
    live_bytes = np.bincount(granule, weights=live * sizes, minlength=n + 1)[1:]
    short = (requested > 0) & (alive <= share * requested)
    long_ = (requested > 0) & ~short
    # Runs of granules without a long-lived one, that hold a short-lived one.
    runs: list[list[int]] = []  # [first, last] granule indices (0-based)
    start = None
    for g in range(n + 1):
        if g < n and not long_[g]:
            if start is None:
                start = g
            continue
        if start is not None:
            idx = np.nonzero(short[start:g])[0]
            if len(idx):
                runs.append([start + int(idx[0]), start + int(idx[-1])])
            start = None
    # Too many ranges: close the gap whose long-lived granules hold the fewest live bytes.
    while len(runs) > MAX_RANGES:
        costs = [live_bytes[runs[i][1] + 1:runs[i + 1][0]].sum() for i in range(len(runs) - 1)]
        i = int(np.argmin(costs))
        runs[i][1] = runs[i + 1][1]
        del runs[i + 1]
    return [(first * GRANULE, (last + 1) * GRANULE) for first, last in runs]


def short_lived_sizes(trace: str | PathLike, share: float = 0.1) -> list[tuple[int, int]]:
    """The trace's short-lived request sizes as ranges (min, max] (see the module's docstring)."""
    from heapkit.stats import size_profile

    p = size_profile(trace)
    return ranges_from_profile(p["sizes"], p["counts"], p["live_at_peak"], share)


def short_lived_sets(profile: dict, shares: Sequence[float] = SHARES) -> list[list[tuple[int, int]]]:
    """The distinct non-empty short-lived sets for each share, from one size profile."""
    out: list[list[tuple[int, int]]] = []
    for share in shares:
        ranges = ranges_from_profile(profile["sizes"], profile["counts"], profile["live_at_peak"], share)
        if ranges and ranges not in out:
            out.append(ranges)
    return out


__all__ = ["GRANULE", "MAX_BYTES", "MAX_RANGES", "SHARES", "ranges_from_profile", "short_lived_sets",
           "short_lived_sizes"]
