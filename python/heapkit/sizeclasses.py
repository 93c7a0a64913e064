"""Size classes fitted to a trace: the k classes that waste the fewest bytes in rounding.

A heap of size classes (libheapkit.so's page-segregated heap, the ``page_segregated``
mechanism of the spec format) rounds every small request up to the smallest class that
holds it. Which classes it has decides how many bytes that rounding wastes, and the trace
says exactly which sizes the program asks for::

    from heapkit.sizeclasses import fit, size_histogram, DEFAULT_CLASSES
    histogram = size_histogram("app.hkt")                  # request sizes, counts, live at the peak
    fitted = fit(histogram, 16, weight="peak")             # 16 classes, least waste at the peak
    print(fitted.classes, fitted.waste)
    print(histogram.waste(DEFAULT_CLASSES, "peak"))        # libheapkit.so's 36 classes, for comparison

Classes are multiples of 16 bytes from 16 to 32 KiB (:data:`LARGEST_CLASS`), at most 64
of them (:data:`MAX_CLASSES`); requests above the largest class go to the heap's spans or
large blocks, so only the sizes up to 32 KiB count, and the largest of them must be a
class (no class above it is of any use). Given k, :func:`fit` is exactly optimal: a
request of size s rounded to the 16-byte granule r(s) costs the same whatever the
classes, and between two classes every size rounds up to the upper one, so in an optimal
list every class is the rounded size of some request (moving a class down to the largest
rounded size it serves wastes less); a dynamic programme over the n distinct rounded
sizes, the cost of a run of sizes served by one class in O(1) from prefix sums, finds the
best k of them in O(k n^2) (numpy, a fraction of a second for the at most 2048 granules).

Weightings (:data:`WEIGHTS`):

- ``count``: every request counts once: the waste is bytes lost per request, summed;
- ``peak``: every object live when the program's live bytes peak counts once: the waste
  is bytes lost at the footprint's peak, what a heap's peak footprint pays;
- ``mixed``: the two, each normalised to sum to one, added: a list good for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from typing import Literal, Sequence

import numpy as np

GRANULE = 16
LARGEST_CLASS = 32 * 1024
#: libheapkit.so's largest class (sizeclasses::kLibheapkitLargestClassBytes): above it its
#: blocks are spans of segments, not superblocks of a class (issue 21).
LIBHEAPKIT_LARGEST_CLASS = 16 * 1024
MAX_CLASSES = 64
WEIGHTS = ("count", "peak", "mixed")
Weight = Literal["count", "peak", "mixed"]


def _default_classes() -> tuple[int, ...]:
    """libheapkit.so's 36 classes (include/heapkit/building/SizeClasses.h, ScalableSizeClasses,
    scalableBytesOf): 16-byte steps to 128 B, then four classes per doubling to 16 KiB."""
    classes = []
    c = 0
    while not classes or classes[-1] < LIBHEAPKIT_LARGEST_CLASS:
        if c < 8:
            classes.append((c + 1) * 16)
        else:
            log2 = 7 + (c - 8) // 4
            classes.append((1 << log2) + ((c - 8) % 4 + 1) * (1 << (log2 - 2)))
        c += 1
    return tuple(classes)


#: libheapkit.so's classes, the ``page_segregated`` mechanism's default (the simulator's
#: normal form of a page_segregated allocator spells out the same list: tests/python/
#: test_sizeclasses.py checks the two agree).
DEFAULT_CLASSES: tuple[int, ...] = _default_classes()


def rounded(size: int | np.ndarray) -> int | np.ndarray:
    """A request's size rounded up to the 16-byte granule (at least 16: a request of 0
    bytes gets the smallest block)."""
    return np.maximum(GRANULE, (np.asarray(size) + GRANULE - 1) // GRANULE * GRANULE) if isinstance(size, np.ndarray) \
        else max(GRANULE, (size + GRANULE - 1) // GRANULE * GRANULE)


@dataclass(frozen=True)
class SizeHistogram:
    """The trace's request sizes up to :data:`LARGEST_CLASS`, ascending and distinct, with
    how many objects of each were requested (``counts``) and how many were live when the
    program's live bytes peaked (``live_at_peak``)."""

    sizes: np.ndarray
    counts: np.ndarray
    live_at_peak: np.ndarray

    def __post_init__(self) -> None:
        for name in ("sizes", "counts", "live_at_peak"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64).reshape(-1))
        if not (len(self.sizes) == len(self.counts) == len(self.live_at_peak)):
            raise ValueError("sizes, counts and live_at_peak must have the same length")
        if len(self.sizes) and (np.any(np.diff(self.sizes) <= 0) or self.sizes[0] < 0):
            raise ValueError("sizes must be distinct, ascending and >= 0")
        if np.any(self.counts < 0) or np.any(self.live_at_peak < 0):
            raise ValueError("counts and live objects must be >= 0")
        if np.any(self.sizes > LARGEST_CLASS):
            keep = self.sizes <= LARGEST_CLASS
            for name in ("sizes", "counts", "live_at_peak"):
                object.__setattr__(self, name, getattr(self, name)[keep])

    @classmethod
    def from_counts(cls, counts: dict[int, int], live_at_peak: dict[int, int] | None = None) -> "SizeHistogram":
        """A histogram from ``{size: requests}`` (and ``{size: objects live at the peak}``)."""
        live_at_peak = live_at_peak or {}
        sizes = sorted(set(counts) | set(live_at_peak))
        return cls(np.array(sizes, dtype=np.int64), np.array([counts.get(s, 0) for s in sizes], dtype=np.int64),
                   np.array([live_at_peak.get(s, 0) for s in sizes], dtype=np.int64))

    def weights(self, weight: Weight) -> np.ndarray:
        """Each size's weight: requests, objects live at the peak, or the two normalised and
        added (``mixed``). Integers for the first two (so waste is exact), floats for the last."""
        if weight == "count":
            return self.counts
        if weight == "peak":
            return self.live_at_peak
        if weight == "mixed":
            total = np.zeros(len(self.sizes))
            for column in (self.counts, self.live_at_peak):
                if column.sum() > 0:
                    total = total + column / column.sum()
            return total
        raise ValueError(f"unknown weighting '{weight}' (one of {', '.join(WEIGHTS)})")

    def waste(self, classes: Sequence[int], weight: Weight = "count") -> float:
        """Bytes lost in rounding with these classes (each request, or each object live at
        the peak, costs its class's size minus its own), summed over the weighted sizes the
        classes hold; sizes above the largest class are not counted (they are not small)."""
        classes = check_classes(classes)
        w = self.weights(weight)
        index = np.searchsorted(np.array(classes), rounded(self.sizes), side="left")
        held = index < len(classes)
        served = np.array(classes, dtype=np.int64)[index[held]]
        return _total(w[held] * (served - self.sizes[held]))

    def unavoidable_waste(self, weight: Weight = "count") -> float:
        """The waste of rounding to 16 bytes alone: what any list of classes pays at least."""
        w = self.weights(weight)
        return _total(w * (rounded(self.sizes) - self.sizes))


@dataclass(frozen=True)
class FittedClasses:
    classes: tuple[int, ...]
    weight: str
    waste: float  # weighted bytes lost in rounding, sizes above LARGEST_CLASS not counted
    unavoidable: float  # the part of it rounding to 16 bytes costs anyway


def check_classes(classes: Sequence[int]) -> tuple[int, ...]:
    """The classes as a tuple, or ValueError saying why they cannot be size classes."""
    out = tuple(int(c) for c in classes)
    if not out:
        raise ValueError("no size classes")
    if len(out) > MAX_CLASSES:
        raise ValueError(f"{len(out)} size classes: at most {MAX_CLASSES}")
    for i, c in enumerate(out):
        if c < GRANULE or c % GRANULE or c > LARGEST_CLASS:
            raise ValueError(f"size class {c}: classes are multiples of 16 from 16 to {LARGEST_CLASS}")
        if i and c <= out[i - 1]:
            raise ValueError("size classes must be ascending and distinct")
    return out


def fit(histogram: SizeHistogram, k: int, weight: Weight = "count") -> FittedClasses:
    """The k size classes (fewer when the trace has fewer distinct rounded sizes) that
    minimise the weighted rounding waste of the trace's requests up to 32 KiB; the largest
    rounded size requested is always a class. Exactly optimal (see the module docstring);
    ties go to the list found first."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_CLASSES:
        raise ValueError(f"k must be a whole number of classes from 1 to {MAX_CLASSES}, not {k!r}")
    w_all = histogram.weights(weight)
    if not np.any(histogram.counts > 0):
        raise ValueError(f"the trace requests no size of {LARGEST_CLASS} bytes or less: no size classes to fit")
    # Sizes no request has (a zero weight everywhere) still bound the list: the largest
    # requested size must be held. Group the sizes by their rounded size.
    requested = histogram.counts > 0
    sizes = histogram.sizes[requested]
    w = w_all[requested]
    r = rounded(sizes)
    granules, first = np.unique(r, return_index=True)
    weight_of = np.add.reduceat(w, first)  # per distinct rounded size: total weight
    bytes_of = np.add.reduceat(w * sizes, first)  # and weighted request bytes
    n = len(granules)
    k = min(int(k), n)
    exact = np.issubdtype(w.dtype, np.integer)
    dtype = np.int64 if exact else np.float64
    W = np.concatenate([[0], np.cumsum(weight_of)]).astype(dtype)
    B = np.concatenate([[0], np.cumsum(bytes_of)]).astype(dtype)
    g = granules.astype(dtype)
    # cost[j, i]: the rounded sizes j..i (0-based, j <= i) all served by class granules[i].
    j = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    cost = g[None, :] * (W[i + 1] - W[j]) - (B[i + 1] - B[j])
    big = np.iinfo(np.int64).max // 4 if exact else np.inf
    cost = np.where(j <= i, cost, big)
    # best[m][i]: the least waste serving rounded sizes 0..i with m + 1 classes, the last
    # being granules[i]; choice[m][i]: the class before it.
    best = cost[0].copy()
    choices = []
    for _ in range(1, k):
        # previous class at j (serving 0..j), this one serves j+1..i
        candidates = best[:, None] + np.vstack([cost[1:], np.full((1, n), big, dtype=cost.dtype)])
        candidates = np.where(j < i, candidates, big)
        choice = np.argmin(candidates, axis=0)
        best = np.minimum(candidates[choice, np.arange(n)], big)
        choices.append(choice)
    last = n - 1
    picked = [last]
    for choice in reversed(choices):
        last = int(choice[last])
        picked.append(last)
    classes = tuple(int(granules[p]) for p in reversed(picked))
    return FittedClasses(classes, weight, histogram.waste(classes, weight), histogram.unavoidable_waste(weight))


def size_histogram(trace: str | PathLike) -> SizeHistogram:
    """The trace's request sizes up to 32 KiB with their counts and the objects of each
    live at the peak of live bytes, in one pass over the trace (the C++ statistics)."""
    from heapkit.stats import size_profile

    profile = size_profile(trace)
    return SizeHistogram(profile["sizes"], profile["counts"], profile["live_at_peak"])


def fitted_lists(histogram: SizeHistogram, ks: Sequence[int] = (8, 12, 16, 24, 32, 40, 48, 64),
                 weights: Sequence[Weight] = WEIGHTS) -> list[FittedClasses]:
    """Fitted lists for several k (capped by the distinct rounded sizes) and weightings,
    each distinct list once: the choices the design grammar offers."""
    distinct = len(np.unique(rounded(histogram.sizes[histogram.counts > 0])))
    seen: set[tuple[int, ...]] = set()
    out = []
    for k in sorted({min(k, distinct) for k in ks if k >= 1}):
        for weight in weights:
            if weight == "peak" and not histogram.live_at_peak.any():
                continue
            fitted = fit(histogram, k, weight)
            if fitted.classes not in seen:
                seen.add(fitted.classes)
                out.append(fitted)
    return out


def _total(values: np.ndarray) -> float:
    total = values.sum()
    return int(total) if np.issubdtype(np.asarray(values).dtype, np.integer) else float(total)


__all__ = ["DEFAULT_CLASSES", "FittedClasses", "GRANULE", "LARGEST_CLASS", "LIBHEAPKIT_LARGEST_CLASS", "MAX_CLASSES", "SizeHistogram", "WEIGHTS",
           "check_classes", "fit", "fitted_lists", "rounded", "size_histogram"]
