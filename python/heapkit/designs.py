"""The designs a search found, typed, and the whole of finding them.

``find_designs`` is what ``heapkit search`` and ``heapkit tune`` both run: search on the
trace (or on its first ``sample`` operations, then confirm the front on the whole trace),
take the references the front is normalised to (Kingsley, Lea, and glibc's replayed
footprint), and write ``front.json`` and one spec file per design. ``Front.load`` reads
such a directory back::

    from heapkit.designs import find_designs, Front
    front = find_designs("app.hkt", "out/", generations=20)
    for d in front.designs:
        print(d.name, d.footprint, d.work)
    front = Front.load("out/")
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import heapkit
from heapkit import search as hs
from heapkit.dmm import Spec


@dataclass(frozen=True)
class FrontDesign:
    """One design of a front: its spec (and the file holding it), its objectives and the
    simulator's figures."""

    name: str
    spec_file: Path
    key: str
    objectives: dict[str, float]
    metrics: dict[str, Any]  # SimulationMetrics.to_dict(), without the samples
    normalized: dict[str, dict[str, float]] = field(default_factory=dict)  # reference -> objective -> ratio
    genome: Optional[list[int]] = None

    @property
    def spec(self) -> Spec:
        return heapkit.load_spec(self.spec_file)

    @property
    def work(self) -> float:
        return float(self.metrics["work"])

    @property
    def time(self) -> float:
        """Predicted replay time in ns (the time model's; work where an old front has none)."""
        return float(self.metrics.get("predicted_ns", self.metrics["work"]))

    @property
    def footprint(self) -> float:
        return float(self.metrics["peak_footprint"])

    @property
    def energy(self) -> float:
        return float(self.metrics["energy_nj"])

    @property
    def mechanisms(self) -> str:
        return " + ".join(u["mechanism"] for u in self.metrics.get("dmm_map", []) if u.get("index", 0) >= 0) or "?"


@dataclass(frozen=True)
class PresetFigures:
    objectives: dict[str, float]
    metrics: dict[str, Any]


@dataclass(frozen=True)
class Front:
    """``front.json``: the non-dominated designs, the search's history and references."""

    objectives: list[str]
    designs: list[FrontDesign]
    history: list[dict] = field(default_factory=list)
    references: dict[str, dict[str, float]] = field(default_factory=dict)
    presets: dict[str, PresetFigures] = field(default_factory=dict)
    evaluations: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    interrupted: bool = False

    @classmethod
    def load(cls, directory: str | Path) -> "Front":
        path = Path(directory)
        data = json.loads((path / "front.json" if path.is_dir() else path).read_text())
        designs = [FrontDesign(d["name"], Path(d["spec_file"]), d["key"], d["objectives"], d["metrics"],
                               d.get("normalized", {}), d.get("genome")) for d in data["designs"]]
        presets = {n: PresetFigures(p["objectives"], p["metrics"]) for n, p in data.get("presets", {}).items()}
        return cls(data["objectives"], designs, data.get("history", []), data.get("references", {}), presets,
                   data.get("evaluations", 0), data.get("cache_hits", 0), data.get("seconds", 0.0),
                   data.get("interrupted", False))


def find_designs(trace: str | Path, out_dir: str | Path, *, objectives: Sequence[str] = hs.DEFAULT_OBJECTIVES,
                 sample: Optional[int] = None, glibc_reference: bool = True,
                 progress: Optional[Callable[[dict], None]] = None, **search_settings) -> tuple[Front, hs.SearchResult]:
    """Searches ``trace`` (on its first ``sample`` operations, then confirming the front on
    the whole trace, when given), normalises the front to Kingsley, Lea and (with
    ``glibc_reference``) glibc's replayed footprint, and writes ``out_dir/front.json`` and
    ``out_dir/specs/``. ``search_settings`` go to :func:`heapkit.search.search`. Returns
    the front as written and the search's own result."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    objectives = tuple(objectives)
    search_trace = Path(trace)
    if sample is not None:
        search_trace = out / f"sample-{sample}.hkt"
        heapkit.trace_prefix(trace, search_trace, sample)
    result = hs.search(search_trace, out, objectives=objectives, progress=progress, **search_settings)
    if sample is not None:
        result = hs.confirm(result, trace, objectives, cache=search_settings.get("cache"),
                            energy=search_settings.get("energy"), threads=search_settings.get("threads"))
    references = {"KNG": result.presets["KNG"].objectives, "LEA": result.presets["LEA"].objectives}
    if glibc_reference:
        references["glibc"] = {"footprint": heapkit.replay(trace, "glibc", runs=1).runs[0].footprint_bytes}
    hs.write_front(result, out, objectives, references)
    return Front.load(out), result


__all__ = ["Front", "FrontDesign", "PresetFigures", "find_designs"]
