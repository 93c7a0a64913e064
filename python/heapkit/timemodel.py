"""The time model: a design's replay time predicted from what the simulator counts.

``work`` (list steps) misses what makes a real allocator slow on a real trace: cache and
TLB misses on its metadata, the pages it touches for the first time (each a page fault),
the bytes a moving realloc copies. The simulator counts those (docs/simulator.md, "Memory
model"), and the time model weighs them::

    predicted_ns = Σ coefficient[f] × f   for f in FEATURES

with non-negative coefficients fitted by least squares (relative error: every replay
counts alike, short or long) against real replays of many designs on several traces,
``heapkit-replay TRACE --spec FILE``: the same design running for real, one byte written
per page of each object it hands out, CPU time. The coefficients are per machine: the
package ships ones fitted on the machine heapkit was developed on (``time_model.json``
beside this file); ``heapkit calibrate`` fits them on yours and writes a file that
``HEAPKIT_TIME_MODEL`` (or ``--time-model``) points the simulator and the search at.

Besides the memory model's counts, each mechanism's requests are a feature of their own
(``requests_<mechanism>``: the requests the design's allocators of that mechanism served,
from the DMM map; ``requests_os`` those of the OS fallback): the instructions and branches of
an allocation and a free differ by mechanism beyond what ``work`` and the accesses count (a
size-class lookup by binary search, a buddy's split and merge, the run-time configured
code's tests), and those cost per request, whatever the trace.

The fit gives each trace of the calibration an offset of its own (what the replay of that
trace costs whatever the design: reading the trace, the program's own touches), so that
the features' weights are learnt from how designs differ on the same trace, which is what
ranking them takes; the ``events`` coefficient is then fitted to those offsets, so that a
prediction on a new trace includes its share.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

def _mechanisms() -> tuple[str, ...]:
    """The spec format's mechanisms (its schema's enum), and "os" for the OS fallback."""
    schema = json.loads((Path(__file__).with_name("schemas") / "dmm-spec.schema.json").read_text(encoding="utf-8"))
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            mechanism = node.get("mechanism")
            if isinstance(mechanism, dict) and isinstance(mechanism.get("enum"), list):
                found.extend(m for m in mechanism["enum"] if m not in found)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return tuple(found) + ("os",)


MECHANISMS = _mechanisms()
COUNTS = ("events", "work", "accesses", "reads", "writes", "l1_misses", "l2_misses", "l3_misses", "tlb_misses",
          "pages_touched", "releases", "copied_bytes")
REQUEST_FEATURES = tuple(f"requests_{m}" for m in MECHANISMS)
FEATURES = COUNTS + REQUEST_FEATURES
# What the fit weighs by default: accesses is reads + writes (kept so that older model files
# still load), so the fit weighs reads and writes instead. tlb_misses is counted but not
# fitted: the modelled TLB (4 KiB pages, no huge pages, no page-walk caches) gives perl's
# page-segregated designs ten times the misses of its region designs, which replay slower;
# its weight, learnt from jq, ranked perl's designs backwards (Spearman 0.852 with it, 0.972
# without, and no trace below 0.9: docs/benchmarks.md, "Predicting replay time").
UNFITTED = ("accesses", "tlb_misses")
FITTED = tuple(f for f in FEATURES if f not in UNFITTED)
FORMAT = "heapkit-time-model/1"
DEFAULT_PATH = Path(__file__).with_name("time_model.json")
ENVIRONMENT = "HEAPKIT_TIME_MODEL"


@dataclass(frozen=True)
class TimeModel:
    """Nanoseconds per unit of each feature; predicted time is their weighted sum."""

    coefficients: Mapping[str, float]
    machine: str = ""
    note: str = ""
    source: str = field(default="", compare=False)

    def predict(self, features: Mapping[str, float] | Any) -> float:
        """Predicted replay time in ns, from a mapping of FEATURES or an object with them as attributes."""
        def get(name: str) -> float:
            if isinstance(features, Mapping):
                return float(features.get(name, 0) or 0)
            return float(getattr(features, name, 0) or 0)
        return sum(self.coefficients.get(f, 0.0) * get(f) for f in FEATURES)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "machine": self.machine, "note": self.note,
                "coefficients_ns": {f: float(self.coefficients.get(f, 0.0)) for f in FEATURES}}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")


def parse(data: Any, source: str = "") -> TimeModel:
    """A TimeModel from its JSON form; ValueError with one clear line when it is not one."""
    where = f"{source}: " if source else ""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{where}not a time model (expected an object with \"format\": \"{FORMAT}\")")
    coefficients = data.get("coefficients_ns")
    if not isinstance(coefficients, dict):
        raise ValueError(f"{where}a time model needs \"coefficients_ns\": {{feature: ns}} over {', '.join(FEATURES)}")
    for key, value in coefficients.items():
        if key not in FEATURES:
            raise ValueError(f"{where}unknown time-model feature '{key}' ({', '.join(FEATURES)})")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0 or value != value:
            raise ValueError(f"{where}coefficient of {key} must be a number >= 0")
    return TimeModel({k: float(v) for k, v in coefficients.items()}, str(data.get("machine", "")),
                     str(data.get("note", "")), source)


_cache: dict[str, TimeModel] = {}


def load(path: str | Path | None = None) -> TimeModel:
    """The time model at ``path``; else at $HEAPKIT_TIME_MODEL; else the shipped default."""
    chosen = Path(path) if path is not None else Path(os.environ[ENVIRONMENT]) if os.environ.get(ENVIRONMENT) else DEFAULT_PATH
    key = str(chosen.resolve()) if chosen.exists() else str(chosen)
    if key not in _cache:
        try:
            text = chosen.read_text(encoding="utf-8")
        except OSError as error:
            raise ValueError(f"{chosen}: cannot read the time model ({error.strerror})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{chosen}: not JSON ({error.msg}, line {error.lineno})") from None
        _cache[key] = parse(data, str(chosen))
    return _cache[key]


def nonnegative_least_squares(a: np.ndarray, b: np.ndarray, iterations: int = 500) -> np.ndarray:
    """argmin ||a x - b|| over x >= 0 (Lawson and Hanson's active-set method)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    gradient = a.T @ (b - a @ x)
    tolerance = 1e-10 * max(1.0, float(np.abs(gradient).max(initial=0.0)))
    for _ in range(iterations):
        candidates = ~passive & (gradient > tolerance)
        if not candidates.any():
            break
        passive[np.argmax(np.where(candidates, gradient, -np.inf))] = True
        while True:
            z = np.zeros(n)
            z[passive], *_ = np.linalg.lstsq(a[:, passive], b, rcond=None)
            if (z[passive] > 0).all():
                x = z
                break
            blocking = passive & (z <= 0)
            step = np.min(x[blocking] / (x[blocking] - z[blocking]))
            x = x + step * (z - x)
            passive &= x > 1e-15
            x[~passive] = 0.0
        gradient = a.T @ (b - a @ x)
    return x


def _relative_nnls(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative x-coefficients minimising the relative error of x @ c against y."""
    # Columns scaled to unit size so that the solver's tolerance means the same for all.
    scale = np.abs(x).max(axis=0)
    scale[scale == 0] = 1.0
    weights = 1.0 / y
    return nonnegative_least_squares(x / scale * weights[:, None], y * weights) / scale


def fit(rows: Sequence[Mapping[str, Any]], target: str = "ns", features: Sequence[str] = FITTED,
        machine: str = "", note: str = "", group: str = "trace", offsets: bool = True) -> TimeModel:
    """Non-negative coefficients minimising the relative error of the prediction over ``rows``
    (each a mapping of the features and the measured ``target`` in ns).

    When the rows name their trace (``group``), each trace gets a non-negative offset of its
    own, fitted with the coefficients of the features that vary between designs; the
    features constant within every trace (``events``) are then fitted to the offsets."""
    if not rows:
        raise ValueError("no measurements to fit the time model to")
    features = list(features)
    x = np.array([[float(r.get(f, 0) or 0) for f in features] for r in rows])
    y = np.array([float(r[target]) for r in rows])
    if (y <= 0).any():
        raise ValueError("measured times must be positive")
    groups = [r.get(group) for r in rows]
    names = list(dict.fromkeys(groups))
    if not offsets or None in names or len(names) < 2:
        solution = _relative_nnls(x, y)
        return TimeModel({**{f: 0.0 for f in FEATURES}, **{f: float(c) for f, c in zip(features, solution)}},
                         machine, note)
    member = np.array([[g == name for name in names] for g in groups], dtype=float)
    per_trace = [i for i, f in enumerate(features)
                 if all(np.ptp(x[member[:, t] > 0, i]) == 0 for t in range(len(names)))]
    varying = [i for i in range(len(features)) if i not in per_trace]
    solution = _relative_nnls(np.hstack([x[:, varying], member]), y)
    coefficients = {f: 0.0 for f in (*FEATURES, *features)}
    for i, c in zip(varying, solution):
        coefficients[features[i]] = float(c)
    offsets = solution[len(varying):]
    if per_trace and (offsets > 0).any():
        first = [groups.index(name) for name in names]
        kept = offsets > 0
        level = _relative_nnls(x[first][:, per_trace][kept], offsets[kept])
        for i, c in zip(per_trace, level):
            coefficients[features[i]] = float(c)
    return TimeModel(coefficients, machine, note)


def ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks, ties sharing their mean rank."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    r = np.empty(len(values))
    r[order] = np.arange(len(values), dtype=float)
    for v in np.unique(values):
        same = values == v
        if same.sum() > 1:
            r[same] = r[same].mean()
    return r


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (NaN when either side is constant)."""
    ra, rb = ranks(a), ranks(b)
    if len(ra) < 2 or ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def leave_one_group_out(rows: Sequence[Mapping[str, Any]], group: str = "trace", target: str = "ns",
                        features: Sequence[str] = FITTED, offsets: bool = True) -> list[float]:
    """Each row's prediction by the model fitted on the other groups' rows (traces, by default)."""
    predicted = [0.0] * len(rows)
    for held_out in sorted({r[group] for r in rows}):
        model = fit([r for r in rows if r[group] != held_out], target, features, group=group, offsets=offsets)
        for i, r in enumerate(rows):
            if r[group] == held_out:
                predicted[i] = model.predict(r)
    return predicted


def features_of(metrics: Any) -> dict[str, float]:
    """The model's features from a SimulationMetrics (or a dict of its fields: a mapping's
    ``dmm_map`` rows are dicts with "mechanism" and "requests")."""
    get = (lambda k: metrics[k]) if isinstance(metrics, Mapping) else (lambda k: getattr(metrics, k))
    features = {f: float(get(f)) for f in COUNTS}
    features.update({f: 0.0 for f in REQUEST_FEATURES})
    uses = metrics.get("dmm_map", []) if isinstance(metrics, Mapping) else getattr(metrics, "dmm_map", [])
    for use in uses:
        mechanism = use["mechanism"] if isinstance(use, Mapping) else use.mechanism
        requests = use["requests"] if isinstance(use, Mapping) else use.requests
        name = "requests_os" if mechanism.startswith("os") else f"requests_{mechanism}"
        if name in features:
            features[name] += float(requests)
    return features


def replay_cpu_ns(trace: str | Path, spec: str | Path, replay_program: str | Path, touch: bool = True) -> float:
    """One real replay of a design on a trace: the replaying thread's CPU time, in ns."""
    command = [str(replay_program), str(trace), "--spec", str(spec)] + ([] if touch else ["--no-touch"])
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip() or f'exit status {done.returncode}'}")
    return json.loads(done.stdout)["cpu_seconds"] * 1e9


def measure(trace: str | Path, specs: Sequence[str | Path], runs: int, replay_program: str | Path,
            touch: bool = True, progress: Any = None) -> list[dict[str, float]]:
    """Each design's replay time on the trace: the median of ``runs`` rounds, each round
    replaying every design once, in an order of its own (interleaved and shuffled, so that
    the machine's drift, or a burst of load from elsewhere, falls on different designs in
    each round). Returns per design {"ns": median, "spread": (max - min) / median,
    "samples": [...]}."""
    import random

    samples: list[list[float]] = [[] for _ in specs]
    rng = random.Random(len(specs))
    for round_index in range(runs):
        order = list(range(len(specs)))
        rng.shuffle(order)
        for done, i in enumerate(order):
            samples[i].append(replay_cpu_ns(trace, specs[i], replay_program, touch))
            if progress is not None:
                progress(round_index * len(specs) + done + 1, runs * len(specs))
    out = []
    for values in samples:
        median = statistics.median(values)
        out.append({"ns": median, "spread": (max(values) - min(values)) / median if median else 0.0, "samples": values})
    return out


def random_designs(trace: str | Path, count: int, seed: int = 1) -> list[Any]:
    """``count`` distinct valid designs from the trace's grammar (random genomes, as the
    search's first generation draws them)."""
    import random

    from heapkit.grammar import GrammarError, design_from_text, generate_for_trace

    grammar = generate_for_trace(trace)
    rng = random.Random(seed)
    designs: dict[str, Any] = {}
    for _ in range(count * 50):
        if len(designs) >= count:
            break
        text = grammar.derive([rng.randrange(256) for _ in range(rng.randint(16, 48))])
        if text is None:
            continue
        try:
            spec = design_from_text(text, f"random-{len(designs)}")
        except (GrammarError, ValueError):
            continue
        designs.setdefault(spec.key, spec)
    return list(designs.values())


def calibrate(traces: Sequence[str | Path], specs: Sequence[Any], runs: int = 3, replay_program: str | Path | None = None,
              machine: str = "", progress: Any = None, work_dir: str | Path | None = None
              ) -> tuple[TimeModel, list[dict[str, Any]]]:
    """Simulates and replays every design on every trace, and fits the time model to them.
    Returns the model and the rows it was fitted on (features, measured ns, spread)."""
    import tempfile

    import heapkit
    from heapkit._paths import program
    from heapkit.dmm import as_spec

    replay_program = replay_program or program("heapkit-replay")
    designs = [as_spec(s) for s in specs]
    directory = Path(work_dir or tempfile.mkdtemp(prefix="heapkit-calibrate-"))
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for i, design in enumerate(designs):
        path = directory / f"design-{i}.json"
        path.write_text(design.to_json(), encoding="utf-8")
        files.append(path)
    rows: list[dict[str, Any]] = []
    for trace in traces:
        simulated = heapkit.simulate(trace, designs, max_steps_per_event=400)
        kept = [(d, f, r) for d, f, r in zip(designs, files, simulated) if not r.abandoned and r.failed == 0]
        measured = measure(trace, [f for _, f, _ in kept], runs, replay_program, progress=progress)
        for (design, _, result), m in zip(kept, measured):
            rows.append({"trace": str(trace), "design": design.name, **features_of(result), "ns": m["ns"],
                         "spread": m["spread"]})
    model = fit(rows, machine=machine or os.uname().nodename,
                note=f"fitted on {len(rows)} replays of {len(designs)} designs on {len(traces)} traces")
    return model, rows


__all__ = ["COUNTS", "DEFAULT_PATH", "ENVIRONMENT", "FEATURES", "FITTED", "MECHANISMS", "REQUEST_FEATURES", "TimeModel", "UNFITTED", "calibrate", "features_of", "fit", "leave_one_group_out",
           "load", "measure", "nonnegative_least_squares", "parse", "random_designs", "ranks", "spearman"]
