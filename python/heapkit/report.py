"""The report a person reads in a browser: one self-contained HTML file (plotly.js and the
data inlined, nothing fetched), with the trace's profile, the designs' Pareto front, the
real allocators' measured points, footprint over time, each design's DMM map, predicted
against measured, and the search's convergence.

``render(data)`` takes a plain dict (what ``heapkit tune`` gathers in its directory, or
what ``heapkit simulate``/``search``/``compare`` have at hand); every section is optional
and left out when its data is missing. ``heapkit report DIR`` regenerates a tune
directory's report.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; } th { background: #f3f3f3; }
td.text, th.text { text-align: left; } .note { color: #555; font-size: 0.9em; } .bad { color: #b00; font-weight: bold; }
.chart { width: 100%; height: 420px; } code { background: #f3f3f3; padding: 1px 4px; }
"""


def _bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _table(headers: list[str], rows: list[list[Any]], text_columns: int = 1) -> str:
    head = "".join(f'<th class="{"text" if i < text_columns else ""}">{html.escape(h)}</th>' for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="{"text" if i < text_columns else ""}">{cell}</td>'
                                    for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


class _Page:
    def __init__(self, title: str):
        self.title = title
        self.parts: list[str] = []
        self.figures: list[tuple[str, str]] = []

    def section(self, heading: str, note: str = "") -> None:
        self.parts.append(f"<h2>{html.escape(heading)}</h2>")
        if note:
            self.parts.append(f'<p class="note">{note}</p>')

    def raw(self, text: str) -> None:
        self.parts.append(text)

    def chart(self, name: str, figure: go.Figure) -> None:
        figure.update_layout(margin=dict(l=60, r=20, t=40, b=50), template="plotly_white")
        self.parts.append(f'<div class="chart" id="chart-{name}" data-chart="{name}"></div>')
        self.figures.append((name, figure.to_json()))

    def html(self) -> str:
        calls = "\n".join(f"Plotly.newPlot('chart-{name}', ...(f => [f.data, f.layout])({spec}), "
                          "{responsive: true, displaylogo: false});" for name, spec in self.figures)
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(self.title)}</title>"
                f"<style>{_STYLE}</style><script>{get_plotlyjs()}</script></head><body>"
                f"<h1>{html.escape(self.title)}</h1>{''.join(self.parts)}<script>{calls}</script></body></html>\n")


def render(data: dict[str, Any]) -> str:
    page = _Page(data.get("title", "heapkit report"))
    if "summary" in data:
        page.raw(f"<p>{data['summary']}</p>")
    _profile(page, data.get("profile"))
    _front(page, data.get("designs", []))
    _measured(page, data.get("measured", []))
    _timeline(page, data.get("timeline", {}))
    _program(page, data.get("program", []))
    _maps(page, [d for d in data.get("designs", []) if d.get("show_map")])
    _convergence(page, data.get("history", []))
    return page.html()


def write(data: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.write_text(render(data), encoding="utf-8")
    return path


# ---- sections --------------------------------------------------------------------------------

def _profile(page: _Page, profile: dict | None) -> None:
    if not profile:
        return
    page.section("The trace", html.escape(
        f"{profile.get('events', 0):,} operations, {profile.get('objects', 0):,} objects, "
        f"{_bytes(profile.get('total_bytes'))} allocated in all, at most {_bytes(profile.get('max_live_bytes'))} "
        f"in {profile.get('max_live_objects', 0):,} objects live at once."))
    labels, counts = _buckets(profile.get("size_histogram", []))
    page.chart("sizes", go.Figure(go.Bar(x=labels, y=counts, name="objects"),
                                  layout=dict(title="request sizes (bytes)", yaxis_title="objects")))
    labels, counts = _buckets(profile.get("lifetime_events_histogram", []))
    page.chart("lifetimes", go.Figure(go.Bar(x=labels, y=counts, name="objects"),
                                      layout=dict(title="lifetimes (operations between allocation and free)",
                                                  yaxis_title="objects")))
    live = profile.get("live_over_time", [])
    if live:
        page.chart("live", go.Figure(go.Scatter(x=[p[1] for p in live], y=[p[2] for p in live], mode="lines",
                                                name="live bytes"),
                                     layout=dict(title="live bytes over time", xaxis_title="operation",
                                                 yaxis_title="bytes")))


def _buckets(histogram: list[int]) -> tuple[list[str], list[int]]:
    """Power-of-two buckets (b = 0: zero; b: [2^(b-1), 2^b)), from the first to the last used."""
    used = [b for b, n in enumerate(histogram) if n]
    if not used:
        return [], []
    labels = ["0" if b == 0 else f"{1 << (b - 1)}–{(1 << b) - 1}" for b in range(used[0], used[-1] + 1)]
    return labels, histogram[used[0]:used[-1] + 1]


_KIND_STYLE = {"front": ("circle", "designs on the front"), "preset": ("diamond", "presets"),
               "chosen": ("star", "chosen (built)"), "spec": ("square", "designs compared")}


def _front(page: _Page, designs: list[dict]) -> None:
    simulated = [d for d in designs if d.get("work") is not None]
    if not simulated:
        return
    page.section("Designs: work against footprint, energy as colour",
                 "Simulated on the trace. Lower is better on both axes; the front's designs are the ones no other "
                 "design beats on every objective.")
    figure = go.Figure()
    energies = [d["energy"] for d in simulated]
    low, high = min(energies), max(energies)
    for kind, (symbol, label) in _KIND_STYLE.items():
        group = [d for d in simulated if d.get("kind") == kind]
        if not group:
            continue
        figure.add_trace(go.Scatter(
            x=[d["work"] for d in group], y=[d["footprint"] for d in group], mode="markers+text" if kind != "front" else "markers",
            text=[d["name"] for d in group] if kind != "front" else None, textposition="top center",
            name=label, marker=dict(symbol=symbol, size=13 if kind != "front" else 9,
                                    color=[d["energy"] for d in group], colorscale="Viridis", cmin=low, cmax=high,
                                    showscale=kind == "front", colorbar=dict(title="energy (nJ)"),
                                    line=dict(width=1, color="#333")),
            hovertext=[f"{d['name']}: work {d['work']:,}, footprint {d['footprint']:,} B, energy {d['energy']:,.0f} nJ"
                       for d in group], hoverinfo="text"))
    figure.update_layout(title="the Pareto front", xaxis_title="work (steps)", yaxis_title="peak footprint (bytes)")
    page.chart("front", figure)


def _measured(page: _Page, measured: list[dict]) -> None:
    if not measured:
        return
    page.section("Measured: real allocators and built designs",
                 "The trace replayed for real (heapkit-replay, medians). Built designs also show the footprint the "
                 "simulator predicted for them: it equals the bytes the built heap held.")
    figure = go.Figure()
    for kind, label, symbol in (("allocator", "real allocators", "circle"), ("built", "built designs", "star")):
        group = [m for m in measured if m.get("kind") == kind]
        if group:
            figure.add_trace(go.Scatter(x=[m["seconds"] * 1e3 for m in group], y=[m["footprint"] for m in group],
                                        mode="markers+text", text=[m["name"] for m in group], textposition="top center",
                                        name=label, marker=dict(symbol=symbol, size=12)))
    figure.update_layout(title="replay time against footprint (peak resident set growth)", xaxis_title="time (ms)",
                         yaxis_title="footprint (bytes)")
    page.chart("measured", figure)
    rows = []
    for m in measured:
        predicted, held = m.get("predicted_footprint"), m.get("heap_peak_bytes_held")
        match = "" if predicted is None else ("yes" if predicted == held else '<span class="bad">NO</span>')
        rows.append([html.escape(m["name"]), html.escape(m.get("kind", "")), f"{m['seconds'] * 1e3:.2f} ms",
                     _bytes(m.get("footprint")), _bytes(m.get("peak_rss")),
                     "-" if predicted is None else f"{predicted:,}", "-" if held is None else f"{held:,}", match])
    page.raw(_table(["allocator", "kind", "replay time", "footprint", "peak RSS", "predicted bytes held",
                     "measured bytes held", "equal"], rows, text_columns=2))


def _timeline(page: _Page, timeline: dict[str, list]) -> None:
    if not timeline:
        return
    page.section("Footprint over time", "Bytes held at each point of the trace: simulated for the designs, the "
                                        "resident set's growth for glibc (sampled while replaying).")
    figure = go.Figure()
    for name, points in timeline.items():
        figure.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines", name=name))
    figure.update_layout(title="footprint over time", xaxis_title="operation", yaxis_title="bytes")
    page.chart("timeline", figure)


def _program(page: _Page, runs: list[dict]) -> None:
    if not runs:
        return
    page.section("The program itself under each allocator",
                 "Each allocator preloaded into the program (medians of its runs); output and exit status compared "
                 "with the run on glibc.")
    rows = [[html.escape(r["allocator"]), f"{r['seconds']:.3f} s", _bytes(r["peak_rss"]),
             f"{r['seconds'] / runs[0]['seconds']:.2f}" if runs[0]["seconds"] else "-",
             f"{r['peak_rss'] / runs[0]['peak_rss']:.2f}" if runs[0]["peak_rss"] else "-",
             "yes" if r["same_output"] else '<span class="bad">NO</span>'] for r in runs]
    page.raw(_table(["allocator", "time", "peak RSS", "time / glibc", "RSS / glibc", "same output"], rows))


def _maps(page: _Page, designs: list[dict]) -> None:
    if not designs:
        return
    page.section("DMM maps", "Each design's allocators: the sizes they serve, their mechanism and free-list policy, "
                             "and what they served on the trace (the paper's Table II).")
    for d in designs:
        page.raw(f"<h3>{html.escape(d['name'])}</h3>")
        rows = []
        for u in d.get("dmm_map", []):
            low, high = u["range"]
            rows.append(["os" if u["index"] < 0 else str(u["index"]), f"({low:,}, {'∞' if high is None else f'{high:,}'}]",
                         html.escape(u["mechanism"]), html.escape(u["structure"]), html.escape(u["fit"]),
                         html.escape(u["order"]), f"{u['requests']:,}", _bytes(u["requested_bytes"]),
                         _bytes(u["peak_bytes_held"])])
        page.raw(_table(["#", "range (bytes]", "mechanism", "structure", "fit", "order", "requests", "requested",
                         "peak held"], rows, text_columns=6))


def _convergence(page: _Page, history: list[dict]) -> None:
    if not history:
        return
    page.section("Convergence", "Hypervolume of the front (objectives over Kingsley's, reference point 2) after "
                                "each generation: higher is better.")
    figure = go.Figure(go.Scatter(x=[h["generation"] for h in history], y=[h["hypervolume"] for h in history],
                                  mode="lines+markers", name="hypervolume"))
    figure.update_layout(title="hypervolume per generation", xaxis_title="generation", yaxis_title="hypervolume")
    page.chart("convergence", figure)


def design_entry(name: str, kind: str, metrics: dict, show_map: bool = False) -> dict:
    """A design's row for render(): from SimulationMetrics.to_dict() or a search's metrics."""
    return {"name": name, "kind": kind, "work": metrics["work"], "footprint": metrics["peak_footprint"],
            "energy": metrics["energy_nj"], "dmm_map": metrics.get("dmm_map", []), "show_map": show_map}


def load_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8")) if Path(path).exists() else None


__all__ = ["design_entry", "render", "write"]
