"""The design search's benchmarks (`make bench-search`). Writes the "## Design search and
heapkit tune" section of docs/benchmarks.md:

- search quality on boxed-sim-, GCBench- and espresso-like traces and on a real program not
  written here (CPython parsing a package of its standard library): the best design whose
  measured replay time is within 2% of Kingsley's, its footprint saving against Kingsley
  (the paper's 58% / 75% / 11%), and its measured footprint against glibc's and Lea's;
- convergence (hypervolume per generation) and the GE front against as many random valid
  designs as the GE evaluated;
- speed: population 60 x 100 generations on a ~1 M-event trace; evaluations/s, cache hits;
- the emitted (compile-time) design against the run-time-configured one;
- Ray: evaluations/s with 1 and 2 local workers.

heapkit tune itself on real programs is `make bench-tune` (python/benchmarks/bench_tune.py).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from doc_section import replace_section

import heapkit
from heapkit import build as hb
from heapkit import search as hs
from heapkit._paths import program
from heapkit.grammar import design_from_text, generate_for_trace

# CPython parsing a package of its standard library, every allocation through malloc
# (PYTHONMALLOC=malloc: otherwise pymalloc serves the small objects from its own arenas).
REAL_PROGRAM = ["env", "PYTHONMALLOC=malloc", sys.executable, "-c",
                "import ast, pathlib, email; [ast.parse(p.read_text()) for p in "
                "sorted(pathlib.Path(email.__file__).parent.rglob('*.py'))]"]


def replay_json(cmd: list[str], env: dict | None = None) -> dict:
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def median_replay(trace: Path, runs: int, extra: list[str] = (), env: dict | None = None, exe: str | None = None) -> dict:
    results = [replay_json([exe or str(program("heapkit-replay")), str(trace), *extra], env) for _ in range(runs)]
    return {key: statistics.median(r[key] for r in results) for key in ("seconds", "footprint_bytes", "peak_rss_bytes")} | \
           {"heap_peak_bytes_held": results[0].get("heap_peak_bytes_held")}


def quality(trace: Path, name: str, tmp: Path, args) -> dict:
    started = time.monotonic()
    result = hs.search(trace, tmp / f"search-{name}", objectives=("work", "footprint"), population=args.population,
                       generations=args.generations, seed=args.seed, cache=tmp / "cache.sqlite")
    seconds = time.monotonic() - started
    kng_build = hb.build(heapkit.preset("KNG"), tmp / f"kng-{name}" / "libkng.so")
    kng = median_replay(trace, args.runs, ["--no-touch"], exe=str(kng_build.verifier))
    # The front's designs that do about Kingsley's work (time follows work: see "DMM
    # simulator"), smallest footprint first, built and timed like Kingsley (compiled, no
    # data written); if none, the smallest designs.
    kng_work = result.presets["KNG"].objective("work")
    near = [d for d in result.front if d.objective("work") <= 1.1 * kng_work]
    candidates = sorted(near or result.front, key=lambda d: d.objective("footprint"))[: args.candidates]
    measured = []
    for i, d in enumerate(candidates):
        built = hb.build(d.spec, tmp / f"{name}-{i}" / f"libc{i}.so")
        timing = median_replay(trace, args.runs, ["--no-touch"], exe=str(built.verifier))
        measured.append((d, built, timing))
    fast = [(d, b, t) for d, b, t in measured if t["seconds"] <= 1.02 * kng["seconds"]]
    best = min(fast, key=lambda x: x[0].objective("footprint")) if fast else None
    smallest = measured[0] if measured else None
    row = {"trace": name, "events": result.presets["KNG"].metrics["events"], "search_seconds": seconds,
           "evaluations": result.evaluations, "cache_hits": result.cache_hits,
           "kng_footprint": result.presets["KNG"].objective("footprint"), "kng_seconds": kng["seconds"],
           "history": result.history, "front": result.front, "presets": result.presets}
    pick = best or smallest
    if pick is not None:
        d, built, timing = pick
        # The real footprint of the design, glibc and Lea: resident growth in a replay with
        # every object touched, the allocator preloaded (built designs through their library).
        design_rss = median_replay(trace, args.runs, env=_preload(built.shared_library))
        glibc = median_replay(trace, args.runs)
        lea = median_replay(trace, args.runs, env=_preload(heapkit.resolve_allocator("lea")))
        row.update(pick=d, within_2_percent=best is not None, pick_seconds=timing["seconds"],
                   pick_footprint=d.objective("footprint"), pick_rss=design_rss["footprint_bytes"],
                   glibc_rss=glibc["footprint_bytes"], lea_rss=lea["footprint_bytes"],
                   compiled_seconds=timing["seconds"])
        spec_file = tmp / f"{name}-pick.json"
        spec_file.write_text(d.spec.to_json())
        row["configured_seconds"] = median_replay(trace, args.runs, ["--no-touch", "--spec", str(spec_file)])["seconds"]
    return row


def _preload(library) -> dict:
    import os

    return dict(os.environ, LD_PRELOAD=str(library))


def random_front(trace: Path, count: int, tmp: Path, seed: int, presets: Sequence[hs.Design] = (),
                 cache: Path | None = None, objectives: Sequence[str] = ("work", "footprint"),
                 population: int = 0) -> list[hs.Design]:
    """The front of random sampling (:func:`heapkit.search.random_sample`) and of ``presets``."""
    return hs.random_sample(trace, count, seed=seed, presets=presets, cache=cache or tmp / "cache.sqlite",
                            objectives=objectives, population=population)


def compare_with_random(workload: Path, args) -> list[dict]:
    """The search's front against random sampling's at equal evaluations (issue 20,
    deliverable 7): each trace and seed searched with a fresh cache, then as many random
    distinct designs as the search simulated beyond the presets; both fronts include the
    presets. One row per trace and seed."""
    tmp = Path(tempfile.mkdtemp(prefix="heapkit-ge-vs-random-"))
    objectives = tuple(args.compare_objectives)
    rows = []
    for name, scale in args.compare_traces:
        recorded = tmp / f"{name}-{scale}-whole.hkt"
        heapkit.record(REAL_PROGRAM if name == "python-ast" else [str(workload), name, str(scale)], recorded)
        trace = recorded
        if args.compare_ops and heapkit.stats(recorded).events > args.compare_ops:
            trace = tmp / f"{name}-{scale}.hkt"
            heapkit.trace_prefix(recorded, trace, args.compare_ops)
        for seed in range(1, args.seeds + 1):
            started = time.monotonic()
            result = hs.search(trace, tmp / f"ge-{name}-{seed}", objectives=objectives,
                               population=args.compare_population, generations=args.compare_generations, seed=seed,
                               cache=tmp / f"ge-{name}-{seed}.sqlite",
                               diverse=not args.no_diverse, mutation=args.mutation, operators=args.operators,
                               threads=args.threads, screen=args.screen, refine=args.refine,
                               adaptive=not args.fixed_shares)
            ge_seconds = time.monotonic() - started
            presets = list(result.presets.values())
            # The designs the search simulated beyond the presets: the random sample's size.
            count = max(1, len({d.spec.key for d in result.evaluated} - {p.spec.key for p in presets}))
            started = time.monotonic()
            sampled = random_front(trace, count, tmp, seed, presets, cache=tmp / f"random-{name}-{seed}.sqlite",
                                   objectives=objectives, population=args.compare_population)
            random_seconds = time.monotonic() - started
            kng = result.presets["KNG"]
            row = {"trace": name, "scale": scale, "events": kng.metrics["events"], "seed": seed,
                   "individuals": result.individuals, "distinct": result.distinct, "designs": count,
                   "ge": hs.hypervolume(result.front, objectives, kng),
                   "random": hs.hypervolume(sampled, objectives, kng),
                   "presets": hs.hypervolume(hs.non_dominated(presets, objectives), objectives, kng),
                   "ge_seconds": ge_seconds, "random_seconds": random_seconds}
            print(json.dumps(row), flush=True)
            row["fronts"] = list(result.front) + list(sampled)
            rows.append(row)
        # The best front known: every run's fronts, search and sampling, together.
        mine = [r for r in rows if r["trace"] == name]
        union = hs.hypervolume(hs.non_dominated([d for r in mine for d in r.pop("fronts")], objectives), objectives,
                               kng)
        for r in mine:
            r["union"] = union
    shutil.rmtree(tmp, ignore_errors=True)
    return rows


#: Hypervolumes closer than this are the same front (they differ in rounding alone).
TIE = 5e-5


def _difference(d: float) -> str:
    return "0.0000" if abs(d) < TIE else f"{d:+.4f}".replace("-", "−")


def comparison_section(rows: list[dict], args) -> str:
    """The "Convergence and random designs" subsection: per trace, the median over seeds of
    each hypervolume and of the difference, how many seeds the search won, and the share
    of its genomes that were distinct designs; then every run."""
    command = (f"python python/benchmarks/bench_search.py build/bench/heapkit-workload docs/benchmarks.md "
               f"--compare-only --write --compare-traces {','.join(f'{n}:{s}' for n, s in args.compare_traces)} "
               f"--compare-ops {args.compare_ops} --seeds {args.seeds}"
               + (f" --compare-population {args.compare_population} --compare-generations {args.compare_generations}"
                  if (args.compare_population, args.compare_generations) != (24, 12) else "")
               + (f" --operators {args.operators}" if args.operators != "subtree" else "")
               + (f" --compare-objectives {','.join(args.compare_objectives)}"
                  if tuple(args.compare_objectives) != hs.DEFAULT_OBJECTIVES else "")
               + (f" --screen {args.screen}" if args.screen != hs.SCREEN else "")
               + (f" --refine {args.refine}" if args.refine != hs.REFINE else "")
               + (" --no-diverse" if args.no_diverse else "")
               + (" --fixed-shares" if args.fixed_shares else ""))
    traces = list(dict.fromkeys(r["trace"] for r in rows))
    objectives = " and ".join(args.compare_objectives)
    lines = ["### Convergence and random designs", "",
             f"Command: `{command}` (also run by `make bench-search`). The search (population "
             f"{args.compare_population}, {args.compare_generations} generations"
             + (": tune's budget" if (args.compare_population, args.compare_generations) == (24, 12) else "")
             + f"; objectives {objectives}"
             + (" (tune's)" if tuple(args.compare_objectives) == hs.DEFAULT_OBJECTIVES else "")
             + f"; operators `{args.operators}`; "
             + (f"{args.screen} candidates per offspring, the surrogate picking one" if args.screen > 1 else "no screening")
             + (f"; {args.refine:.0%} of the offspring from the Pareto local search around the front" if args.refine
                else "; no local search")
             + ("" if args.fixed_shares else ", then each generation's shares of breeding, random immigrants and the "
                "local search adapted to their success")
             + ") against random sampling at equal evaluations: as many distinct valid designs as the search simulated "
             "beyond the presets, first the designs the search's first population starts from (the mixed and fitted "
             "page-segregated seeds), then random genomes through the same grammar; the presets in both fronts; "
             f"hypervolume of the front with {objectives} over Kingsley's, reference point 2 in each; "
             f"seeds 1 to {args.seeds}, each search and each sample with a fresh cache. Traces: the workloads at the "
             "scale given, CPython parsing its `email` package (python-ast)"
             + (f", each cut to its first {args.compare_ops:,} operations where longer" if args.compare_ops else "") + ".",
             "", "| trace | events | designs simulated (median) | distinct / genomes | presets' HV | search's HV "
             "(median) | random's HV (median) | search − random (median) | search wins | best front of all runs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in traces:
        mine = [r for r in rows if r["trace"] == name]
        diffs = [r["ge"] - r["random"] for r in mine]
        distinct = sum(r["distinct"] for r in mine) / sum(r["individuals"] for r in mine)
        lines.append(f"| {name} | {mine[0]['events']:,} | {statistics.median(r['designs'] for r in mine):.0f} | "
                     f"{distinct:.0%} | {mine[0]['presets']:.4f} | {statistics.median(r['ge'] for r in mine):.4f} | "
                     f"{statistics.median(r['random'] for r in mine):.4f} | {_difference(statistics.median(diffs))} | "
                     f"{sum(d >= TIE for d in diffs)} of {len(diffs)}"
                     + (f" ({sum(abs(d) < TIE for d in diffs)} tied)" if any(abs(d) < TIE for d in diffs) else "")
                     + f" | {mine[0]['union']:.4f} |")
    lines += ["", "Every run:", "", "| trace | seed | genomes | distinct | designs simulated | search's HV | random's HV | "
              "search − random | search, sampling (s) |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['trace']} | {r['seed']} | {r['individuals']} | {r['distinct']} | {r['designs']} | "
                     f"{r['ge']:.4f} | {r['random']:.4f} | {_difference(r['ge'] - r['random'])} | "
                     f"{r['ge_seconds']:.0f}, {r['random_seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def ray_speed(trace: Path, tmp: Path, cpus: int, designs: int) -> float:
    """Evaluations/s of ``designs`` random designs on a local Ray head with ``cpus`` workers."""
    import ray

    from heapkit.cluster import ray_runner

    ray_cli = str(Path(sys.executable).parent / "ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run([ray_cli, "start", "--head", f"--port={port}", f"--num-cpus={cpus}", "--disable-usage-stats",
                    "--include-dashboard=false", "--node-ip-address=127.0.0.1"], check=True, capture_output=True)
    try:
        runner = ray_runner(f"127.0.0.1:{port}", trace, dict(heapkit.simulator.DEFAULT_ENERGY), batch=1)
        grammar = generate_for_trace(trace)
        rng = random.Random(cpus)
        specs = []
        while len(specs) < designs:
            text = grammar.derive([rng.randrange(256) for _ in range(32)])
            if text is not None:
                specs.append(design_from_text(text))
        runner(specs[:2])  # warm the workers (imports, the trace's local copy)
        started = time.monotonic()
        runner(specs)
        return designs / (time.monotonic() - started)
    finally:
        ray.shutdown()
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", type=Path)
    parser.add_argument("doc", type=Path)
    parser.add_argument("--population", type=int, default=60)
    parser.add_argument("--generations", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=6, help="front designs built and timed per trace")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="tiny budgets everywhere: a smoke test, not figures")
    parser.add_argument("--compare-only", action="store_true",
                        help="only the search against random sampling at equal evaluations (prints the subsection; "
                             "--write puts it in the doc)")
    parser.add_argument("--write", action="store_true",
                        help="with --compare-only: replace the doc's 'Convergence and random designs' subsection")
    parser.add_argument("--compare-traces", default="boxedsim:2,espresso:2,gcbench:1,python-ast:1",
                        type=lambda text: [(n, int(s)) for n, s in (p.split(":") for p in text.split(","))],
                        help="NAME:SCALE,... workloads to compare on (python-ast: the real program, any scale)")
    parser.add_argument("--compare-ops", type=int, default=200_000,
                        help="compare on each trace's first N operations (0: the whole trace)")
    parser.add_argument("--seeds", type=int, default=3, help="searches per trace in the comparison")
    parser.add_argument("--compare-population", type=int, default=24, help="the comparison's population (tune's)")
    parser.add_argument("--compare-generations", type=int, default=12, help="the comparison's generations (tune's)")
    parser.add_argument("--no-diverse", action="store_true", help="compare without the new-design rule")
    parser.add_argument("--operators", choices=("subtree", "codon"), default="subtree",
                        help="the compared searches' variation operators")
    parser.add_argument("--compare-objectives", default=",".join(hs.DEFAULT_OBJECTIVES),
                        type=lambda text: text.split(","),
                        help="the comparison's objectives (default tune's: " + ",".join(hs.DEFAULT_OBJECTIVES) + ")")
    parser.add_argument("--screen", type=int, default=hs.SCREEN,
                        help="candidates per offspring the surrogate picks from (1: no screening)")
    parser.add_argument("--refine", type=float, default=hs.REFINE,
                        help="share of the first generation's offspring from the Pareto local search around the front")
    parser.add_argument("--fixed-shares", action="store_true",
                        help="keep the immigrants' and the local search's shares fixed (no adaptive shares)")
    parser.add_argument("--mutation", type=float, default=0.02, help="the per-codon mutation rate (codon operators)")
    parser.add_argument("-j", "--threads", type=int, default=2, help="simulations at once")
    args = parser.parse_args()
    if args.compare_only:
        section = comparison_section(compare_with_random(args.workload, args), args)
        print(section)
        if args.write:
            replace_section(args.doc, "Convergence and random designs", section, level=3)
        return
    big = {"population": 60, "generations": 100, "tune_population": 40, "tune_generations": 20, "ray_designs": 40}
    if args.quick:
        big = {"population": 8, "generations": 2, "tune_population": 8, "tune_generations": 2, "ray_designs": 8}
    tmp = Path(tempfile.mkdtemp(prefix="heapkit-bench-search-"))

    traces = {}
    for name, scale in (("boxedsim", 10), ("gcbench", 1), ("espresso", 10)):
        traces[name] = tmp / f"{name}.hkt"
        heapkit.record([str(args.workload), name, str(scale)], traces[name])
    traces["python-ast"] = tmp / "python-ast.hkt"
    heapkit.record(REAL_PROGRAM, traces["python-ast"])

    rows = [quality(path, name, tmp, args) for name, path in traces.items()]
    # The search against random sampling at equal evaluations, at tune's budget, over seeds.
    comparison = comparison_section(compare_with_random(args.workload, args), args)

    # Speed: the budget on a ~1 M-event trace, with a fresh cache.
    speed_trace = tmp / "espresso-12.hkt"
    heapkit.record([str(args.workload), "espresso", "12"], speed_trace)
    started = time.monotonic()
    full = hs.search(speed_trace, tmp / "speed", objectives=("work", "footprint", "energy"), population=big["population"],
                     generations=big["generations"], seed=args.seed, cache=tmp / "speed-cache.sqlite")
    speed = {"seconds": time.monotonic() - started, "evaluations": full.evaluations, "cache_hits": full.cache_hits,
             "events": heapkit.stats(speed_trace).events}

    ray_rates = {}
    try:
        for cpus in (1, 2):
            ray_rates[cpus] = ray_speed(traces["espresso"], tmp, cpus, big["ray_designs"])
    except Exception as error:  # noqa: BLE001 - the section says why it has no figures
        ray_rates["error"] = str(error)

    section = render(args, big, rows, comparison, speed, ray_rates)
    if args.quick:
        print(section)
        return
    replace_section(args.doc, "Design search and heapkit tune", section)
    print(section)
    shutil.rmtree(tmp, ignore_errors=True)


def render(args, big, rows, comparison, speed, ray_rates) -> str:
    def met(ok):
        return "**met**" if ok else "**missed**"

    paper = {"boxedsim": 0.58, "gcbench": 0.75, "espresso": 0.11}
    lines = [
        "## Design search and heapkit tune",
        "",
        f"Command: `make bench-search` (`{Path(sys.executable).name} python/benchmarks/bench_search.py "
        f"build/bench/heapkit-workload docs/benchmarks.md`), on the shared 2-core machine. Searches: work and "
        f"footprint, population {args.population}, {args.generations} generations, seed {args.seed}. Times are "
        f"medians of {args.runs} replays of the compiled design (`heapkit build`'s verifier, no data written), "
        "Kingsley's compiled the same way; footprints for glibc, Lea and the chosen design are the resident set's "
        "growth in a replay with the allocator preloaded and every page of every object touched. "
        "python-ast is CPython parsing every module of its `email` package (`ast.parse`) with "
        "`PYTHONMALLOC=malloc`, so every allocation goes through malloc. Candidates for the best design are the "
        "front's designs doing at most 1.1x Kingsley's simulated work, smallest footprint first.",
        "",
        "### Search quality",
        "",
        "| trace | events | best design within 2% of Kingsley's time | its footprint / KNG (simulated) | saving | paper | "
        "time / KNG | resident growth: design / glibc / Lea |",
        "|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "pick" not in r:
            lines.append(f"| {r['trace']} | {r['events']:,} | (none built) | | | | | |")
            continue
        ratio = r["pick_footprint"] / r["kng_footprint"]
        mechanisms = " + ".join(a["mechanism"] for a in r["pick"].spec.allocators)
        lines.append(f"| {r['trace']} | {r['events']:,} | {r['pick'].spec.name} ({mechanisms})"
                     f"{'' if r['within_2_percent'] else ' — none within 2%: the smallest'} | {ratio:.3f} | "
                     f"{1 - ratio:.0%} | {paper.get(r['trace'], 0):.0%} | {r['pick_seconds'] / r['kng_seconds']:.3f} | "
                     f"{r['pick_rss'] / 1024:,.0f} / {r['glibc_rss'] / 1024:,.0f} / {r['lea_rss'] / 1024:,.0f} KiB |")
    lines.append("")
    for r in rows:
        if "pick" not in r:
            continue
        saving = 1 - r["pick_footprint"] / r["kng_footprint"]
        target = paper.get(r["trace"])
        beats = r["pick_rss"] < r["glibc_rss"] and r["pick_rss"] < r["lea_rss"]
        lines.append(f"- {r['trace']}: " + (f"the paper's saving ({target:.0%}) at Kingsley's speed: "
                                             f"{met(saving >= target and r['within_2_percent'])} ({saving:.0%}); "
                                             if target is not None else "")
                     + f"measured footprint below glibc's and Lea's: {met(beats)}.")
    lines += ["", "### Convergence", "",
              "Hypervolume of the front (work and footprint over Kingsley's, reference 2, 2) per generation, the "
              "searches above:", "", "| trace | generation 1 | middle | last | simulations |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        h = r["history"]
        lines.append(f"| {r['trace']} | {h[0]['hypervolume']:.3f} | {h[len(h) // 2]['hypervolume']:.3f} | "
                     f"{h[-1]['hypervolume']:.3f} | {r['evaluations']:,} |")
    lines += ["", comparison.rstrip("\n")]
    lines += ["", "### Speed", "",
              f"Population {big['population']} x {big['generations']} generations (three objectives) on a "
              f"{speed['events']:,}-event espresso trace, "
              f"fresh cache: **{speed['seconds']:.0f} s** ({met(speed['seconds'] <= 300)}, target 5 minutes); "
              f"{speed['evaluations']:,} simulations, {speed['cache_hits']:,} cache hits "
              f"({speed['cache_hits'] / max(1, speed['cache_hits'] + speed['evaluations']):.0%}), "
              f"{speed['evaluations'] / speed['seconds']:.1f} simulations/s on both cores.", "",
              "Emitted (compile-time) against run-time-configured, the same design on the same trace:", "",
              "| trace | compiled | configured | speed-up |", "|---|---:|---:|---:|"]
    for r in rows:
        if "configured_seconds" in r:
            lines.append(f"| {r['trace']} | {r['compiled_seconds'] * 1e3:.2f} ms | {r['configured_seconds'] * 1e3:.2f} ms | "
                         f"{r['configured_seconds'] / r['compiled_seconds']:.2f}x |")
    lines += ["", "### Ray", ""]
    if "error" in ray_rates:
        lines.append(f"Not measured: {ray_rates['error']}")
    else:
        per_core = ray_rates[1]
        lines += [f"{big['ray_designs']} random designs on the espresso trace, one design a task: {ray_rates[1]:.1f} "
                  "evaluations/s with 1 "
                  f"worker, {ray_rates[2]:.1f} with 2 ({ray_rates[2] / ray_rates[1]:.2f}x; both on this 2-core "
                  f"machine). A cluster of N cores should reach about {per_core:.1f} x N evaluations/s for designs "
                  "like these while the driver keeps up (each generation waits for its slowest task, so the "
                  "population should be several times the number of cores)."]
    lines += ["", "heapkit tune on real programs: the section [heapkit tune on real programs](#heapkit-tune-on-real-programs) "
              "(`make bench-tune`)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
