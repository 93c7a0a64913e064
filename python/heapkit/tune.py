"""``heapkit tune``: one command from a program to its own verified allocator.

Stages, each kept in the output directory and skipped when it is already done (so a run
that was interrupted continues where it stopped):

1. record the program's allocations (``trace.hkt``) and its own output under glibc;
2. profile the trace (``profile.json``);
3. simulate the presets (``presets.json``);
4. search the design space (``search/``, resumable);
5. choose designs from the front (the least footprint, the least work, the best balance)
   and build each (``designs/NAME/``: library, static library, CMake snippet, header);
6. verify: replay the trace on every built design (the footprint it holds must equal the
   prediction to the byte) and on the peers, and run the program itself under each,
   checking its output and exit status against glibc's (``verify.json``);
7. write ``report.html``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import heapkit
from heapkit import build as hb
from heapkit import report
from heapkit import search as hs
from heapkit.replay import resolve_allocator

PEERS = ("glibc", "jemalloc", "mimalloc", "heapkit", "lea", "kingsley")
STATE = "state.json"


class TuneError(RuntimeError):
    pass


@dataclass
class TuneResult:
    out_dir: Path
    chosen: list[dict]  # the built designs, best first, with predicted and measured figures
    program: list[dict]  # the program under glibc, the peers and the built designs
    report: Path
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def best(self) -> dict:
        return self.chosen[0]


def _load(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def _save(path: Path, data) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def run_program(command: Sequence[str], library: Optional[Path], runs: int) -> dict:
    """The program under one allocator: its output, status, time and peak RSS (medians)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if library is not None:
        env["LD_PRELOAD"] = str(library)
    times, rss, output, status = [], [], None, None
    for _ in range(runs):
        with tempfile.NamedTemporaryFile("r") as measure:
            start = time.monotonic()
            done = subprocess.run(["/usr/bin/time", "-o", measure.name, "-f", "%M", *command], env=env,
                                  capture_output=True)
            times.append(time.monotonic() - start)
            lines = [l for l in measure.read().splitlines() if l.strip().isdigit()]
            rss.append(int(lines[-1]) * 1024 if lines else 0)
        output, status = done.stdout, done.returncode
    return {"seconds": statistics.median(times), "peak_rss": int(statistics.median(rss)), "status": status,
            "output_sha": __import__("hashlib").sha256(output).hexdigest()}


def choose(front: list[dict], baseline: dict, count: int) -> list[dict]:
    """Up to ``count`` designs of the front: the least footprint, the least work, and the
    best balance of both (each over Kingsley's), in that order, without repeats."""
    if not front:
        return []
    by_footprint = min(front, key=lambda d: (d["objectives"]["footprint"], d["objectives"]["work"]))
    by_work = min(front, key=lambda d: (d["objectives"]["work"], d["objectives"]["footprint"]))
    balance = min(front, key=lambda d: d["objectives"]["work"] / baseline["work"]
                  + d["objectives"]["footprint"] / baseline["footprint"])
    chosen = []
    for d in (balance, by_footprint, by_work):
        if d["key"] not in [c["key"] for c in chosen]:
            chosen.append(d)
    return chosen[:count]


Progress = Callable[[str, str], None]  # (stage, message)


def tune(command: Sequence[str], out_dir: str | Path, *, population: int = 24, generations: int = 12,
         objectives: Sequence[str] = ("work", "footprint", "energy"), seed: int = 1, runs: int = 3, designs: int = 3,
         peers: Sequence[str] = PEERS, cache: str | Path | None = None, threads: int | None = None,
         progress: Optional[Progress] = None) -> TuneResult:
    command = [str(c) for c in command]
    if not command:
        raise TuneError("no command to tune: heapkit tune -- CMD ARGS")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / STATE
    state = _load(state_path) or {"command": command, "settings": {}, "done": {}, "seconds": {}}
    settings = {"population": population, "generations": generations, "objectives": list(objectives), "seed": seed,
                "designs": designs}
    if state["command"] != command:
        raise TuneError(f"{out} holds the tuning of another command ({' '.join(state['command'])}): "
                        "choose another output directory")
    if state["settings"] and state["settings"] != settings:
        # A different search: keep the recording, redo what follows it.
        state["done"] = {k: v for k, v in state["done"].items() if k in ("record", "profile", "presets")}
        shutil.rmtree(out / "search", ignore_errors=True)
    state["settings"] = settings
    say = progress or (lambda stage, message: None)

    def stage(name: str, work: Callable[[], None]) -> None:
        if state["done"].get(name):
            say(name, "done before: kept")
            return
        started = time.monotonic()
        work()
        state["done"][name] = True
        state["seconds"][name] = time.monotonic() - started
        _save(state_path, state)

    trace = out / "trace.hkt"

    def record() -> None:
        say("record", "running the program under the recorder")
        result = heapkit.record(command, trace)
        if result.returncode != 0:
            raise TuneError(f"the program exited with status {result.returncode} while recorded")
    stage("record", record)

    def profile() -> None:
        say("profile", "profiling the trace")
        _save(out / "profile.json", heapkit.stats(trace).to_dict())
    stage("profile", profile)

    def presets() -> None:
        say("presets", "simulating the presets")
        results = heapkit.simulate(trace, heapkit.PRESETS, threads=threads)
        _save(out / "presets.json", [r.to_dict() | {"name": r.name} for r in results])
    stage("presets", presets)

    def search() -> None:
        def generation(h: dict) -> None:
            say("search", f"generation {h['generation']}/{generations}: front {h['front']}, "
                          f"{h['evaluations']} simulations, {h['cache_hits']} cache hits")
        resume = (out / "search" / "checkpoint.pkl").exists()
        result = hs.search(trace, out / "search", objectives=objectives, population=population,
                           generations=generations, seed=seed, resume=resume, cache=cache, threads=threads,
                           progress=generation)
        if result.interrupted:
            raise KeyboardInterrupt
        references = {"KNG": result.presets["KNG"].objectives, "LEA": result.presets["LEA"].objectives}
        hs.write_front(result, out / "search", objectives, references)
    stage("search", search)

    front = json.loads((out / "search" / "front.json").read_text())
    chosen = choose(front["designs"], front["references"]["KNG"], designs)

    def build() -> None:
        for d in chosen:
            say("build", f"building {d['name']}")
            hb.build(heapkit.load_spec(d["spec_file"]), out / "designs" / d["name"] / f"lib{d['name']}.so")
    stage("build", build)

    def verify() -> None:
        measured, programs, timeline = [], [], {}
        say("verify", "running the program under glibc")
        reference = run_program(command, None, runs)
        programs.append({"allocator": "glibc", **reference, "same_output": True})
        for d in chosen:
            library = out / "designs" / d["name"] / f"lib{d['name']}.so"
            say("verify", f"replaying the trace on {d['name']}")
            built = hb.BuildResult(heapkit.load_spec(d["spec_file"]), library.with_name(f"{d['name']}.h"), library,
                                   library.with_name(f"lib{d['name']}.a"), library.with_name(f"{d['name']}.cmake"),
                                   library.with_name(f"{d['name']}-verify"))
            v = hb.verify(built, trace, runs)
            replayed = heapkit.replay(trace, str(library), runs=runs)
            measured.append({"name": d["name"], "kind": "built", "seconds": replayed.median_seconds,
                             "footprint": replayed.median_footprint_bytes,
                             "peak_rss": int(statistics.median(r.peak_rss_bytes for r in replayed.runs)),
                             "predicted_footprint": v.predicted_footprint, "heap_peak_bytes_held": v.measured_footprint,
                             "compiled_seconds": v.compiled_seconds, "configured_seconds": v.configured_seconds})
            say("verify", f"running the program under {d['name']}")
            run = run_program(command, library, runs)
            programs.append({"allocator": d["name"], **run,
                             "same_output": run["output_sha"] == reference["output_sha"] and run["status"] == reference["status"]})
        for peer in peers:
            try:
                library = resolve_allocator(peer)
            except (FileNotFoundError, ValueError):
                continue
            say("verify", f"replaying the trace on {peer}")
            replayed = heapkit.replay(trace, peer, runs=runs, footprint_samples=200 if peer == "glibc" else 0)
            measured.append({"name": peer, "kind": "allocator", "seconds": replayed.median_seconds,
                             "footprint": replayed.median_footprint_bytes,
                             "peak_rss": int(statistics.median(r.peak_rss_bytes for r in replayed.runs))})
            if peer == "glibc" and replayed.runs[0].footprint_samples:
                timeline["glibc (resident growth, replayed)"] = replayed.runs[0].footprint_samples
            if peer != "glibc":
                say("verify", f"running the program under {peer}")
                run = run_program(command, library, runs)
                programs.append({"allocator": peer, **run, "same_output": run["output_sha"] == reference["output_sha"]
                                 and run["status"] == reference["status"]})
        simulated = heapkit.simulate(trace, [heapkit.load_spec(d["spec_file"]) for d in chosen] + [heapkit.preset("KNG")],
                                     threads=threads)
        for r in simulated:
            timeline[f"{r.name} (simulated)"] = [list(s) for s in r.footprint_samples]
        _save(out / "verify.json", {"measured": measured, "program": programs, "timeline": timeline})
    stage("verify", verify)

    def write_report() -> None:
        say("report", "writing the report")
        write_tune_report(out)
    stage("report", write_report)

    verification = json.loads((out / "verify.json").read_text())
    built = {m["name"]: m for m in verification["measured"] if m["kind"] == "built"}
    runs = {r["allocator"]: r for r in verification["program"]}
    ranked = sorted(chosen, key=lambda d: recommendation_key(runs.get(d["name"]), runs["glibc"]))
    return TuneResult(out, [d | {"measured": built.get(d["name"], {}), "program": runs.get(d["name"], {})}
                            for d in ranked], verification["program"], out / "report.html", state["seconds"])


def recommendation_key(run: dict | None, glibc: dict) -> tuple:
    """The order in which built designs are recommended: those that ran the program with
    the same output first, then those within 10% of glibc's time, then by peak resident
    set, then by time."""
    if run is None:
        return (2, 0, 0, 0)
    return (0 if run["same_output"] else 1, 0 if run["seconds"] <= 1.1 * glibc["seconds"] else 1, run["peak_rss"],
            run["seconds"])


def tune_report_data(out_dir: str | Path) -> dict:
    """What a tune directory's report shows, gathered from its files."""
    out = Path(out_dir)
    state = _load(out / STATE) or {}
    profile = _load(out / "profile.json")
    presets = _load(out / "presets.json") or []
    front = _load(out / "search" / "front.json") or {"designs": [], "history": [], "references": {}}
    verification = _load(out / "verify.json") or {}
    chosen_names = {m["name"] for m in verification.get("measured", []) if m.get("kind") == "built"}
    designs = [report.design_entry(d["name"], "chosen" if d["name"] in chosen_names else "front", d["metrics"],
                                   show_map=d["name"] in chosen_names) for d in front["designs"]]
    designs += [report.design_entry(p["name"], "preset", p) for p in presets]
    command = " ".join(state.get("command", []))
    summary = f"<code>{command}</code>: " if command else ""
    programs = verification.get("program", [])
    if programs and chosen_names:
        glibc = programs[0]
        candidates = [p for p in programs if p["allocator"] in chosen_names]
        best = min(candidates, key=lambda p: recommendation_key(p, glibc)) if candidates else None
        if best:
            summary += (f"the recommended design <b>{best['allocator']}</b> runs the program in {best['seconds']:.3f} s "
                        f"({best['seconds'] / glibc['seconds']:.2f}x glibc's time) with a peak resident set of "
                        f"{best['peak_rss'] / 2**20:.1f} MiB ({best['peak_rss'] / glibc['peak_rss']:.2f}x glibc's).")
    return {"title": f"heapkit tune: {command or out}", "summary": summary, "profile": profile, "designs": designs,
            "measured": verification.get("measured", []), "timeline": verification.get("timeline", {}),
            "program": programs, "history": front.get("history", [])}


def write_tune_report(out_dir: str | Path) -> Path:
    return report.write(tune_report_data(out_dir), Path(out_dir) / "report.html")


__all__ = ["PEERS", "TuneError", "TuneResult", "choose", "recommendation_key", "run_program", "tune", "tune_report_data",
           "write_tune_report"]
