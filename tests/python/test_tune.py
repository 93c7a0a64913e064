"""heapkit tune end to end on a command that starts several processes, the races and the
recommendation it prints, its report opened in a real headless browser (Debian's
Chromium, network blocked) with a screenshot; resuming after an interruption; a program
that allocates nothing; heapkit compare and heapkit report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import heapkit
from heapkit import race as hr
from heapkit import report as rp
from heapkit import tune as ht
from heapkit.record import select_process

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
INJECTED = "<img src=x id=injected onerror=alert(1)>"
SCREENSHOTS = Path(os.environ.get("HEAPKIT_SCREENSHOTS", "/tmp/heapkit-screenshots"))


def open_in_browser(report: Path, screenshot: Path | None = None) -> dict:
    """Loads the report with every non-file request refused; returns, per chart, the
    points Plotly drew and where (plot area, legend, points' boxes, axis types and tick
    labels), the console's errors, the refused requests, and what the page says."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--no-first-run", "--disable-sync", "--disable-quic"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        # Chromium starts slowly on a loaded 2-core machine: 30 s (the default) ran out there.
        page.set_default_timeout(120000)
        errors, refused, dialogs = [], [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

        def route(r):
            if r.request.url.startswith("file://"):
                r.continue_()
            else:
                refused.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.goto(report.resolve().as_uri())
        # Plotly marks each container it has drawn.
        page.wait_for_function("Array.from(document.querySelectorAll('.chart'))"
                               ".every(d => d.classList.contains('js-plotly-plot'))")
        charts = page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll('.chart')).map(d => {
            const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
            const plot = d.querySelector('.nsewdrag');
            const legend = d.querySelector('.legend');
            return [d.dataset.chart, {
                points: (d.data || []).map(t => (t.x || []).length),
                drawn: d.querySelectorAll('.point, .scatterlayer path, .bars path').length,
                markers: Array.from(d.querySelectorAll('.scatterlayer .points .point')).map(box),
                plot: plot ? box(plot) : null, legend: legend ? box(legend) : null,
                xtype: d._fullLayout.xaxis ? d._fullLayout.xaxis.type : null,
                ytype: d._fullLayout.yaxis ? d._fullLayout.yaxis.type : null,
                xticks: Array.from(d.querySelectorAll('.xtick text')).map(t => t.textContent),
                yticks: Array.from(d.querySelectorAll('.ytick text')).map(t => t.textContent)}];
        }))""")
        order = page.evaluate("Array.from(document.querySelectorAll('.chart')).map(d => d.dataset.chart)")
        tables = page.evaluate("document.querySelectorAll('table').length")
        title = page.evaluate("document.querySelector('h1').textContent")
        verdict = page.evaluate("(document.getElementById('verdict') || {}).textContent || ''")
        injected = page.evaluate("document.getElementById('injected') !== null")
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=False)
        browser.close()
    return {"charts": charts, "order": order, "errors": errors, "refused": refused, "tables": tables, "title": title,
            "verdict": verdict, "injected": injected, "dialogs": dialogs}


def overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def assert_readable(chart: dict, name: str) -> None:
    """Every marker inside the plotting area, and the legend clear of it."""
    plot = chart["plot"]
    assert plot is not None, name
    for m in chart["markers"]:
        centre = ((m[0] + m[2]) / 2, (m[1] + m[3]) / 2)
        assert plot[0] - 1 <= centre[0] <= plot[2] + 1 and plot[1] - 1 <= centre[1] <= plot[3] + 1, (name, m, plot)
    if chart["legend"] is not None:
        assert not overlaps(chart["legend"], plot), (name, chart["legend"], plot)


@pytest.fixture(scope="module")
def tuned(programs, tmp_path_factory):
    """tune on a driver that runs churn twice (a small run, then a bigger one)."""
    out = tmp_path_factory.mktemp("tune") / "out"
    cli = [str(Path(os.sys.executable).parent / "heapkit")]
    churn = programs["churn"]
    command = [str(programs["driver"]), f"{churn} 3000", f"{churn} 12000 '{INJECTED}'"]
    done = subprocess.run([*cli, "tune", "-o", str(out), "--population", "8", "--generations", "2", "--designs", "1",
                           "--finalists", "1", "-n", "6", "--max-runs", "6", "--budget", "60", "--trace-budget", "30",
                           "--cache", str(out.parent / "cache.sqlite"), "--", *command], capture_output=True,
                          text=True, timeout=900, env=dict(os.environ, COLUMNS="250"))
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done


def test_tune_tunes_the_busiest_process(tuned):
    out, done = tuned
    selection = json.loads((out / "selection.json").read_text())
    churns = [t for p in selection["programs"] for t in p["processes"] if t["executable"].endswith("churn")]
    assert len(churns) == 2 and Path(selection["executable"]).name == "churn" and not selection["merged"]
    biggest = max(churns, key=lambda t: t["events"])
    assert [t["pid"] for t in selection["processes"]] == [biggest["pid"]]
    assert heapkit.stats(out / "trace.hkt").events == biggest["events"]
    driver = [t for p in selection["programs"] for t in p["processes"] if t["executable"].endswith("driver")]
    assert driver and driver[0]["events"] < biggest["events"]
    assert f"tuned on {selection['executable']} (pid {biggest['pid']})" in done.stdout


def test_tune_races_the_peers_and_recommends_a_point_of_the_measured_front(tuned):
    out, done = tuned
    program = hr.RaceResult.from_dict(json.loads((out / "race-program.json").read_text()))
    peers = {s.name for s in program.standings if s.kind == "peer"}
    installed, missing = hr.available_peers(ht.PEERS)
    assert peers == {c.name for c in installed} and {"glibc", "jemalloc", "mimalloc", "heapkit", "lea"} <= peers
    assert [s.name for s in program.standings if s.kind == "design"]  # at least one design raced on the program
    assert all(not s.disqualified for s in program.standings), [s.disqualified for s in program.standings]
    recommendation = json.loads((out / "recommendation.json").read_text())
    assert recommendation["name"] in {s.name for s in program.front()}
    assert not program.dominated_by(recommendation["name"])
    assert recommendation["line"] in done.stdout.replace("\n", " ") or recommendation["line"][:60] in done.stdout
    assert "--prefer balanced" in recommendation["line"] and "use it: " in done.stdout and "report: " in done.stdout
    built = json.loads((out / "designs.json").read_text())["designs"]
    assert {d["name"] for d in built} >= {"LEA"}
    for d in built:  # prediction = measurement, to the byte
        assert d["predicted_footprint"] == d["heap_peak_bytes_held"], d
        assert Path(d["library"]).is_file()
    trace = hr.RaceResult.from_dict(json.loads((out / "race-trace.json").read_text()))
    assert {d["name"] for d in built} <= set(trace.names) and "glibc" in trace.names


def test_the_report_shows_the_measured_front_first_and_reads_well(tuned):
    out, _ = tuned
    shot = SCREENSHOTS / "tune-report.png"
    result = open_in_browser(out / "report.html", shot)
    assert result["errors"] == [] and result["refused"] == [] and result["dialogs"] == []
    assert result["order"][0] == "program" and "trace" in result["order"]
    assert {"program", "trace", "sizes", "lifetimes", "live", "front", "timeline", "convergence"} <= set(result["charts"])
    for name, chart in result["charts"].items():
        assert chart["points"] and all(n > 0 for n in chart["points"]), (name, chart)
        assert chart["drawn"] > 0, name
        assert_readable(chart, name)
    program = result["charts"]["program"]
    raced = json.loads((out / "race-program.json").read_text())["standings"]
    assert len(program["markers"]) == len([s for s in raced if any(s["samples"])])  # every allocator drawn
    recommendation = json.loads((out / "recommendation.json").read_text())
    assert result["verdict"] == recommendation["line"]
    # Text from the command line is text: the <img> in an argument is shown, not run.
    assert not result["injected"] and INJECTED in result["title"]
    assert shot.stat().st_size > 10000


def test_charts_read_well_whatever_the_spread(tmp_path):
    """Allocators decades apart: logarithmic axes with ticks written in full, the legend
    clear of every point."""
    points = [rp.MeasuredPoint(f"a{i}", "peer" if i % 2 else "design", seconds, rss, on_front=i < 3,
                               status="", runs=8)
              for i, (seconds, rss) in enumerate([(0.002, 3e6), (0.03, 1.5e6), (0.9, 1e6), (2.5, 4e8), (0.4, 9e8)])]
    points[1].recommended = True
    report = rp.Report(title="spread", program=rp.MeasuredSet("program", "spread", "", points))
    shot = SCREENSHOTS / "spread.png"
    result = open_in_browser(rp.write(report, tmp_path / "spread.html"), shot)
    chart = result["charts"]["program"]
    assert chart["xtype"] == "log" and chart["ytype"] == "log"
    assert_readable(chart, "program")
    assert len(chart["markers"]) == len(points)
    for ticks in (chart["xticks"], chart["yticks"]):
        values = [float(t.replace(",", "").replace("−", "-")) for t in ticks]
        assert len(values) >= 4 and values == sorted(values) and max(values) / min(values) >= 100, ticks
    narrow = rp.Report(title="narrow", program=rp.MeasuredSet("program", "narrow", "", points[:1] + [
        rp.MeasuredPoint("b", "peer", 0.0021, 3.1e6, on_front=True)]))
    chart = open_in_browser(rp.write(narrow, tmp_path / "narrow.html"))["charts"]["program"]
    assert chart["xtype"] == "linear" and chart["ytype"] == "linear"


def test_report_regenerates_the_page_with_another_preference(tuned, heapkit_cli):
    out, _ = tuned
    (out / "report.html").unlink()
    done = subprocess.run([*heapkit_cli, "report", str(out), "--prefer", "memory"], capture_output=True, text=True)
    assert done.returncode == 0 and "--prefer memory" in (out / "report.html").read_text()


def test_select_picks_names_or_merges_the_processes(programs, tmp_path):
    churn = programs["churn"]
    recorded = heapkit.record([str(programs["driver"]), f"{churn} 2000", f"{churn} 6000"], tmp_path / "p" / "trace.hkt")
    busiest = select_process(recorded.traces, tmp_path / "a.hkt")
    assert Path(busiest.executable).name == "churn"
    churns = sorted((t for t in recorded.traces if t.executable.endswith("churn")), key=lambda t: t.events)
    assert busiest.processes == [churns[-1]] and heapkit.stats(busiest.trace).events == churns[-1].events
    merged = select_process(recorded.traces, tmp_path / "m.hkt", "churn", merge=True)
    stats = heapkit.stats(merged.trace)
    assert merged.merged and stats.objects == sum(heapkit.stats(t.path).objects for t in churns)
    assert stats.max_live_bytes == max(heapkit.stats(t.path).max_live_bytes for t in churns)
    assert stats.end_live_objects == 0  # what a process left was released at its exit
    assert len(heapkit.stats(merged.trace).threads) == 2
    driver = select_process(recorded.traces, tmp_path / "d.hkt", Path(programs["driver"]).name)
    assert driver.processes[0].executable.endswith("driver")
    by_pid = select_process(recorded.traces, tmp_path / "s.hkt", str(churns[0].pid))
    assert by_pid.processes == [churns[0]]
    with pytest.raises(ValueError, match="no process of the command ran 'gcc'"):
        select_process(recorded.traces, tmp_path / "x.hkt", "gcc")


def test_a_program_without_allocations(tmp_path, heapkit_cli):
    done = subprocess.run([*heapkit_cli, "record", "-o", str(tmp_path / "true.hkt"), "--", "true"], capture_output=True,
                          text=True)
    assert done.returncode == 0 and "no allocations" in done.stderr
    assert heapkit.stats(tmp_path / "true.hkt").events == 0 and heapkit.read_header(tmp_path / "true.hkt").command == "true"
    done = subprocess.run([*heapkit_cli, "tune", "-o", str(tmp_path / "t"), "--", "true"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ht.EMPTY_PROGRAM
    assert ht.EMPTY_PROGRAM in (tmp_path / "t" / "report.html").read_text()


def test_an_interrupted_tune_continues_where_it_stopped(programs, tmp_path):
    out = tmp_path / "out"
    command = [str(programs["churn"]), "3000"]
    seen = []

    def interrupt_at_build(stage, message):
        seen.append((stage, message))
        if stage == "build":
            raise KeyboardInterrupt

    # sample: the search on the first 2,000 operations, its front confirmed on the whole trace
    settings = ht.TuneSettings(population=8, generations=1, designs=1, finalists=1, min_rounds=6, max_rounds=6,
                               peers=("glibc",), sample=2000)
    with pytest.raises(KeyboardInterrupt):
        ht.tune(command, out, settings, cache=tmp_path / "c.sqlite", progress=interrupt_at_build)
    state = json.loads((out / "state.json").read_text())
    assert set(state["done"]) == {"record", "select", "profile", "search"}
    assert heapkit.stats(out / "search" / "sample-2000.hkt").events == 2000
    seen.clear()
    result = ht.tune(command, out, settings, cache=tmp_path / "c.sqlite",
                     progress=lambda stage, message: seen.append((stage, message)))
    kept = {stage for stage, message in seen if message == "done before: kept"}
    assert kept == {"record", "select", "profile", "search"}
    assert result.report.exists() and all(d.footprint_matches for d in result.designs)
    # Another preference redoes nothing; more designs redo the build and what follows it.
    seen.clear()
    again = ht.tune(command, out, ht.TuneSettings(**{**settings.__dict__, "prefer": "memory"}),
                    cache=tmp_path / "c.sqlite", progress=lambda stage, message: seen.append((stage, message)))
    assert {stage for stage, message in seen if message == "done before: kept"} == set(ht.STAGES)
    assert again.recommendation.prefer == "memory"
    with pytest.raises(ht.TuneError, match="another command"):
        ht.tune([str(programs["churn"]), "4000"], out, settings)


def test_compare_puts_simulated_and_measured_side_by_side(programs, tmp_path, heapkit_cli):
    trace = tmp_path / "churn.hkt"
    heapkit.record([str(programs["churn"]), "5000"], trace)
    report = tmp_path / "compare.html"
    done = subprocess.run([*heapkit_cli, "compare", str(trace), "KNG", "BOX", str(heapkit.dmm.preset_path("S10")),
                           "glibc", "-n", "1", "--report", str(report)], capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="200"))
    assert done.returncode == 0, done.stderr
    from heapkit.compare import compare

    rows = compare(trace, ["LEA", "glibc"], runs=1)
    assert rows[0].simulated.peak_footprint == rows[0].heap_peak_bytes_held
    assert rows[1].simulated is None and rows[1].seconds > 0
    result = open_in_browser(report)
    assert result["errors"] == [] and {"front", "trace"} <= set(result["charts"])
    bad = subprocess.run([*heapkit_cli, "compare", str(trace), "nonsense"], capture_output=True, text=True)
    assert bad.returncode == 1 and "neither a spec file" in bad.stderr


def test_simulate_and_search_write_reports_too(churn_trace, tmp_path, heapkit_cli):
    simulated = tmp_path / "simulate.html"
    done = subprocess.run([*heapkit_cli, "simulate", str(churn_trace), "-p", "KNG", "-p", "LEA", "--no-map",
                           "--report", str(simulated)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = open_in_browser(simulated)
    assert result["errors"] == [] and {"sizes", "front", "timeline"} <= set(result["charts"])
    searched = tmp_path / "search.html"
    done = subprocess.run([*heapkit_cli, "search", str(churn_trace), "-o", str(tmp_path / "s"), "--population", "8",
                           "--generations", "2", "--cache", str(tmp_path / "c.sqlite"), "--no-glibc", "--report",
                           str(searched)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = open_in_browser(searched)
    assert result["errors"] == [] and {"front", "convergence"} <= set(result["charts"])


def test_a_tune_is_finished_only_when_every_stage_ran_with_these_settings(tmp_path):
    settings = ht.TuneSettings()
    assert not ht.finished(tmp_path, settings)
    state = {"command": ["true"], "done": {name: True for name in ht.STAGES},
             "settings": {name: settings.for_stage(name) for name in ht.STAGES}, "seconds": {}}
    (tmp_path / ht.STATE).write_text(json.dumps(state))
    assert ht.finished(tmp_path, settings)
    assert not ht.finished(tmp_path, ht.TuneSettings(generations=settings.generations + 1))
    del state["done"][ht.STAGES[-1]]
    (tmp_path / ht.STATE).write_text(json.dumps(state))
    assert not ht.finished(tmp_path, settings)
    (tmp_path / ht.STATE).write_text("{not json")
    assert not ht.finished(tmp_path, settings)
