"""``heapkit compare``: designs and real allocators side by side on one trace, each design
simulated and run for real (``replay -a spec:``), each allocator replayed."""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Sequence

from heapkit.dmm import PRESETS, SpecError, as_spec
from heapkit.replay import ALLOCATORS, replay
from heapkit.simulator import simulate


def _is_design(name: str) -> bool:
    return name.upper() in PRESETS or name.endswith(".json")


def compare(trace: str | Path, designs: Sequence[str], runs: int = 3) -> list[dict]:
    """One row per name: ``simulated`` (the simulator's metrics, for designs), and the
    replay's median time, resident growth, peak RSS and (designs) bytes held."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in designs:
            if _is_design(name):
                spec = as_spec(name)
                path = Path(folder) / f"{spec.key}.json"
                path.write_text(spec.to_json())
                simulated = simulate(trace, spec)[0].to_dict()
                result = replay(trace, f"spec:{path}", runs=runs)
                label = spec.name
            elif name in ALLOCATORS or "/" in name or ".so" in name:
                simulated, result, label = None, replay(trace, name, runs=runs), name
            else:
                raise SpecError(f"'{name}' is neither a spec file, a preset ({', '.join(PRESETS)}) "
                                f"nor an allocator ({', '.join(ALLOCATORS)}, or a .so path)")
            rows.append({"name": label, "simulated": simulated, "seconds": result.median_seconds,
                         "footprint": result.median_footprint_bytes,
                         "peak_rss": int(statistics.median(r.peak_rss_bytes for r in result.runs)),
                         "heap_peak_bytes_held": result.runs[0].heap_peak_bytes_held})
    return rows


__all__ = ["compare"]
