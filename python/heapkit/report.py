"""The report a person reads in a browser: one self-contained HTML file (plotly.js and the
data inlined, nothing fetched).

A :class:`Report` holds what there is to show; every section is optional and left out
when its data is missing. ``heapkit tune`` fills the measured front first (the program
under each allocator, raced), then the race on the trace, the processes the command
started, the trace's profile, the simulated designs, footprint over time, the DMM maps and
the search's convergence; ``heapkit simulate``, ``search`` and ``compare`` fill what they
have. Every text that comes from the command line or a file is escaped.

Charts read whatever the spread: an axis whose values span more than a decade is
logarithmic, and legends sit outside the plotting area, so they never cover a point.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; overflow-wrap: anywhere; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; } th { background: #f3f3f3; }
td.text, th.text { text-align: left; } .note { color: #555; font-size: 0.9em; } .bad { color: #b00; font-weight: bold; }
.chart { width: 100%; height: 480px; } code { background: #f3f3f3; padding: 1px 4px; overflow-wrap: anywhere; }
.verdict { font-size: 1.1em; padding: 0.6em 0.9em; background: #eef6ee; border-left: 4px solid #3a3; }
.front { font-weight: bold; }
"""

# Values spanning this factor or more: a logarithmic axis (a linear one would crowd the
# smaller values into a corner).
LOG_SPAN = 5.0


@dataclass
class DesignPoint:
    """A design simulated on the trace."""

    name: str
    kind: str  # "front", "preset", "chosen" (built), "spec"
    work: float
    footprint: float
    energy: float
    dmm_map: list[dict] = field(default_factory=list)
    show_map: bool = False
    predicted_ns: float = 0.0  # the time model's (0: a result from before it)


@dataclass
class MeasuredPoint:
    """An allocator measured for real: medians with their spread (min, max)."""

    name: str
    kind: str  # "peer" or "design"
    seconds: float
    peak_rss: float
    seconds_range: tuple[float, float] = (math.nan, math.nan)
    rss_range: tuple[float, float] = (math.nan, math.nan)
    on_front: bool = False
    status: str = ""  # "on the front", "dominated by X after N rounds", "output differs", ...
    recommended: bool = False
    time_ratio: Optional[float] = None  # over the reference's (paired)
    rss_ratio: Optional[float] = None
    runs: int = 0
    predicted_footprint: Optional[int] = None  # a built design's simulated bytes held
    heap_peak_bytes_held: Optional[int] = None  # and its built heap's, replaying the trace


@dataclass
class MeasuredSet:
    """Allocators measured on one workload: the program itself, or its trace replayed."""

    key: str  # the chart's name
    heading: str
    note: str
    points: list[MeasuredPoint]
    time_label: str = "CPU time (user + system)"
    rss_label: str = "peak resident set"
    reference: Optional[str] = None


@dataclass
class ProcessRow:
    pid: int
    image: int
    executable: str
    events: int
    threads: int
    chosen: bool


@dataclass
class Report:
    title: str
    command: str = ""
    verdict: str = ""  # the recommendation, one line
    notes: list[str] = field(default_factory=list)  # lines under it
    program: Optional[MeasuredSet] = None
    trace: Optional[MeasuredSet] = None
    processes: list[ProcessRow] = field(default_factory=list)
    profile: Optional[dict[str, Any]] = None  # TraceStats.to_dict()
    designs: list[DesignPoint] = field(default_factory=list)
    timeline: dict[str, list] = field(default_factory=dict)  # name -> [(operation, bytes)]
    history: list[dict] = field(default_factory=list)  # the search's, per generation


def _bytes(n: float | None) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _seconds(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.3f} s"


def _table(headers: list[str], rows: list[list[str]], text_columns: int = 1, classes: Optional[list[str]] = None) -> str:
    """Cells are HTML already (escape what comes from outside before)."""
    head = "".join(f'<th class="{"text" if i < text_columns else ""}">{html.escape(h)}</th>' for i, h in enumerate(headers))
    body = "".join(f'<tr class="{classes[r] if classes else ""}">' + "".join(
        f'<td class="{"text" if i < text_columns else ""}">{cell}</td>' for i, cell in enumerate(row)) + "</tr>"
        for r, row in enumerate(rows))
    return f"<table><tr>{head}</tr>{body}</table>"


class _Page:
    def __init__(self, title: str):
        self.title = title
        self.parts: list[str] = []
        self.figures: list[tuple[str, str]] = []

    def section(self, heading: str, note: str = "") -> None:
        self.parts.append(f"<h2>{html.escape(heading)}</h2>")
        if note:
            self.parts.append(f'<p class="note">{html.escape(note)}</p>')

    def raw(self, text: str) -> None:
        self.parts.append(text)

    def chart(self, name: str, figure: go.Figure) -> None:
        figure.update_layout(template="plotly_white")
        # The legend goes under the plotting area: it never covers a point.
        figure.update_layout(legend=dict(orientation="h", yanchor="top", y=-0.18, xanchor="left", x=0),
                             margin=dict(l=70, r=30, t=50, b=110))
        self.parts.append(f'<div class="chart" id="chart-{name}" data-chart="{name}"></div>')
        self.figures.append((name, figure.to_json()))

    def html(self) -> str:
        calls = "\n".join(f"Plotly.newPlot('chart-{name}', ...(f => [f.data, f.layout])({spec}), "
                          "{responsive: true, displaylogo: false});" for name, spec in self.figures)
        # JSON inside a script: "</" would end the script early.
        calls = calls.replace("</", "<\\/")
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(self.title)}</title>"
                f"<style>{_STYLE}</style><script>{get_plotlyjs()}</script></head><body>"
                f"<h1>{html.escape(self.title)}</h1>{''.join(self.parts)}<script>{calls}</script></body></html>\n")


def axis_type(values: list[float]) -> str:
    """'log' when the positive values span a factor of LOG_SPAN or more, else 'linear'."""
    positive = [v for v in values if v and v > 0 and not math.isnan(v)]
    if len(positive) < 2:
        return "linear"
    return "log" if max(positive) / min(positive) >= LOG_SPAN else "linear"


def axis(title: str, values: list[float]) -> dict:
    """A Plotly axis for ``values``: logarithmic when they span a factor of LOG_SPAN, its
    ticks then at 1, 2, 3 and 5 times the powers of ten, written out in full (not Plotly's
    lone digits)."""
    kind = axis_type(values)
    if kind == "linear":
        return dict(title=title, type="linear")
    positive = [v for v in values if v and v > 0 and not math.isnan(v)]
    low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    ticks = [m * 10.0 ** e for e in range(low, high + 1) for m in (1, 2, 3, 5)
             if min(positive) / 1.5 <= m * 10.0 ** e <= max(positive) * 1.5]
    return dict(title=title, type="log", tickvals=ticks, ticktext=[f"{t:,.6g}" for t in ticks])


def render(report: Report) -> str:
    page = _Page(report.title)
    if report.command:
        page.raw(f"<p>Command: <code>{html.escape(report.command)}</code></p>")
    if report.verdict:
        page.raw(f'<p class="verdict" id="verdict">{html.escape(report.verdict)}</p>')
    for line in report.notes:
        page.raw(f'<p class="note">{html.escape(line)}</p>')
    for measured in (report.program, report.trace):
        if measured is not None:
            _measured(page, measured)
    _processes(page, report.processes)
    _profile(page, report.profile)
    _front(page, report.designs)
    _timeline(page, report.timeline)
    _maps(page, [d for d in report.designs if d.show_map])
    _convergence(page, report.history)
    return page.html()


def write(report: Report, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(render(report), encoding="utf-8")
    return path


# ---- sections --------------------------------------------------------------------------------

def _measured(page: _Page, measured: MeasuredSet) -> None:
    points = [p for p in measured.points if not math.isnan(p.seconds)]
    if not points:
        return
    page.section(measured.heading, measured.note)
    figure = go.Figure()
    # The staircase joins the front's points that no other beats on both medians (a pair the
    # race could not separate stays on the front, but off the line).
    on_front = [p for p in points if p.on_front]
    front = sorted([p for p in on_front if not any(o.seconds <= p.seconds and o.peak_rss <= p.peak_rss and
                                                   (o.seconds, o.peak_rss) != (p.seconds, p.peak_rss)
                                                   for o in on_front)], key=lambda p: p.seconds)
    seconds = [p.seconds for p in points]
    scale, unit = (1e3, "ms") if max(seconds) < 1 else (1.0, "s")
    if len(front) > 1:
        figure.add_trace(go.Scatter(x=[p.seconds * scale for p in front], y=[p.peak_rss / 2**20 for p in front],
                                    mode="lines", line=dict(shape="hv", color="#3a3", width=2, dash="dot"),
                                    name="measured front", hoverinfo="skip"))
    groups = (("peers (off the shelf)", "circle", "#1f77b4", lambda p: p.kind == "peer" and not p.recommended),
              ("designs built for this program", "diamond", "#d62728", lambda p: p.kind == "design" and not p.recommended),
              ("recommended", "star", "#2ca02c", lambda p: p.recommended))
    for label, symbol, colour, member in groups:
        group = [p for p in points if member(p)]
        if not group:
            continue

        def bar(values: list[tuple[float, float]], centres: list[float], k: float) -> dict:
            ok = [not math.isnan(v[0]) for v in values]
            return dict(type="data", symmetric=False, visible=all(ok),
                        array=[(v[1] - c) * k if o else 0 for v, c, o in zip(values, centres, ok)],
                        arrayminus=[(c - v[0]) * k if o else 0 for v, c, o in zip(values, centres, ok)],
                        thickness=1, width=3, color=colour)

        figure.add_trace(go.Scatter(
            x=[p.seconds * scale for p in group], y=[p.peak_rss / 2**20 for p in group],
            mode="markers+text", name=label,
            # Names on the staircase (and the recommendation) only: hover, and the table, name the others.
            # Successive points of the staircase are near each other: their names alternate above and below.
            text=[p.name if p in front or p.recommended else "" for p in group],
            textposition=["bottom center" if p in front and front.index(p) % 2 else "top center" for p in group],
            textfont=dict(size=12, color=colour),
            marker=dict(symbol=symbol, size=18 if label == "recommended" else 11, color=colour,
                        line=dict(width=1, color="#222"), opacity=[1.0 if p.on_front else 0.45 for p in group]),
            error_x=bar([p.seconds_range for p in group], [p.seconds for p in group], scale),
            error_y=bar([p.rss_range for p in group], [p.peak_rss for p in group], 1 / 2**20),
            hovertext=[f"{p.name}: {p.seconds * scale:.3g} {unit}, {p.peak_rss / 2**20:.2f} MiB — {p.status}"
                       for p in group], hoverinfo="text"))
    figure.update_layout(title=f"{measured.time_label} against {measured.rss_label} (medians; bars: min–max)",
                         xaxis=axis(f"{measured.time_label} ({unit})", [p.seconds * scale for p in points]),
                         yaxis=axis(f"{measured.rss_label} (MiB)", [p.peak_rss / 2**20 for p in points]))
    page.chart(measured.key, figure)
    reference = measured.reference
    rows, classes = [], []
    for p in sorted(points, key=lambda p: (not p.recommended, not p.on_front, p.seconds)):
        rows.append([html.escape(p.name) + (" ★" if p.recommended else ""), html.escape(p.kind),
                     f"{_seconds(p.seconds)}" + (f" ({_seconds(p.seconds_range[0])}–{_seconds(p.seconds_range[1])})"
                                                 if not math.isnan(p.seconds_range[0]) else ""),
                     _bytes(p.peak_rss), "-" if p.time_ratio is None else f"{p.time_ratio:.3f}",
                     "-" if p.rss_ratio is None else f"{p.rss_ratio:.3f}", str(p.runs),
                     "-" if p.predicted_footprint is None else f"{p.predicted_footprint:,}",
                     "-" if p.heap_peak_bytes_held is None else (
                         f"{p.heap_peak_bytes_held:,}" if p.heap_peak_bytes_held == p.predicted_footprint
                         else f'<span class="bad">{p.heap_peak_bytes_held:,}</span>'),
                     html.escape(p.status) if p.on_front or p.recommended else
                     f'<span class="note">{html.escape(p.status)}</span>'])
        classes.append("front" if p.on_front else "")
    ratio = f"/ {reference}" if reference else "ratio"
    page.raw(_table(["allocator", "kind", "time, median (min–max)", "peak RSS", f"time {ratio}", f"RSS {ratio}", "runs",
                     "predicted bytes held", "built heap's bytes held", "verdict"], rows, text_columns=2,
                    classes=classes))


def _processes(page: _Page, processes: list[ProcessRow]) -> None:
    if len(processes) < 2:
        return
    page.section("The processes the command started", "One trace per process (and per exec); the tuned one is in bold.")
    rows = [[html.escape(p.executable or "?"), str(p.pid) + (f" (exec {p.image})" if p.image else ""), f"{p.events:,}",
             str(p.threads), "tuned" if p.chosen else ""] for p in processes]
    page.raw(_table(["program", "pid", "operations", "threads", ""], rows, text_columns=1,
                    classes=["front" if p.chosen else "" for p in processes]))


def _profile(page: _Page, profile: Optional[dict]) -> None:
    if not profile:
        return
    page.section("The trace", f"{profile.get('events', 0):,} operations, {profile.get('objects', 0):,} objects, "
                              f"{_bytes(profile.get('total_bytes'))} allocated in all, at most "
                              f"{_bytes(profile.get('max_live_bytes'))} in {profile.get('max_live_objects', 0):,} "
                              "objects live at once.")
    labels, counts = _buckets(profile.get("size_histogram", []))
    if labels:
        page.chart("sizes", go.Figure(go.Bar(x=labels, y=counts, name="objects"),
                                      layout=dict(title="request sizes (bytes)", yaxis=axis("objects", counts))))
    labels, counts = _buckets(profile.get("lifetime_events_histogram", []))
    if labels:
        page.chart("lifetimes", go.Figure(go.Bar(x=labels, y=counts, name="objects"),
                                          layout=dict(title="lifetimes (operations between allocation and free)",
                                                      yaxis=axis("objects", counts))))
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


_KIND_STYLE = {"front": ("circle", "designs on the simulated front"), "preset": ("diamond", "presets"),
               "chosen": ("star", "built and measured"), "spec": ("square", "designs compared")}


def _front(page: _Page, designs: list[DesignPoint]) -> None:
    if not designs:
        return
    timed = all(d.predicted_ns > 0 for d in designs)
    time_of = (lambda d: d.predicted_ns / 1e6) if timed else (lambda d: d.work)
    page.section("Designs simulated on the trace: " + ("predicted time" if timed else "work") +
                 " against footprint, energy as colour",
                 "What the search optimised (the simulator's figures); the measured front above is what decides. "
                 "Lower is better on both axes.")
    figure = go.Figure()
    energies = [d.energy for d in designs]
    low, high = min(energies), max(energies)
    for kind, (symbol, label) in _KIND_STYLE.items():
        group = [d for d in designs if d.kind == kind]
        if not group:
            continue
        labelled = kind != "front"
        figure.add_trace(go.Scatter(
            x=[time_of(d) for d in group], y=[d.footprint for d in group], mode="markers+text" if labelled else "markers",
            text=[d.name for d in group] if labelled else None, textposition="top center",
            name=label, marker=dict(symbol=symbol, size=13 if labelled else 9,
                                    color=[d.energy for d in group], colorscale="Viridis", cmin=low, cmax=high,
                                    showscale=kind == "front", colorbar=dict(title="energy (nJ)"),
                                    line=dict(width=1, color="#333")),
            hovertext=[f"{d.name}: predicted {d.predicted_ns / 1e6:,.1f} ms, work {d.work:,.0f}, footprint "
                       f"{d.footprint:,.0f} B, energy {d.energy:,.0f} nJ"
                       for d in group], hoverinfo="text"))
    figure.update_layout(title="simulated designs",
                         xaxis=axis("predicted replay time (ms)" if timed else "work (steps)",
                                    [time_of(d) for d in designs]),
                         yaxis=axis("peak footprint (bytes)", [d.footprint for d in designs]))
    page.chart("front", figure)


def _timeline(page: _Page, timeline: dict[str, list]) -> None:
    if not timeline:
        return
    page.section("Footprint over time", "Bytes held at each point of the trace: simulated for the designs, the "
                                        "resident set's growth for glibc (sampled while replaying).")
    figure = go.Figure()
    for name, points in timeline.items():
        figure.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines", name=name))
    values = [p[1] for points in timeline.values() for p in points]
    figure.update_layout(title="footprint over time", xaxis_title="operation", yaxis=axis("bytes", values))
    page.chart("timeline", figure)


def _maps(page: _Page, designs: list[DesignPoint]) -> None:
    if not designs:
        return
    page.section("DMM maps", "Each design's allocators: the sizes they serve, their mechanism and free-list policy, "
                             "and what they served on the trace (the paper's Table II).")
    for d in designs:
        page.raw(f"<h3>{html.escape(d.name)}</h3>")
        rows = []
        for u in d.dmm_map:
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
    page.section("Convergence", "Hypervolume of the simulated front (objectives over Kingsley's, reference point 2) "
                                "after each generation: higher is better.")
    figure = go.Figure(go.Scatter(x=[h["generation"] for h in history], y=[h["hypervolume"] for h in history],
                                  mode="lines+markers", name="hypervolume"))
    figure.update_layout(title="hypervolume per generation", xaxis_title="generation", yaxis_title="hypervolume")
    page.chart("convergence", figure)


def design_point(name: str, kind: str, metrics: dict, show_map: bool = False) -> DesignPoint:
    """A design's point: from SimulationMetrics.to_dict() or a search's metrics."""
    return DesignPoint(name, kind, metrics["work"], metrics["peak_footprint"], metrics["energy_nj"],
                       metrics.get("dmm_map", []), show_map, float(metrics.get("predicted_ns", 0.0)))


__all__ = ["DesignPoint", "MeasuredPoint", "MeasuredSet", "ProcessRow", "Report", "axis", "axis_type", "design_point", "render",
           "write"]
