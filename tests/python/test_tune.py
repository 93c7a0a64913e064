"""heapkit tune end to end on a small program, resuming after an interruption, and its
report opened in a real headless browser (Debian's Chromium, network blocked); heapkit
compare and heapkit report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import heapkit
from heapkit import tune as ht

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
EXPECTED_CHARTS = {"sizes", "lifetimes", "live", "front", "measured", "timeline", "convergence"}


def open_in_browser(report: Path) -> dict:
    """Loads the report with every non-file request refused; returns, per chart, the number
    of data points of each trace Plotly drew, the console's errors and the refused requests."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--no-first-run", "--disable-sync", "--disable-quic"])
        page = browser.new_page()
        errors, refused = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))

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
                               ".every(d => d.classList.contains('js-plotly-plot'))", timeout=30000)
        charts = page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll('.chart')).map(
            d => [d.dataset.chart, {points: (d.data || []).map(t => (t.x || []).length),
                                    drawn: d.querySelectorAll('.point, .scatterlayer path, .bars path').length}]))""")
        tables = page.evaluate("document.querySelectorAll('table').length")
        browser.close()
    return {"charts": charts, "errors": errors, "refused": refused, "tables": tables}


@pytest.fixture(scope="module")
def tuned(programs, tmp_path_factory):
    out = tmp_path_factory.mktemp("tune") / "out"
    cli = [str(Path(os.sys.executable).parent / "heapkit")]
    done = subprocess.run([*cli, "tune", "-o", str(out), "--population", "8", "--generations", "2", "-n", "1",
                           "--designs", "2", "--cache", str(out.parent / "cache.sqlite"), "--",
                           str(programs["churn"]), "8000"], capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, COLUMNS="200"))
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done


def test_tune_builds_verifies_and_reports(tuned):
    out, done = tuned
    assert "LD_PRELOAD=" in done.stdout and "report: " in done.stdout
    verification = json.loads((out / "verify.json").read_text())
    built = [m for m in verification["measured"] if m["kind"] == "built"]
    assert built
    for m in built:
        assert m["predicted_footprint"] == m["heap_peak_bytes_held"], m  # prediction = measurement, to the byte
        assert (out / "designs" / m["name"] / f"lib{m['name']}.so").exists()
        assert (out / "designs" / m["name"] / f"{m['name']}.h").exists()
    runs = {r["allocator"]: r for r in verification["program"]}
    assert {"glibc", "jemalloc", "mimalloc", "heapkit"} <= set(runs)
    assert all(r["same_output"] for r in verification["program"]), verification["program"]
    assert (out / "trace.hkt").exists() and (out / "search" / "front.json").exists()


def test_the_report_renders_offline_in_a_browser(tuned):
    out, _ = tuned
    result = open_in_browser(out / "report.html")
    assert result["errors"] == [] and result["refused"] == []
    assert set(result["charts"]) == EXPECTED_CHARTS
    for name, chart in result["charts"].items():
        assert chart["points"] and all(n > 0 for n in chart["points"]), (name, chart)
        assert chart["drawn"] > 0, name
    assert result["tables"] >= 3  # measured, the program's runs, the DMM maps


def test_report_regenerates_the_page(tuned, heapkit_cli):
    out, _ = tuned
    (out / "report.html").unlink()
    done = subprocess.run([*heapkit_cli, "report", str(out)], capture_output=True, text=True)
    assert done.returncode == 0 and (out / "report.html").exists()


def test_an_interrupted_tune_continues_where_it_stopped(programs, tmp_path):
    out = tmp_path / "out"
    command = [str(programs["churn"]), "3000"]
    seen = []

    def interrupt_at_build(stage, message):
        seen.append((stage, message))
        if stage == "build":
            raise KeyboardInterrupt

    settings = dict(population=8, generations=1, runs=1, designs=1, cache=tmp_path / "c.sqlite",
                    peers=("glibc",))
    with pytest.raises(KeyboardInterrupt):
        ht.tune(command, out, progress=interrupt_at_build, **settings)
    state = json.loads((out / "state.json").read_text())
    assert set(state["done"]) == {"record", "profile", "presets", "search"}
    seen.clear()
    result = ht.tune(command, out, progress=lambda stage, message: seen.append((stage, message)), **settings)
    kept = {stage for stage, message in seen if message == "done before: kept"}
    assert kept == {"record", "profile", "presets", "search"}
    assert result.report.exists() and result.best["measured"]["predicted_footprint"] == \
        result.best["measured"]["heap_peak_bytes_held"]
    with pytest.raises(ht.TuneError, match="another command"):
        ht.tune([str(programs["churn"]), "4000"], out, **settings)


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
    assert rows[0]["simulated"]["peak_footprint"] == rows[0]["heap_peak_bytes_held"]
    assert rows[1]["simulated"] is None and rows[1]["seconds"] > 0
    result = open_in_browser(report)
    assert result["errors"] == [] and {"front", "measured"} <= set(result["charts"])
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
