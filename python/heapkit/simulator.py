"""The DMM simulator: any design, on a recorded trace, without running the program.

Each design runs over a simulated address space in the C++ core (the same layers a real
allocator is built from), with the GIL released, so several designs simulate on threads
at once::

    import heapkit
    results = heapkit.simulate("app.hkt", ["KNG", "LEA", "design.json"])
    for r in results:
        print(r.name, r.work, r.peak_footprint, r.energy_nj)

Metrics are defined in docs/simulator.md.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from heapkit import _core
from heapkit import timemodel as _timemodel
from heapkit._core import SimulationError
from heapkit.dmm import Spec, SpecLike, as_spec

DEFAULT_RESERVE_BYTES = 64 << 30
ENERGY_PARAMETERS = ("access_nj", "step_nj", "static_nw_per_kib", "ns_per_operation")
DEFAULT_ENERGY = {"access_nj": 1.3, "step_nj": 0.07, "static_nw_per_kib": 61.0, "ns_per_operation": 50.0}


@dataclass
class AllocatorUse:
    """One row of the DMM map: an allocator of the design and what it served."""

    index: int  # -1: the OS fallback
    range: tuple[int, Optional[int]]
    mechanism: str
    structure: str
    fit: str
    order: str
    requests: int
    requested_bytes: int
    peak_bytes_held: int


@dataclass
class SimulationMetrics:
    name: str
    spec: Spec
    trace: str
    events: int
    mallocs: int
    frees: int
    reallocs: int
    aligned: int
    failed: int
    work: int  # algorithmic steps (docs/simulator.md)
    reads: int  # metadata words read
    writes: int  # metadata words written
    splits: int
    coalesces: int
    peak_footprint: int  # resident bytes at the high-water mark: held from the OS less the pages purged
    end_footprint: int
    max_live_bytes: int
    live_bytes_at_peak: int
    usable_bytes_at_peak: int
    dynamic_energy_nj: float
    static_energy_nj: float
    seconds: float
    footprint_samples: list[tuple[int, int]] = field(repr=False)
    dmm_map: list[AllocatorUse] = field(repr=False)
    # Stopped for needing more than max_steps_per_event steps per operation: the figures
    # cover only the trace's start, and the design counts as infeasible.
    abandoned: bool = False
    # High-water mark of bytes held (address space taken from the OS, purged pages
    # included): above peak_footprint only for designs that purge (page_segregated).
    peak_bytes_held: int = 0
    # The memory model (docs/simulator.md): the allocator's metadata accesses and the
    # program's touches of its objects through the caches, the TLB and first-touched pages.
    cache_modelled: bool = False
    l1_misses: int = 0
    l2_misses: int = 0
    l3_misses: int = 0
    tlb_misses: int = 0
    pages_touched: int = 0  # pages first touched: page faults in the real replay
    releases: int = 0  # pages given back to the OS: system calls (madvise) in the real replay
    copied_bytes: int = 0  # bytes moving reallocs copied
    # The time model's prediction of the design's replay time (heapkit.timemodel).
    predicted_ns: float = 0.0

    @property
    def accesses(self) -> int:
        return self.reads + self.writes

    @property
    def energy_nj(self) -> float:
        return self.dynamic_energy_nj + self.static_energy_nj

    @property
    def internal_fragmentation(self) -> float:
        """At the footprint's peak: bytes set aside beyond the requests, over the footprint."""
        return (self.usable_bytes_at_peak - self.live_bytes_at_peak) / self.peak_footprint if self.peak_footprint else 0.0

    @property
    def external_fragmentation(self) -> float:
        """At the footprint's peak: bytes held but in no live object, over the footprint."""
        return (self.peak_footprint - self.usable_bytes_at_peak) / self.peak_footprint if self.peak_footprint else 0.0

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("spec", "dmm_map", "footprint_samples")}
        data.update(spec=self.spec.data, spec_key=self.spec.key, energy_nj=self.energy_nj, accesses=self.accesses,
                    internal_fragmentation=self.internal_fragmentation,
                    external_fragmentation=self.external_fragmentation,
                    footprint_samples=[list(s) for s in self.footprint_samples],
                    dmm_map=[u.__dict__ for u in self.dmm_map])
        return data


def load_energy_model(path: str | Path | None) -> dict[str, float]:
    """The energy model's parameters: the defaults, overridden by a JSON file's."""
    model = dict(DEFAULT_ENERGY)
    if path is None:
        return model
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: an energy model is a JSON object of {', '.join(ENERGY_PARAMETERS)}")
    for key, value in data.items():
        if key not in ENERGY_PARAMETERS:
            raise ValueError(f"{path}: unknown energy parameter '{key}' ({', '.join(ENERGY_PARAMETERS)})")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{path}: {key} must be a number >= 0")
        model[key] = float(value)
    return model


def _dmm_map(spec: Spec, allocators: list[dict[str, int]]) -> list[AllocatorUse]:
    rows = []
    area = spec.data.get("short_lived")
    if area is not None and len(allocators) > len(spec.allocators) + 1:
        # the short-lived area's figures follow the OS fallback's (placement by lifetime)
        used = allocators[len(spec.allocators) + 1]
        allocators = allocators[:len(spec.allocators) + 1]
        lst = area["allocator"].get("list", {})
        rows.append(AllocatorUse(len(spec.allocators) + 1, (area["sizes"][0][0], area["sizes"][-1][1]),
                                 area["allocator"]["mechanism"] + " (short-lived sizes)", lst.get("structure", "-"),
                                 lst.get("fit", "-"), lst.get("order", "-"), used["requests"], used["requested_bytes"],
                                 used["peak_bytes_held"]))
    for i, (described, used) in enumerate(zip(spec.allocators + [None], allocators)):
        if described is None:
            unbounded = spec.allocators[-1]["range"][1] is None
            if used["requests"] == 0 and (unbounded or spec.data["fallback"] != "os"):
                continue
            rows.append(AllocatorUse(-1, (0, None), "os (fallback)", "-", "-", "-", used["requests"],
                                     used["requested_bytes"], used["peak_bytes_held"]))
            continue
        lst = described.get("list", {})
        low, high = described["range"]
        rows.append(AllocatorUse(i, (low, high), described["mechanism"], lst.get("structure", "-"), lst.get("fit", "-"),
                                 lst.get("order", "-"), used["requests"], used["requested_bytes"],
                                 used["peak_bytes_held"]))
    return rows


def _metrics(spec: Spec, trace: str, r: dict[str, Any], time_model: _timemodel.TimeModel) -> SimulationMetrics:
    metrics = SimulationMetrics(
        name=spec.name, spec=spec, trace=trace, events=r["events"], mallocs=r["mallocs"], frees=r["frees"],
        reallocs=r["reallocs"], aligned=r["aligned"], failed=r["failed"], work=r["steps"], reads=r["reads"],
        writes=r["writes"], splits=r["splits"], coalesces=r["coalesces"], peak_footprint=r["peak_footprint"],
        end_footprint=r["end_footprint"], max_live_bytes=r["max_live_bytes"],
        live_bytes_at_peak=r["live_bytes_at_peak"], usable_bytes_at_peak=r["usable_bytes_at_peak"],
        dynamic_energy_nj=r["dynamic_energy_nj"], static_energy_nj=r["static_energy_nj"], seconds=r["seconds"],
        footprint_samples=[tuple(s) for s in r["footprint_samples"]], dmm_map=_dmm_map(spec, r["allocators"]),
        abandoned=r["abandoned"], peak_bytes_held=r["peak_bytes_held"], cache_modelled=r["cache_modelled"], l1_misses=r["l1_misses"],
        l2_misses=r["l2_misses"], l3_misses=r["l3_misses"], tlb_misses=r["tlb_misses"], pages_touched=r["pages_touched"], releases=r["releases"],
        copied_bytes=r["copied_bytes"])
    metrics.predicted_ns = time_model.predict(_timemodel.features_of(metrics))
    return metrics


# progress(spec_index, bytes_done, bytes_total)
Progress = Callable[[int, int, int], None]


def simulate(trace: str | Path, specs: SpecLike | Iterable[SpecLike], *, energy: dict[str, float] | None = None,
             reserve_bytes: int = DEFAULT_RESERVE_BYTES, samples: int = 512, threads: int | None = None,
             progress: Progress | None = None, max_steps_per_event: int = 0, cache_model: bool = True,
             touch: bool = True, time_model: _timemodel.TimeModel | str | Path | None = None) -> list[SimulationMetrics]:
    """Simulates each design on the trace; one SimulationMetrics per design, in order.

    Designs run on up to ``threads`` threads (default: the machine's cores). Raises
    SpecError for a spec that does not validate (before anything runs) and
    SimulationError for a corrupt trace or a footprint beyond ``reserve_bytes``. With
    ``max_steps_per_event``, a design needing more steps per operation than that is
    stopped early and marked ``abandoned``. ``cache_model`` follows the accesses through
    the memory model (the time model's features; off: faster, and those figures are 0);
    ``touch`` has the program write one byte per page of each object, as heapkit-replay
    does. ``predicted_ns`` comes from ``time_model`` (a TimeModel or a file; default
    heapkit.timemodel.load(): $HEAPKIT_TIME_MODEL or the shipped one).
    """
    model_of_time = time_model if isinstance(time_model, _timemodel.TimeModel) else _timemodel.load(time_model)
    if isinstance(specs, (Spec, str, Path, dict)):
        specs = [specs]
    designs = [as_spec(s) for s in specs]
    model = dict(DEFAULT_ENERGY)
    model.update(energy or {})
    trace = str(trace)
    # Each design's simulation exists only while it runs: a finished one would keep its
    # arena's metadata pages (tens of MiB on a large trace) until the last had finished.
    # Every Spec was validated when it was made (as_spec), so none can fail to parse here.

    def run(index: int) -> SimulationMetrics:
        simulation = _core.Simulation(designs[index].normalized, trace, reserve_bytes, samples, model,
                                      max_steps_per_event, cache_model, touch)
        while simulation.step(1 << 20):
            if progress is not None:
                progress(index, simulation.offset, simulation.size)
        if progress is not None:
            progress(index, simulation.size, simulation.size)
        return _metrics(designs[index], trace, simulation.result(), model_of_time)

    workers = max(1, min(threads or os.cpu_count() or 1, len(designs)))
    if workers == 1:
        return [run(i) for i in range(len(designs))]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run, range(len(designs))))


def normalized_to(results: Sequence[SimulationMetrics], baseline: str = "KNG") -> list[dict[str, float]]:
    """Work, footprint and energy of each result over the baseline's (the paper's Figures 7-9)."""
    base = next((r for r in results if r.name == baseline), None)
    if base is None:
        raise ValueError(f"no result named {baseline} to normalise to")
    ratio = lambda a, b: a / b if b else float("nan")  # noqa: E731
    return [{"name": r.name, "work": ratio(r.work, base.work), "accesses": ratio(r.accesses, base.accesses),
             "footprint": ratio(r.peak_footprint, base.peak_footprint), "energy": ratio(r.energy_nj, base.energy_nj)}
            for r in results]


__all__ = ["AllocatorUse", "DEFAULT_ENERGY", "SimulationError", "SimulationMetrics", "load_energy_model",
           "normalized_to", "simulate"]
