"""A cheap model of a design's objectives, learnt from the designs a search has simulated,
to choose which offspring to simulate (surrogate-assisted pre-screening).

A design's objectives are close to additive over the requests it serves: the work is a
sum over requests of what the mechanism serving each one does, the footprint mostly a sum
over the bytes live at the peak of what the mechanism serving them wastes on them. So a
design is described by, for each allocator it routes sizes to, the share of the trace's
requests and the share of its bytes live at the peak that the allocator serves (the trace's
size profile, :func:`heapkit.stats.size_profile`), under several names: its mechanism alone
(what generalises to allocators never simulated), each of its settings (a region's header,
a chunk size, a class list: what generalises to combinations of settings never simulated)
and its whole configuration (what tells one configuration from another once simulated). A ridge regression of each
objective's logarithm (over Kingsley's) on these shares predicts a design not yet
simulated in microseconds, against tens of milliseconds for a simulation.

The search (:func:`heapkit.search.search`, ``screen``) makes several candidates for each
offspring it will simulate and keeps the one whose predicted point adds most to the
front's hypervolume (or comes nearest to the front when none is predicted to add to it).
"""

from __future__ import annotations

import json
from typing import Sequence

import moocore
import numpy as np

from heapkit.dmm import Spec

#: The hypervolume's reference point over Kingsley's (heapkit.search.REFERENCE is this one).
REFERENCE = 2.0


class SizeProfile:
    """The trace's requests by size: how many objects of each size were requested and how
    many bytes of each were live at the peak, sizes of 64 KiB and more as one size."""

    def __init__(self, sizes: Sequence[int], counts: Sequence[int], live_bytes: Sequence[float]):
        self.sizes = np.asarray(sizes, dtype=np.float64)
        counts = np.asarray(counts, dtype=np.float64)
        live = np.asarray(live_bytes, dtype=np.float64)
        self.requests = counts / max(counts.sum(), 1.0)
        self.live = live / max(live.sum(), 1.0)

    @classmethod
    def of_trace(cls, trace) -> "SizeProfile":
        from heapkit.stats import size_profile

        profile = size_profile(trace)
        sizes = profile["sizes"].astype(np.float64)
        counts = profile["counts"].astype(np.float64)
        live = sizes * profile["live_at_peak"]
        large_requests = max(0.0, float(profile.get("objects", counts.sum())) - counts.sum())
        large_live = max(0.0, float(profile.get("max_live_bytes", live.sum())) - live.sum())
        return cls(np.append(sizes, 65536.0), np.append(counts, large_requests), np.append(live, large_live))

    def served(self, spec: Spec) -> list[tuple[dict, np.ndarray]]:
        """Each allocator of the design (the OS fallback included) with the mask of the
        sizes it serves."""
        data = spec.data
        taken = np.zeros(len(self.sizes), dtype=bool)
        out = []
        short = data.get("short_lived")
        if short:
            mask = np.zeros(len(self.sizes), dtype=bool)
            for low, high in short["sizes"]:
                mask |= (self.sizes > low) & (self.sizes <= high)
            out.append((dict(short["allocator"], role="short_lived"), mask))
            taken |= mask
        for allocator in data["allocators"]:
            low, high = allocator["range"]
            mask = ~taken & (self.sizes > low) & (self.sizes <= (np.inf if high is None else high))
            out.append((allocator, mask))
            taken |= mask
        if not taken.all():
            out.append(({"mechanism": data.get("fallback", "os")}, ~taken))
        return out

    def features(self, spec: Spec) -> dict[str, float]:
        """The shares of requests and of live bytes each mechanism, and each whole
        configuration, serves."""
        out: dict[str, float] = {}
        for allocator, mask in self.served(spec):
            config = {k: v for k, v in allocator.items() if k != "range"}
            mechanism = allocator["mechanism"]
            names = [mechanism, json.dumps(config, sort_keys=True)]
            names += [f"{mechanism}.{field}={value}" for field, value in _flattened(config) if field != "mechanism"]
            for name in names:
                for kind, shares in (("n", self.requests), ("b", self.live)):
                    key = f"{kind}:{name}"
                    out[key] = out.get(key, 0.0) + float(shares[mask].sum())
        return out


def _flattened(config: dict, prefix: str = "") -> list[tuple[str, str]]:
    """Each setting of an allocator as (field, value), nested objects' fields dotted."""
    out = []
    for field, value in config.items():
        if isinstance(value, dict):
            out += _flattened(value, f"{prefix}{field}.")
        else:
            out.append((prefix + field, json.dumps(value)))
    return out


class Surrogate:
    """Ridge regression of log(objective / baseline's) on :meth:`SizeProfile.features`."""

    def __init__(self, profile: SizeProfile, ridge: float = 0.05):
        self.profile = profile
        self.ridge = ridge
        self.columns: dict[str, int] = {}
        self.coefficients: np.ndarray | None = None
        self.noise: np.ndarray | None = None
        self._features: dict[str, dict[str, float]] = {}

    def _features_of(self, spec: Spec) -> dict[str, float]:
        found = self._features.get(spec.key)
        if found is None:
            found = self._features[spec.key] = self.profile.features(spec)
        return found

    def _matrix(self, specs: Sequence[Spec]) -> np.ndarray:
        x = np.zeros((len(specs), len(self.columns)))
        for row, spec in enumerate(specs):
            for name, value in self._features_of(spec).items():
                column = self.columns.get(name)
                if column is not None:
                    x[row, column] = value
        return x

    def fit(self, specs: Sequence[Spec], ratios: np.ndarray) -> "Surrogate":
        """``ratios``: one row per spec, each objective over the baseline's (positive)."""
        self.columns = {}
        for spec in specs:
            for name in self._features_of(spec):
                self.columns.setdefault(name, len(self.columns))
        x = self._matrix(specs)
        y = np.log(np.maximum(np.asarray(ratios, dtype=np.float64), 1e-9))
        # Centred, so that the intercept (the means) is not shrunk; solved in the dual (an
        # n x n system: the features outnumber the designs).
        self.x_mean, self.y_mean = x.mean(axis=0), y.mean(axis=0)
        self.x = x - self.x_mean
        self.gram = np.linalg.inv(self.x @ self.x.T + self.ridge * np.eye(len(specs)))
        self.coefficients = self.x.T @ (self.gram @ (y - self.y_mean))
        # Each objective's residual variance (the model as Bayesian linear regression).
        residuals = y - self.y_mean - self.x @ self.coefficients
        self.noise = (residuals ** 2).sum(axis=0) / max(1, len(specs) - 1)
        return self

    def _log_predictions(self, specs: Sequence[Spec]) -> tuple[np.ndarray, np.ndarray]:
        x = self._matrix(specs) - self.x_mean
        return x @ self.coefficients + self.y_mean, x

    def predict(self, specs: Sequence[Spec]) -> np.ndarray:
        """Predicted objectives over the baseline's, one row per spec."""
        return np.exp(self._log_predictions(specs)[0])

    def optimistic(self, specs: Sequence[Spec], confidence: float = 1.0) -> np.ndarray:
        """The predictions lowered by ``confidence`` standard deviations of the prediction
        (in log space): a design whose features the simulated designs say little about (a
        mechanism seen only on a few sizes, now serving most requests) is uncertain, and
        its optimistic value lets the search try it (the upper confidence bound of
        model-based optimisation) instead of trusting a guess from little data."""
        mean, x = self._log_predictions(specs)
        # x (X'X + rI)^-1 x' by Woodbury: (x.x - k' (XX' + rI)^-1 k) / r, with k = X x'.
        k = self.x @ x.T
        variance = np.maximum(((x * x).sum(axis=1) - np.einsum("ij,ik,kj->j", k, self.gram, k)) / self.ridge, 0.0)
        return np.exp(mean - confidence * np.sqrt(variance[:, None] * self.noise[None, :]))


def hypervolume(points: np.ndarray, reference: float = REFERENCE) -> float:
    inside = [p for p in np.asarray(points, dtype=np.float64) if (p < reference).all()]
    if not inside:
        return 0.0
    return float(moocore.hypervolume(np.array(inside), ref=[reference] * len(inside[0])))


def promise(point: np.ndarray, front: np.ndarray, front_volume: float, reference: float = REFERENCE) -> float:
    """How much ``point`` would add to the hypervolume of ``front`` (positive), or, when it
    adds nothing, minus how far it is from adding to it: the least amount to take from
    every objective for no point of the front to dominate it (clipped to the reference)."""
    gain = hypervolume(np.vstack([front, point]) if len(front) else point[None, :], reference) - front_volume
    if gain > 1e-12:
        return gain
    clipped = np.minimum(point, reference)
    if not len(front):
        return -float(np.max(point - reference))
    return -float(np.max(np.min(clipped - front, axis=1)))


__all__ = ["SizeProfile", "Surrogate", "hypervolume", "promise"]
