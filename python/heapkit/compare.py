"""``heapkit compare``: designs and real allocators side by side on one trace, each design
simulated and run for real (``replay -a spec:``), each allocator replayed."""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from heapkit.dmm import PRESETS, SpecError, as_spec
from heapkit.replay import ALLOCATORS, ReplayResult, replay
from heapkit.simulator import SimulationMetrics, simulate


@dataclass(frozen=True)
class Compared:
    """One design or allocator on the trace: simulated (designs only) and replayed."""

    name: str
    simulated: Optional[SimulationMetrics]
    replayed: ReplayResult

    @property
    def seconds(self) -> float:
        return self.replayed.median_seconds

    @property
    def seconds_range(self) -> tuple[float, float]:
        values = [r.seconds for r in self.replayed.runs]
        return min(values), max(values)

    @property
    def footprint(self) -> int:
        """Resident set growth during the replay (median)."""
        return self.replayed.median_footprint_bytes

    @property
    def peak_rss(self) -> int:
        return int(statistics.median(r.peak_rss_bytes for r in self.replayed.runs))

    @property
    def heap_peak_bytes_held(self) -> Optional[int]:
        """A design's own bytes held, run for real: what the simulator predicts."""
        return self.replayed.runs[0].heap_peak_bytes_held


def _is_design(name: str) -> bool:
    return name.upper() in PRESETS or name.endswith(".json")


def compare(trace: str | Path, designs: Sequence[str], runs: int = 3) -> list[Compared]:
    """One row per name, in order: specs and presets simulated and run by the replayer,
    allocators replayed."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in designs:
            if _is_design(name):
                spec = as_spec(name)
                path = Path(folder) / f"{spec.key}.json"
                path.write_text(spec.to_json())
                rows.append(Compared(spec.name, simulate(trace, spec)[0], replay(trace, f"spec:{path}", runs=runs)))
            elif name in ALLOCATORS or "/" in name or ".so" in name:
                rows.append(Compared(name, None, replay(trace, name, runs=runs)))
            else:
                raise SpecError(f"'{name}' is neither a spec file, a preset ({', '.join(PRESETS)}) "
                                f"nor an allocator ({', '.join(ALLOCATORS)}, or a .so path)")
    return rows


def report(trace: str | Path, rows: Sequence[Compared]):
    """The comparison as a :class:`heapkit.report.Report`: the designs simulated, and every
    row's replay (time against resident growth), the designs with their predicted and
    measured bytes held."""
    from heapkit import report as hr

    points = []
    for r in rows:
        others = [o for o in rows if o is not r]
        beaten = [o.name for o in others if o.seconds <= r.seconds and o.footprint <= r.footprint
                  and (o.seconds < r.seconds or o.footprint < r.footprint)]
        points.append(hr.MeasuredPoint(
            r.name, "design" if r.simulated else "peer", r.seconds, r.footprint, r.seconds_range,
            on_front=not beaten, status="beaten on both medians by " + ", ".join(beaten) if beaten else "not beaten",
            runs=len(r.replayed.runs), predicted_footprint=r.simulated.peak_footprint if r.simulated else None,
            heap_peak_bytes_held=r.heap_peak_bytes_held if r.simulated else None))
    measured = hr.MeasuredSet("trace", "Replayed for real", "The trace replayed by heapkit-replay (one thread, "
                              "trace order; medians, bars from the fastest to the slowest run). Designs run inside the "
                              "replayer as the simulator runs them, over real memory.", points,
                              "replay time", "resident set growth")
    return hr.Report(title=f"heapkit compare: {trace}", trace=measured,
                     designs=[hr.design_point(r.name, "spec", r.simulated.to_dict(), show_map=True)
                              for r in rows if r.simulated])


__all__ = ["Compared", "compare", "report"]
