"""The time model against real replays (`make bench-timemodel`). Writes the "## Predicting
replay time" section of docs/benchmarks.md and, with --write-default, the shipped time
model (python/heapkit/time_model.json) fitted on every measurement.

Traces: the bench workloads (boxedsim, gcbench, espresso, cfrac from heapkit-workload)
and real programs recorded with heapkit record (sqlite3, jq, CPython with
PYTHONMALLOC=malloc, perl, git log -p; inputs as bench_tune.py makes them), each cut to
its first --max-ops operations. Designs per trace: the presets and --designs random valid
designs from the trace's grammar. Each design is simulated (predicted_ns's features) and
replayed for real (heapkit-replay TRACE --spec FILE, one byte written per page of each
object, the replaying thread's CPU time), --runs rounds that replay every design in turn,
medians. Each trace's predictions come from the model fitted on the other traces' replays
(leave one trace out); Spearman's rank correlation per trace, against `work` alone, and
what each part of the model adds (the same, for the model without it). --rows keeps the
measurements; --resimulate recomputes their features, --remeasure replays a trace's
stored designs again (more rounds for the noisy traces).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_tune import JQ_FILTER, _git, _jq, _perl, _python, _sqlite
from doc_section import replace_section

import heapkit
from heapkit import timemodel as tm
from heapkit._paths import program

SECTION = "Predicting replay time"
WORKLOADS = {"boxedsim": 10, "gcbench": 1, "espresso": 10, "cfrac": 30}


def record_traces(workload: Path, tmp: Path, max_ops: int, only: list[str] | None) -> dict[str, Path]:
    programs = {
        "sqlite3": (_sqlite, lambda d: ["sqlite3", ":memory:", f".read {d / 'work.sql'}"], {}),
        "jq": (_jq, lambda d: ["jq", "-c", JQ_FILTER, str(d / "data.json")], {}),
        "python": (_python, lambda d: ["/usr/bin/python3", str(d / "work.py")], {"PYTHONMALLOC": "malloc"}),
        "perl": (_perl, lambda d: ["perl", str(d / "work.pl")], {}),
        "git": (_git, lambda d: ["git", "-C", str(d / "repo"), "log", "-p", "--no-color"], {}),
    }
    traces = {}
    for name, scale in WORKLOADS.items():
        if only and name not in only:
            continue
        full = tmp / f"{name}-full.hkt"
        heapkit.record([str(workload), name, str(scale)], full, stdout=subprocess.DEVNULL)
        traces[name] = full
    for name, (setup, command, env) in programs.items():
        if only and name not in only:
            continue
        d = tmp / name
        d.mkdir()
        setup(d)
        full = tmp / f"{name}-full.hkt"
        import os

        heapkit.record(command(d), full, env={**os.environ, **env}, stdout=subprocess.DEVNULL)
        traces[name] = full
    cut = {}
    for name, full in traces.items():
        events = heapkit.stats(full).events
        if events > max_ops:
            path = tmp / f"{name}.hkt"
            heapkit.trace_prefix(full, path, max_ops)
            cut[name] = path
        else:
            cut[name] = full
    return cut


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", type=Path, help="build/bench/heapkit-workload")
    parser.add_argument("doc", type=Path, help="docs/benchmarks.md")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--designs", type=int, default=44, help="random designs per trace, besides the presets")
    parser.add_argument("--max-ops", type=int, default=1_500_000)
    parser.add_argument("--traces", default=None, help="comma-separated subset (default: all)")
    parser.add_argument("--write-default", action="store_true", help="write the fitted model as the shipped default")
    parser.add_argument("--rows", type=Path, default=None, help="reuse (if present) or save the measurements here")
    parser.add_argument("--resimulate", action="store_true",
                        help="with --rows: keep the measured times, simulate the designs again (the features)")
    parser.add_argument("--remeasure", default=None,
                        help="with --rows: comma-separated traces whose stored designs are replayed again, --runs "
                             "rounds (the noisiest traces, where the ranks are bounded by the noise)")
    parser.add_argument("--trace-dir", type=Path, default=None,
                        help="where --resimulate finds NAME.hkt (or NAME-full.hkt) for rows without trace_path")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="heapkit-bench-timemodel-"))
    rows: list[dict] = []
    args.reused = args.rows is not None and args.rows.exists()
    if args.reused:
        rows = json.loads(args.rows.read_text())
        if args.remeasure:
            remeasure(rows, args.remeasure.split(","), args.runs, tmp)
            args.rows.write_text(json.dumps(rows, indent=1))
        if args.resimulate:
            resimulate(rows, args.trace_dir)
            args.rows.write_text(json.dumps(rows, indent=1))
    else:
        traces = record_traces(args.workload, tmp, args.max_ops, args.traces.split(",") if args.traces else None)
        presets = [heapkit.preset(p) for p in heapkit.PRESETS]
        for name, trace in traces.items():
            designs = presets + tm.random_designs(trace, args.designs, seed=2026)
            files = []
            for i, design in enumerate(designs):
                path = tmp / f"{name}-design-{i}.json"
                path.write_text(design.to_json())
                files.append(path)
            simulated = heapkit.simulate(trace, designs, max_steps_per_event=400)
            kept = [(d, f, r) for d, f, r in zip(designs, files, simulated) if not r.abandoned and r.failed == 0]
            print(f"{name}: {heapkit.stats(trace).events:,} operations, {len(kept)} designs", file=sys.stderr, flush=True)
            measured = tm.measure(trace, [f for _, f, _ in kept], args.runs, program("heapkit-replay"))
            for (design, _, r), m in zip(kept, measured):
                rows.append({"trace": name, "design": design.name, **tm.features_of(r), "ns": m["ns"],
                             "spread": m["spread"], "samples": m["samples"], "runs": args.runs,
                             "peak_footprint": r.peak_footprint,
                             "spec": json.loads(design.to_json()), "trace_path": str(trace)})
        if args.rows is not None:
            args.rows.write_text(json.dumps(rows, indent=1))

    predicted = tm.leave_one_group_out(rows)
    names = list(dict.fromkeys(r["trace"] for r in rows))
    per_trace = {}
    for name in names:
        mine = [(p, r) for p, r in zip(predicted, rows) if r["trace"] == name]
        measured = [r["ns"] for _, r in mine]
        per_trace[name] = {
            "designs": len(mine),
            "events": int(mine[0][1]["events"]),
            "model": tm.spearman([p for p, _ in mine], measured),
            "work": tm.spearman([r["work"] for _, r in mine], measured),
            "min_ms": min(measured) / 1e6, "max_ms": max(measured) / 1e6,
            "noise": statistics.median(r["spread"] for _, r in mine),
            "runs": max(int(r.get("runs", len(r.get("samples", [])) or args.runs)) for _, r in mine),
            "error": statistics.median(abs(p - r["ns"]) / r["ns"] for p, r in mine),
        }
    # What each part of the model adds, each variant also left one trace out.
    counts = [f for f in tm.COUNTS if f not in ("reads", "writes")]
    variants = {
        "the memory model's counts, one fit over all replays": tm.leave_one_group_out(rows, features=counts,
                                                                                     offsets=False),
        "… with an offset per trace": tm.leave_one_group_out(rows, features=counts),
        "… reads and writes apart": tm.leave_one_group_out(rows, features=[f for f in tm.COUNTS if f != "accesses"]),
        "… and each mechanism's requests": tm.leave_one_group_out(rows, features=tm.FITTED + ("tlb_misses",)),
        "… less the TLB's misses (predicted_ns)": predicted,
    }
    for name in names:
        idx = [i for i, r in enumerate(rows) if r["trace"] == name]
        per_trace[name]["variants"] = [tm.spearman([v[i] for i in idx], [rows[i]["ns"] for i in idx])
                                       for v in variants.values()]
    model = tm.fit(rows, machine=_machine(), note=f"fitted by python/benchmarks/bench_timemodel.py on {len(rows)} replays "
                                                  f"of {len(names)} traces")
    if args.write_default:
        model.save(_source_default())
    section = render(args, rows, per_trace, model, list(variants))
    replace_section(args.doc, SECTION, section)
    print(section)


def remeasure(rows: list[dict], traces: list[str], runs: int, tmp: Path) -> None:
    """The stored designs of these traces replayed again, ``runs`` interleaved rounds: their
    measured times replaced (the rows keep how many rounds each median is of)."""
    for name in traces:
        mine = [r for r in rows if r["trace"] == name]
        if not mine:
            raise SystemExit(f"--remeasure: no stored replays of trace '{name}'")
        files = []
        for i, r in enumerate(mine):
            path = tmp / f"{name}-remeasure-{i}.json"
            path.write_text(json.dumps(r["spec"]))
            files.append(path)
        print(f"{name}: {len(mine)} designs again, {runs} rounds", file=sys.stderr, flush=True)
        measured = tm.measure(mine[0]["trace_path"], files, runs, program("heapkit-replay"))
        for r, m in zip(mine, measured):
            r.update(ns=m["ns"], spread=m["spread"], samples=m["samples"], runs=runs)


def resimulate(rows: list[dict], trace_dir: Path | None) -> None:
    """The features of every measured design again, from its stored spec (after the
    simulator or the memory model changed; the measurements stay)."""
    by_trace: dict[str, list[dict]] = {}
    for r in rows:
        path = r.get("trace_path")
        if path is None:
            cut, full = trace_dir / f"{r['trace']}.hkt", trace_dir / f"{r['trace']}-full.hkt"
            path = str(cut if cut.exists() else full)
            r["trace_path"] = path
        by_trace.setdefault(path, []).append(r)
    for path, mine in by_trace.items():
        results = heapkit.simulate(path, [heapkit.parse_spec(json.dumps(r["spec"])) for r in mine],
                                   max_steps_per_event=400)
        for r, result in zip(mine, results):
            r.update(tm.features_of(result), peak_footprint=result.peak_footprint)


def _source_default() -> Path:
    return Path(__file__).resolve().parents[1] / "heapkit" / "time_model.json"


def _machine() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def render(args, rows, per_trace, model, variants) -> str:
    def met(ok):
        return "**met**" if ok else "**missed**"

    coefficients = ", ".join(f"{c:.3g} ns × {f}" for f, c in model.coefficients.items() if c > 0)
    zero = [f for f, c in model.coefficients.items() if c == 0]
    lines = [
        f"## {SECTION}",
        "",
        f"Command: `make bench-timemodel` (`{Path(sys.executable).name} python/benchmarks/bench_timemodel.py "
        f"build/bench/heapkit-workload docs/benchmarks.md --runs {args.runs} --designs {args.designs} --max-ops "
        f"{args.max_ops} --write-default`), on the shared 2-core machine. Traces: the bench workloads (boxedsim 10, "
        "gcbench 1, espresso 10, cfrac 30) and real programs recorded with `heapkit record` (sqlite3, jq, CPython "
        "with PYTHONMALLOC=malloc, perl, git log -p; the inputs of `make bench-tune`), each cut to its first "
        f"{args.max_ops:,} operations. Designs: the presets and {args.designs} random valid designs from each "
        "trace's grammar (`heapkit.timemodel.random_designs`), less those the simulator abandons (over 400 steps per "
        "operation) or that fail a request. Measured: `heapkit-replay TRACE --spec FILE` (the design running for "
        "real, one byte written per page of each object), the replaying thread's CPU time, the median of "
        "rounds (the table's column) that each replay every design of the trace once, in a shuffled order. Predicted: "
        "`predicted_ns`, the time model over the simulator's counts (docs/simulator.md, \"The time model\"), "
        "each trace's predictions from the "
        "model fitted on the other traces (leave one trace out)." + (
            " These figures are the stored replays and features of an earlier run (`--rows ROWS.json`), the model "
            "fitted again at this commit." if args.reused and not args.resimulate and not args.remeasure
            else "") + (
            " These figures are the stored replays of an earlier run, every design simulated again at this commit "
            "(the measured times kept, the features new: `--rows ROWS.json --resimulate`, ROWS.json the "
            "measurements a run saved with `--rows`)." if args.resimulate else "") + (
            f" The designs of {', '.join(args.remeasure.split(','))} were replayed again, {args.runs} rounds "
            "(`--rows ROWS.json --remeasure TRACES --runs N`: the noisiest traces, whose ranks the noise bounds)."
            if args.remeasure else ""),
        "",
        "| trace | operations | designs | rounds | measured (ms) | noise | Spearman, predicted_ns | "
        "Spearman, work alone | median error of predicted_ns |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in per_trace.items():
        lines.append(f"| {name} | {t['events']:,} | {t['designs']} | {t['runs']} | {t['min_ms']:.1f}–{t['max_ms']:.1f} | "
                     f"{t['noise']:.0%} | {t['model']:.3f} | {t['work']:.3f} | {t['error']:.0%} |")
    worst = min(per_trace.values(), key=lambda t: t["model"])
    good = sum(1 for t in per_trace.values() if t["model"] >= 0.9)
    lines += [
        "",
        "Noise: the median over the trace's designs of (slowest - fastest) / median of its runs; measured: the "
        "fastest and the slowest design's medians. Where a trace's designs differ by little more than the noise, "
        "its rank correlation is bounded by the noise, not by the model.",
        "",
        f"- Spearman ≥ 0.9 between predicted and measured time on each of ≥ 6 traces over ≥ 40 designs each: "
        f"{met(good == len(per_trace) and len(per_trace) >= 6 and min(t['designs'] for t in per_trace.values()) >= 40)} "
        f"({good} of {len(per_trace)} traces at 0.9 or more; the lowest {worst['model']:.3f}).",
        "",
        "What each part of the model adds (Spearman per trace, each trace predicted by the variant fitted on the "
        "others; traces at 0.9 or more):",
        "",
        "| features and fit | " + " | ".join(per_trace) + " | at 0.9 |",
        "|---|" + "---:|" * (len(per_trace) + 1),
    ]
    for k, variant in enumerate(variants):
        values = [t["variants"][k] for t in per_trace.values()]
        lines.append(f"| {variant} | " + " | ".join(f"{v:.3f}" for v in values) +
                     f" | {sum(v >= 0.9 for v in values)} of {len(values)} |")
    lines += [
        "",
        "The TLB's misses are counted and reported but not fitted (python/heapkit/timemodel.py, `UNFITTED`): the "
        "modelled TLB (4 KiB pages, no huge pages, no page-walk caches) gives perl's page-segregated designs about "
        "ten times the misses of its region designs, which replay slower, and the weight learnt from the other "
        "traces ranks perl's designs backwards (the last two rows).",
        "",
        f"The model fitted on all {len(rows)} replays (shipped as python/heapkit/time_model.json): predicted_ns = "
        f"{coefficients}" + (f" (no weight on {', '.join(zero)})" if zero else "") + ".",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
