"""Size classes fitted to a trace: exactly optimal (against brute force and hand-derived
answers), the trace's histogram (counts and live objects at the peak) as the trace says,
and the command."""

from __future__ import annotations

import itertools
import os
import random

import numpy as np
import pytest

import heapkit
from helpers import run
from heapkit.sizeclasses import (DEFAULT_CLASSES, LIBHEAPKIT_LARGEST_CLASS, SizeHistogram, check_classes, fit, fitted_lists, rounded,
                                 size_histogram)


def brute_force(histogram: SizeHistogram, k: int, weight: str) -> float:
    """The least waste over every list of k classes among the rounded requested sizes that
    holds the largest, and over every list of k multiples of 16 up to it (the optimum may
    not need classes at unrequested sizes: this checks that claim too)."""
    requested = histogram.sizes[histogram.counts > 0]
    top = int(rounded(requested).max())
    candidates = range(16, top, 16)
    k = min(k, len(np.unique(rounded(requested))))
    return min(histogram.waste(tuple(rest) + (top,), weight) for rest in itertools.combinations(candidates, k - 1))


def test_fit_is_optimal_against_brute_force():
    rng = random.Random(7)
    for trial in range(60):
        sizes = sorted(rng.sample(range(0, 200), rng.randint(1, 8)))
        counts = {s: rng.randint(1, 50) for s in sizes}
        live = {s: rng.randint(0, 30) for s in sizes}
        histogram = SizeHistogram.from_counts(counts, live)
        for weight in ("count", "peak", "mixed"):
            for k in range(1, 6):
                fitted = fit(histogram, k, weight)
                assert fitted.waste == pytest.approx(brute_force(histogram, k, weight), rel=1e-12, abs=1e-12), \
                    (trial, counts, live, k, weight, fitted)
                assert len(fitted.classes) == min(k, len(set(rounded(s) for s in sizes)))
                assert fitted.classes[-1] == rounded(max(sizes))


def test_hand_made_histograms():
    # Two classes for 16 (x10), 32 (x1), 48 (x10); 48 must be one. {16, 48}: the one 32 pays
    # 16 bytes. {32, 48}: the ten 16s pay 16 each, 160.
    assert fit(SizeHistogram.from_counts({16: 10, 32: 1, 48: 10}), 2).classes == (16, 48)
    assert fit(SizeHistogram.from_counts({16: 10, 32: 1, 48: 10}), 2).waste == 16
    # Sizes off the granule: 8 (x4), 24 (x2), 100 (x1), rounded to 16, 32, 112; rounding to 16
    # alone costs 4*8 + 2*8 + 12 = 60. {16, 112}: 4*8 + 2*(112-24) + 12 = 220; {32, 112}:
    # 4*24 + 2*8 + 12 = 124.
    fitted = fit(SizeHistogram.from_counts({8: 4, 24: 2, 100: 1}), 2)
    assert (fitted.classes, fitted.waste, fitted.unavoidable) == ((32, 112), 124, 60)
    # One class: the largest, for everything. 8 -> 112 (x4) 416, 24 -> 112 (x2) 176, 12: 604.
    assert fit(SizeHistogram.from_counts({8: 4, 24: 2, 100: 1}), 1).waste == 604
    # Counting requests and counting objects live at the peak disagree: many short-lived
    # 16s, a few 32s that are most of the peak, 64s of both kinds.
    histogram = SizeHistogram.from_counts({16: 100, 32: 1, 64: 10}, {16: 0, 32: 50, 64: 10})
    assert fit(histogram, 2, "count").classes == (16, 64)  # 1*32 = 32 against 100*16 = 1600
    assert fit(histogram, 2, "peak").classes == (32, 64)  # 0 against 50*32 = 1600
    # mixed: 32's weight 1/111 + 50/60 = 0.842, times 32 bytes = 26.9, against 16's 100/111
    # = 0.901, times 16 = 14.4
    mixed = fit(histogram, 2, "mixed")
    assert mixed.classes == (32, 64)
    assert mixed.waste == pytest.approx(100 / 111 * 16)


def test_enough_classes_waste_nothing_beyond_the_granule():
    sizes = {16: 3, 48: 7, 96: 1, 4096: 2, 32768: 5}
    histogram = SizeHistogram.from_counts(sizes, {s: 1 for s in sizes})
    for weight in ("count", "peak", "mixed"):
        for k in (5, 6, 64):
            fitted = fit(histogram, k, weight)
            assert fitted.classes == (16, 48, 96, 4096, 32768) and fitted.waste == 0
    ragged = SizeHistogram.from_counts({1: 3, 17: 2, 33: 1, 40: 9})  # 40 and 33 share the 48 granule
    fitted = fit(ragged, 64)
    assert fitted.classes == (16, 32, 48)
    assert fitted.waste == fitted.unavoidable == 3 * 15 + 2 * 15 + 15 + 9 * 8


def test_sizes_above_32_kib_are_not_classes():
    histogram = SizeHistogram.from_counts({64: 5, 1000: 2, 40000: 100, 1 << 20: 3})
    assert fit(histogram, 8).classes == (64, 1008)
    assert histogram.waste((64, 1008)) == 2 * 8


def test_invalid_k_and_classes_are_clear_errors():
    histogram = SizeHistogram.from_counts({16: 1})
    for k in (0, -1, 65, 2.5, True, "8"):
        with pytest.raises(ValueError, match="k must be a whole number of classes from 1 to 64"):
            fit(histogram, k)
    with pytest.raises(ValueError, match="unknown weighting 'bytes'"):
        fit(histogram, 2, "bytes")
    with pytest.raises(ValueError, match="no size of 32768 bytes or less"):
        fit(SizeHistogram.from_counts({40000: 3}), 4)
    with pytest.raises(ValueError, match="ascending"):
        check_classes([32, 16])
    with pytest.raises(ValueError, match="multiples of 16"):
        check_classes([24])
    assert len(DEFAULT_CLASSES) == 36 and DEFAULT_CLASSES[:9] == (16, 32, 48, 64, 80, 96, 112, 128, 160)
    assert DEFAULT_CLASSES[-4:] == (10240, 12288, 14336, 16384) and check_classes(DEFAULT_CLASSES)


def test_default_classes_are_libheapkits_and_the_hks_presets():
    """One class table (issue 21): DEFAULT_CLASSES, the simulator's default page_segregated
    classes (the normal form of HKS, libheapkit.so's single-thread path, which spells them
    out from ScalableSizeClasses) and libheapkit.so's (its heap takes ScalableHeap's default
    classes: test_search checks its composition) are the same 36 classes, 16 B to 16 KiB."""
    hks = heapkit.preset("HKS").allocators[0]
    assert hks["mechanism"] == "page_segregated"
    assert tuple(hks["class_sizes"]) == DEFAULT_CLASSES
    assert DEFAULT_CLASSES[-1] == LIBHEAPKIT_LARGEST_CLASS == 16 * 1024


def test_the_trace_histogram_matches_a_replay_of_the_events(churn_trace):
    """Counts and live objects at the peak, from the C++ statistics, against the same
    computed here from the trace's events (the peak: the first operation at which live
    bytes reach their maximum)."""
    sizes_of: dict[int, int] = {}
    counts: dict[int, int] = {}
    live: dict[int, int] = {}
    live_bytes, peak, at_peak = 0, -1, {}
    for chunk in heapkit.events(churn_trace):
        for op, oid, old, size in zip(chunk["op"], chunk["id"], chunk["old_id"], chunk["size"]):
            op, oid, old, size = int(op), int(oid), int(old), int(size)
            if op == 4 or op == 2:
                gone = oid if op == 4 else old
                live_bytes -= sizes_of[gone]
                live[sizes_of[gone]] -= 1
            if op != 4:
                sizes_of[oid] = size
                counts[size] = counts.get(size, 0) + 1
                live[size] = live.get(size, 0) + 1
                live_bytes += size
                if live_bytes > peak:
                    peak, at_peak = live_bytes, dict(live)
    histogram = size_histogram(churn_trace)
    small = {s: c for s, c in counts.items() if s <= 32768}
    assert dict(zip(histogram.sizes.tolist(), histogram.counts.tolist())) == small
    expected = {s: at_peak.get(s, 0) for s in small}
    assert dict(zip(histogram.sizes.tolist(), histogram.live_at_peak.tolist())) == expected
    assert sum(expected.values()) > 0
    lists = fitted_lists(histogram)
    assert len({f.classes for f in lists}) == len(lists) >= 3
    for fitted in lists:
        assert fitted.waste <= histogram.waste(DEFAULT_CLASSES, fitted.weight) or len(fitted.classes) < 40


def test_cli_sizeclasses(churn_trace, heapkit_cli):
    done = run(heapkit_cli, "sizeclasses", churn_trace, "-k", 12, "--weight", "peak",
               env=dict(os.environ, COLUMNS="200"))
    assert done.returncode == 0, done.stderr
    histogram = size_histogram(churn_trace)
    fitted = fit(histogram, 12, "peak")
    assert " ".join(map(str, fitted.classes)) in done.stdout
    assert "libheapkit.so's 36 classes stop at 16 KiB" in done.stdout
    bad = run(heapkit_cli, "sizeclasses", churn_trace, "-k", 0)
    assert bad.returncode != 0 and "k must be a whole number" in bad.stderr and "Traceback" not in bad.stderr
