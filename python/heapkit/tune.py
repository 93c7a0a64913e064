"""``heapkit tune``: one command from a program to the allocator that suits it, measured.

Stages, each kept in the output directory and skipped when it is already done with the
same settings (so an interrupted run continues where it stopped, and a changed setting
redoes only what depends on it):

1. ``record``: the program under the recorder, one trace per process (``processes/``);
2. ``select``: the trace to tune on (``trace.hkt``): by default the busiest process of
   the program (executable) that made the most malloc-family calls; ``process`` names
   another program or a pid, ``merge`` takes every process of that program in turn;
3. ``profile``: the trace's statistics;
4. ``search``: the design space searched on the trace (``search/``, resumable; the presets
   it evaluates beside the search are kept in its front.json); on a trace of more than
   two million operations, on its first million, the front then confirmed on the whole;
5. ``build``: designs of the front (the best balance of predicted time and footprint, the
   one nearest to beating heapkit's fast and dense presets HKS and ALEA on both axes and the
   two flanking that goal, the least footprint, the least predicted time, then spread along
   the front) and the presets worth building
   (LEA, and any preset on the front) are built (``designs/NAME/``) and the built heap's
   bytes held checked against the prediction, to the byte;
6. ``race-trace``: the built designs and the peers (glibc, jemalloc, mimalloc, tcmalloc,
   libheapkit.so, libheapkit-lea.so: those installed) raced on the trace
   (``heapkit-replay``), :mod:`heapkit.race`;
7. ``race-program``: the peers and the designs the trace's race left on its front (at most
   ``finalists``), with the best design the search found in any case and those nearest
   to beating every peer on both axes on the trace, raced on the whole
   command, every process under the allocator, output and exit status checked against
   glibc's;
8. the recommendation (:mod:`heapkit.recommend`) on the program's measured front, by
   ``prefer``, and ``report.html``.

A program that makes no allocations stops after ``select`` with one line saying so.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import heapkit
from heapkit import build as hb
from heapkit import race as hr
from heapkit import report as rp
from heapkit.designs import Front, FrontDesign, find_designs
from heapkit.record import RecordedTrace, Selection, select_process
from heapkit.recommend import PREFERENCES, Recommendation, recommend

PEERS = hr.DEFAULT_PEERS
PEER_NAMES = {"glibc": "glibc", "jemalloc": "jemalloc", "mimalloc": "mimalloc", "tcmalloc": "tcmalloc",
              "heapkit": "libheapkit.so", "lea": "libheapkit-lea.so"}
#: By default the search runs on this many operations of a longer trace (twice as many or
#: more), and confirms its front on the whole trace: its time grows with the trace's length,
#: the races' does not.
SAMPLE_OPERATIONS = 1_000_000
#: Presets built and raced whatever the search found: heapkit's best general-purpose design.
PRESETS_TO_BUILD = ("LEA",)
STAGES = ("record", "select", "profile", "search", "build", "race-trace", "race-program")
STATE = "state.json"


class TuneError(RuntimeError):
    pass


@dataclass(frozen=True)
class TuneSettings:
    population: int = 24
    generations: int = 12
    objectives: tuple[str, ...] = ("time", "footprint", "energy")
    seed: int = 1
    designs: int = 5  # designs of the front to build
    finalists: int = 3  # designs raced on the program itself
    process: Optional[str] = None  # the program (or pid) to tune on; default: the busiest
    merge: bool = False  # every process of that program, one after the other
    # Search on the trace's first N operations, then confirm the front on the whole trace;
    # None: the first SAMPLE_OPERATIONS of a trace longer than twice that; 0: the whole trace.
    sample: Optional[int] = None
    min_rounds: int = 8  # the races' first look (heapkit.race.RaceSettings)
    max_rounds: int = 20
    trace_budget: float = 90.0  # seconds for the race on the trace
    program_budget: float = 240.0  # seconds for the race on the program
    peers: tuple[str, ...] = PEERS
    prefer: str = "balanced"

    def race_settings(self, budget: float) -> hr.RaceSettings:
        return hr.RaceSettings(self.min_rounds, self.max_rounds, budget, seed=self.seed)

    def looks_text(self) -> str:
        looks = self.race_settings(0).looks()
        return f"{looks[0]} to {looks[-1]} rounds (looks at {', '.join(map(str, looks))})"

    def for_stage(self, stage: str) -> dict:
        """The settings each stage's result depends on (a change redoes it and what follows)."""
        race = {"min_rounds": self.min_rounds, "max_rounds": self.max_rounds, "peers": list(self.peers)}
        return {"select": {"process": self.process, "merge": self.merge},
                "search": {"population": self.population, "generations": self.generations,
                           "objectives": list(self.objectives), "seed": self.seed, "sample": self.sample},
                "build": {"designs": self.designs},
                "race-trace": dict(race, budget=self.trace_budget),
                "race-program": dict(race, budget=self.program_budget, finalists=self.finalists)}.get(stage, {})


@dataclass(frozen=True)
class BuiltDesign:
    """A design tune built: where it came from, its library, predicted and built footprint."""

    name: str
    origin: str  # "search" or "preset"
    spec_file: Path
    library: Path
    mechanisms: str
    work: float  # simulated
    predicted_footprint: int  # simulated bytes held, high-water mark
    heap_peak_bytes_held: int  # the built heap's, replaying the trace

    @property
    def footprint_matches(self) -> bool:
        return self.predicted_footprint == self.heap_peak_bytes_held

    def to_dict(self) -> dict:
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> "BuiltDesign":
        return cls(d["name"], d["origin"], Path(d["spec_file"]), Path(d["library"]), d["mechanisms"], d["work"],
                   d["predicted_footprint"], d["heap_peak_bytes_held"])


@dataclass
class TuneResult:
    out_dir: Path
    selection: Selection
    report: Path
    designs: list[BuiltDesign] = field(default_factory=list)
    trace_race: Optional[hr.RaceResult] = None
    program_race: Optional[hr.RaceResult] = None
    recommendation: Optional[Recommendation] = None
    missing_peers: list[str] = field(default_factory=list)
    agreement: float = math.nan  # Spearman between the trace's and the program's median times
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """The program made no allocations: nothing to tune."""
        return self.selection.events == 0

    @property
    def best(self) -> Optional[Recommendation]:
        return self.recommendation

    def library_of(self, name: str) -> Optional[Path]:
        """The library to preload for a contender of the races (None: glibc, nothing to preload)."""
        for race in (self.program_race, self.trace_race):
            if race is not None and name in race.names:
                return race.standing(name).contender.library
        return None


EMPTY_PROGRAM = "the program made no allocations (no call of the malloc family): there is nothing to tune"

Progress = Callable[[str, str], None]  # (stage, message)


def _load(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def _stage_current(state: dict, settings: "TuneSettings", name: str) -> bool:
    """Whether the stage ran, with the settings it would run with now."""
    return bool(state["done"].get(name)) and state["settings"].get(name, {}) == settings.for_stage(name)


def finished(out_dir: str | Path, settings: "TuneSettings") -> bool:
    """Whether out_dir holds a tune of these settings that ran every stage (tune() then only reads it back)."""
    try:
        state = _load(Path(out_dir) / STATE)
    except ValueError:
        return False
    return state is not None and all(_stage_current(state, settings, name) for name in STAGES)


def _save(path: Path, data) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def pick_candidates(front: Front, count: int) -> list[FrontDesign]:
    """Up to ``count`` designs of the simulated front: the best balance of predicted time and
    footprint (each over Kingsley's), the design nearest to beating heapkit's fast and
    dense general-purpose presets on both axes (:func:`nearest_to_dominating`) and the two
    flanking that goal (:func:`both_axes_flanks`), the least footprint (presets built anyway
    or raced as peers aside), the least predicted time, then designs evenly spread along the
    front by footprint (within twice the least footprint and three times HKS's predicted
    time, when enough designs are)."""
    designs = list(front.designs)
    if not designs or count < 1:
        return []
    kng = front.references.get("KNG", {})
    kng_metrics = front.presets["KNG"].metrics if "KNG" in front.presets else {}
    base_time = kng_metrics.get("predicted_ns") or kng.get("time") or 1.0
    base_footprint = kng.get("footprint") or kng_metrics.get("peak_footprint") or 1.0
    chosen: list[FrontDesign] = []

    def add(d: FrontDesign) -> None:
        if d.key not in {c.key for c in chosen} and len(chosen) < count:
            chosen.append(d)

    add(min(designs, key=lambda d: d.time / base_time + d.footprint / base_footprint))
    near = nearest_to_dominating(front)
    if near is not None:
        add(near)
    for flank in both_axes_flanks(front):
        add(flank)
    # The least footprint among the designs not built anyway (LEA is) and not a peer's own
    # composition (HKS and ALEA are libheapkit.so's and libheapkit-lea.so's, raced as peers).
    unbuilt = [d for d in designs if d.name not in PRESETS_TO_BUILD + GENERAL_PURPOSE] or designs
    add(min(unbuilt, key=lambda d: (d.footprint, d.time)))
    add(min(designs, key=lambda d: (d.time, d.footprint)))
    # Spread along the part of the front a user may want: within twice the least footprint
    # (a region holding 7x the live bytes is fast and of no use) and three times the fast
    # preset's predicted time (a design 40x slower than libheapkit.so is of no use either),
    # all of it if too few.
    least = min(d.footprint for d in designs)
    fast = _fast_target(front)
    usable = [d for d in designs if d.footprint <= 2 * least and (fast is None or d.time <= 3 * fast)]
    by_footprint = sorted(usable if len(usable) >= count else designs, key=lambda d: (d.footprint, d.time))
    while len(chosen) < min(count, len(designs)) and any(d.key not in {c.key for c in chosen} for d in by_footprint):
        remaining = [d for d in by_footprint if d.key not in {c.key for c in chosen}]
        # the design farthest (in rank along the front) from every chosen one
        ranks = {d.key: i for i, d in enumerate(by_footprint)}
        taken = [ranks[c.key] for c in chosen if c.key in ranks] or [-1]
        add(max(remaining, key=lambda d: min(abs(ranks[d.key] - t) for t in taken)))
    return chosen


#: heapkit's general-purpose presets standing for the peers in the simulator: libheapkit.so's
#: single-thread path (fast) and libheapkit-lea.so's heap (dense).
GENERAL_PURPOSE = ("HKS", "ALEA")


def nearest_to_dominating(front: Front) -> Optional[FrontDesign]:
    """The design the search found (not a preset) on the simulated front nearest to beating heapkit's general-purpose
    presets on both axes at once: the least of max(predicted time over the faster
    preset's, footprint over the smaller preset's or glibc's replayed footprint, whichever
    is less). What tune is after is a design that beats every peer on both axes, and those
    presets stand for the peers here: libheapkit.so runs as fast as the fastest of them;
    libheapkit-lea.so packs densely, but glibc packs denser on some programs (sqlite3: ALEA
    simulated at 22.8 MB, glibc's replay at 22.1 MB, and a design at 22.1 MB was 1.01x
    glibc's peak RSS), so the footprint to beat is glibc's when the front has it."""
    presets = _general_purpose_presets(front)
    if not front.designs or not presets:
        return None
    fastest = _fast_target(front)
    smallest = min(m["peak_footprint"] for m in presets)
    glibc = front.references.get("glibc", {}).get("footprint")
    if glibc:
        smallest = min(smallest, glibc)
    if not fastest or smallest <= 0:
        return None
    searched = [d for d in front.designs if d.name not in heapkit.PRESETS]
    if not searched:
        return None
    return min(searched, key=lambda d: (max(d.time / fastest, d.footprint / smallest), d.time))


def _general_purpose_presets(front: Front) -> list[dict]:
    return [front.presets[n].metrics for n in GENERAL_PURPOSE if n in front.presets and _usable(front.presets[n].metrics)]


def _predicted_time(metrics: dict) -> float:
    """The predicted replay time as FrontDesign.time reads it (work where an old front has none)."""
    return float(metrics.get("predicted_ns", metrics["work"]))


def _fast_target(front: Front) -> Optional[float]:
    """The predicted time of the faster of heapkit's general-purpose presets (HKS: libheapkit.so)."""
    times = [_predicted_time(m) for m in _general_purpose_presets(front)]
    return min(times) if times and min(times) > 0 else None


def _dense_target(front: Front) -> Optional[float]:
    """The footprint a design must not exceed to be as dense as the densest peer: glibc's
    replayed footprint (the lowest peer's RSS on most programs: ALEA's simulated footprint
    is below glibc's on some traces where libheapkit-lea.so's measured RSS is not), else
    the denser preset's."""
    glibc = front.references.get("glibc", {}).get("footprint")
    if glibc:
        return float(glibc)
    sizes = [float(m["peak_footprint"]) for m in _general_purpose_presets(front)]
    return min(sizes) if sizes and min(sizes) > 0 else None


def both_axes_flanks(front: Front) -> list[FrontDesign]:
    """The two searched designs that flank the goal of beating every peer on both axes from
    either side: the least footprint among those predicted as fast as the fast preset (HKS,
    libheapkit.so), and the least predicted time among those within the dense target
    (glibc's replayed footprint). When no design meets both, the one that does best on the
    measured axis it is furthest from is one of these two; the simulator's ranking alone
    (one figure, :func:`nearest_to_dominating`) may favour a design neither side of it."""
    searched = [d for d in front.designs if d.name not in heapkit.PRESETS]
    fast, dense = _fast_target(front), _dense_target(front)
    found = []
    if fast is not None:
        quick = [d for d in searched if d.time <= fast]
        if quick:
            found.append(min(quick, key=lambda d: (d.footprint, d.time)))
    if dense is not None:
        small = [d for d in searched if d.footprint <= dense]
        if small:
            found.append(min(small, key=lambda d: (d.time, d.footprint)))
    return found


def nearest_to_beating_peers(race: hr.RaceResult, names: Sequence[str]) -> Optional[str]:
    """Of ``names`` (designs raced), the one nearest to beating every peer of the race on
    both axes: the least of max(time over the fastest peer's, peak RSS over the lowest
    peer's); None without peers or designs."""
    peers = [s for s in race.standings if s.kind == "peer" and s.runs() and not s.disqualified]
    designs = [s for s in race.standings if s.name in set(names) and s.runs() and not s.disqualified]
    if not peers or not designs:
        return None
    fastest = min(p.cpu_seconds for p in peers)
    smallest = min(p.peak_rss for p in peers)
    return min(designs, key=lambda s: (max(s.cpu_seconds / fastest, s.peak_rss / smallest), s.cpu_seconds)).name


def flanking_peers(race: hr.RaceResult, names: Sequence[str]) -> list[str]:
    """Of ``names`` (designs raced), the least peak RSS among those whose median time is at
    most the fastest peer's, and the least time among those whose peak RSS is at most the
    lowest peer's (each when there is one): the candidates for beating every peer on both
    axes that one figure (:func:`nearest_to_beating_peers`) would rank below another."""
    peers = [s for s in race.standings if s.kind == "peer" and s.runs() and not s.disqualified]
    designs = [s for s in race.standings if s.name in set(names) and s.runs() and not s.disqualified]
    if not peers or not designs:
        return []
    fastest = min(p.cpu_seconds for p in peers)
    smallest = min(p.peak_rss for p in peers)
    found = []
    quick = [s for s in designs if s.cpu_seconds <= fastest]
    if quick:
        found.append(min(quick, key=lambda s: (s.peak_rss, s.cpu_seconds)).name)
    small = [s for s in designs if s.peak_rss <= smallest]
    if small:
        found.append(min(small, key=lambda s: (s.cpu_seconds, s.peak_rss)).name)
    return list(dict.fromkeys(found))


def pick_finalists(race: hr.RaceResult, count: int, prefer: str, searched: Sequence[str] = ()) -> list[str]:
    """The designs to race on the program: those on the trace's measured front, in the
    preference's order, at most ``count``; and the best of the ``searched`` designs (those
    the search found, not presets) by the preference even when the trace's race put it
    off its front, so that the program's race always measures what the search found (and
    at least one design); and the searched designs aimed at beating every peer on both
    axes (:func:`nearest_to_beating_peers`, :func:`flanking_peers`)."""
    from heapkit.recommend import choose

    designs = [s for s in race.standings if s.kind == "design" and not s.disqualified and s.runs()]
    if not designs or count < 1:
        return []
    on_front = {s.name for s in race.front()}
    pool = [s for s in designs if s.name in on_front]
    finalists: list[str] = []
    while pool and len(finalists) < count:
        best = choose(race, pool, prefer)
        finalists.append(best.name)
        pool = [s for s in pool if s is not best]
    found = [s for s in designs if s.name in set(searched)]
    if found and not set(finalists) & {s.name for s in found}:
        finalists.append(choose(race, found, prefer).name)
    # And the searched design nearest to beating every peer on both axes, which a peer
    # may dominate on the trace by a hair while it would beat them all on the program.
    near = nearest_to_beating_peers(race, [s.name for s in found])
    if near is not None and near not in finalists:
        finalists.append(near)
    # And the two that flank that goal on the trace from either side: the smallest of those
    # as fast as the fastest peer, the fastest of those as small as the smallest peer.
    for flank in flanking_peers(race, [s.name for s in found]):
        if flank not in finalists:
            finalists.append(flank)
    if not finalists:
        finalists.append(choose(race, designs, prefer).name)
    return finalists


def tune(command: Sequence[str], out_dir: str | Path, settings: TuneSettings = TuneSettings(), *,
         cache: str | Path | None = None, threads: int | None = None,
         progress: Optional[Progress] = None) -> TuneResult:
    """Tunes ``command`` (see the module's docstring); everything goes to ``out_dir``."""
    command = [str(c) for c in command]
    if not command:
        raise TuneError("no command to tune: heapkit tune -- CMD ARGS")
    if settings.prefer not in PREFERENCES:
        raise TuneError(f"unknown preference {settings.prefer!r}: choose from {', '.join(PREFERENCES)}")
    try:
        peers, missing = hr.available_peers(settings.peers)  # an unknown name fails now, not after the search
    except ValueError as error:
        raise TuneError(str(error)) from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / STATE
    state = _load(state_path) or {"command": command, "settings": {}, "done": {}, "seconds": {}}
    if state["command"] != command:
        raise TuneError(f"{out} holds the tuning of another command ({' '.join(state['command'])}): "
                        "choose another output directory")
    # A stage whose settings changed is redone, and every stage after it.
    for i, name in enumerate(STAGES):
        if state["done"].get(name) and not _stage_current(state, settings, name):
            for later in STAGES[i:]:
                state["done"].pop(later, None)
            break
    say = progress or (lambda stage, message: None)

    def stage(name: str, work: Callable[[], None]) -> None:
        if state["done"].get(name):
            say(name, "done before: kept")
            return
        started = time.monotonic()
        work()
        state["done"][name] = True
        state["settings"][name] = settings.for_stage(name)
        state["seconds"][name] = time.monotonic() - started
        _save(state_path, state)

    trace = out / "trace.hkt"

    def record() -> None:
        say("record", "running the program under the recorder")
        folder = out / "processes"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        # The program's own output is kept beside its traces, not mixed with tune's.
        # Its standard input is empty, as in every run of the races.
        with open(folder / "stdout", "wb") as stdout, open(folder / "stderr", "wb") as stderr:
            result = heapkit.record(command, folder / "trace.hkt", stdin=subprocess.DEVNULL, stdout=stdout,
                                    stderr=stderr)
        if result.returncode != 0:
            said = (folder / "stderr").read_text(errors="replace").strip().splitlines()
            raise TuneError(f"the program exited with status {result.returncode} while recorded"
                            + (f" ({said[-1][:200]})" if said else "") + ": tune needs a run that succeeds")
        _save(out / "processes.json", [t.to_dict() for t in result.traces])
    stage("record", record)

    def select() -> None:
        traces = [RecordedTrace.from_dict(t) for t in _load(out / "processes.json")]
        selection = select_process(traces, trace, settings.process, settings.merge)
        _save(out / "selection.json", selection.to_dict())
        say("select", selection.describe())
    try:
        stage("select", select)
    except ValueError as error:
        raise TuneError(str(error)) from None
    selection = Selection.from_dict(_load(out / "selection.json"))
    if selection.events == 0:
        report = write_tune_report(out, settings.prefer)
        return TuneResult(out, selection, report, stage_seconds=state["seconds"])

    def profile() -> None:
        say("profile", "profiling the trace")
        _save(out / "profile.json", heapkit.stats(trace).to_dict())
    stage("profile", profile)

    def search() -> None:
        # An interrupted search of these settings resumes from its checkpoint; any other starts afresh.
        resume = state["settings"].get("search-started") == settings.for_stage("search") and \
            (out / "search" / "checkpoint.pkl").exists()
        if not resume:
            shutil.rmtree(out / "search", ignore_errors=True)
            state["settings"]["search-started"] = settings.for_stage("search")
            _save(state_path, state)

        def generation(h: dict) -> None:
            say("search", f"generation {h['generation']}/{settings.generations}: front {h['front']}, "
                          f"{h['evaluations']} simulations, {h['cache_hits']} cache hits")
        sample = settings.sample
        if sample is None:
            sample = SAMPLE_OPERATIONS if selection.events >= 2 * SAMPLE_OPERATIONS else 0
        if sample:
            say("search", f"searching on the first {sample:,} of {selection.events:,} operations, then confirming "
                          "the front on all of them")
        _, result = find_designs(trace, out / "search", objectives=settings.objectives, sample=sample or None,
                                 population=settings.population, generations=settings.generations, seed=settings.seed,
                                 resume=resume, cache=cache, threads=threads,
                                 progress=generation)
        if result.interrupted:
            raise KeyboardInterrupt
    stage("search", search)

    def build() -> None:
        front = Front.load(out / "search")
        presets_figures = {name: p.metrics for name, p in front.presets.items() if _usable(p.metrics)}
        wanted: list[tuple[str, str, Path, dict]] = []
        for d in pick_candidates(front, settings.designs):
            origin = "preset" if d.name in heapkit.PRESETS else "search"
            wanted.append((d.name, origin, d.spec_file, d.metrics))
        for name in PRESETS_TO_BUILD:
            if name not in {w[0] for w in wanted} and name in presets_figures:
                wanted.append((name, "preset", heapkit.dmm.preset_path(name), presets_figures[name]))
        say("build", f"building {len(wanted)} designs: {', '.join(w[0] for w in wanted)}")

        def make(item: tuple[str, str, Path, dict]) -> BuiltDesign:
            name, origin, spec_file, metrics = item
            spec = heapkit.load_spec(spec_file)
            built = hb.build(spec, out / "designs" / name / f"lib{name}.so")
            held = hb.built_footprint(built, trace)
            mechanisms = " + ".join(a["mechanism"] for a in spec.allocators)
            return BuiltDesign(name, origin, Path(spec_file), built.shared_library, mechanisms, float(metrics["work"]),
                               int(metrics["peak_footprint"]), held)

        with ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
            built = list(pool.map(make, wanted))
        for d in built:
            if not d.footprint_matches:
                say("build", f"{d.name}: the built heap held {d.heap_peak_bytes_held:,} B where the simulator "
                             f"predicted {d.predicted_footprint:,} B")
        timeline = {}
        simulated = heapkit.simulate(trace, [heapkit.load_spec(d.spec_file) for d in built] + [heapkit.preset("KNG")],
                                     threads=threads)
        for r in simulated:
            timeline[f"{r.name} (simulated)"] = [list(s) for s in r.footprint_samples]
        glibc = heapkit.replay(trace, "glibc", runs=1, footprint_samples=200)
        if glibc.runs[0].footprint_samples:
            timeline["glibc (resident growth, replayed)"] = glibc.runs[0].footprint_samples
        _save(out / "designs.json", {"designs": [d.to_dict() for d in built], "timeline": timeline})
    stage("build", build)
    designs = [BuiltDesign.from_dict(d) for d in _load(out / "designs.json")["designs"]]

    def announce(where: str) -> Callable[[int, hr.RaceResult], None]:
        def on_round(n: int, result: hr.RaceResult) -> None:
            ok = [s for s in result.standings if not s.disqualified]
            undominated = sum(1 for s in ok if s.eliminated is None)
            stopped = sum(1 for s in ok if s.stopped_after is not None)
            say(where, f"round {n}: {undominated} undominated, {len(ok) - undominated - stopped} set aside (still "
                       f"measured), {stopped} stopped, {result.seconds:.0f} s")
        return on_round

    def race_trace() -> None:
        contenders = peers + [hr.Contender(d.name, d.library, "design") for d in designs]
        say("race-trace", f"racing {len(contenders)} allocators on the trace")
        result = hr.race(contenders, hr.replay_measure(trace), settings.race_settings(settings.trace_budget),
                         keep={"glibc"}, on_round=announce("race-trace"))
        _save(out / "race-trace.json", result.to_dict())
    stage("race-trace", race_trace)
    trace_race = hr.RaceResult.from_dict(_load(out / "race-trace.json"))

    def race_program() -> None:
        finalists = pick_finalists(trace_race, settings.finalists, settings.prefer,
                                   [d.name for d in designs if d.origin == "search"])
        by_name = {d.name: d for d in designs}
        contenders = peers + [hr.Contender(n, by_name[n].library, "design") for n in finalists]
        # One unmeasured run first: the program's files in the page cache, and its length
        # known, for a timeout far beyond it.
        warm, _ = hr.run_measured(command, hr.preload_env(None))
        timeout = max(60.0, 20 * warm.wall_seconds)
        say("race-program", f"racing {len(contenders)} allocators on the program ({warm.wall_seconds:.2f} s a run)")
        result = hr.race(contenders, hr.program_measure(command, timeout=timeout),
                         settings.race_settings(settings.program_budget), reference="glibc", keep={"glibc"},
                         on_round=announce("race-program"))
        _save(out / "race-program.json", result.to_dict())
    stage("race-program", race_program)
    program_race = hr.RaceResult.from_dict(_load(out / "race-program.json"))
    recommendation = recommend(program_race, settings.prefer)
    _save(out / "recommendation.json", {k: v for k, v in asdict(recommendation).items()})
    say("report", "writing the report")
    report = write_tune_report(out, settings.prefer)
    return TuneResult(out, selection, report, designs, trace_race, program_race, recommendation, missing,
                      agreement(trace_race, program_race), state["seconds"])


def agreement(trace_race: hr.RaceResult, program_race: hr.RaceResult) -> float:
    """Spearman's rank correlation between the median times on the trace and on the
    program, over the allocators raced on both: how far the cheap race predicts the
    expensive one."""
    both = [n for n in program_race.names if n in trace_race.names]
    return hr.spearman([trace_race.standing(n).cpu_seconds for n in both],
                       [program_race.standing(n).cpu_seconds for n in both])


# ---- the report ------------------------------------------------------------------------------

def _measured_set(race: hr.RaceResult, key: str, heading: str, note: str, designs: dict[str, BuiltDesign],
                  recommended: Optional[str], time_label: str, rss_label: str) -> rp.MeasuredSet:
    front = {s.name for s in race.front()}
    reference = race.reference or ("glibc" if "glibc" in race.names else None)
    points = []
    for s in race.standings:
        if not s.runs():
            continue
        if s.disqualified:
            status = s.disqualified
        elif s.name in front:
            status = "on the measured front"
        else:
            by = race.dominated_by(s.name)
            status = s.eliminated or (f"dominated by {', '.join(by)}" if by else "")
            if s.stopped_after is not None:
                status += f" (not measured after round {s.stopped_after})"
        ratio = (lambda axis: race.compare(s.name, reference, axis).ratio) if reference and reference != s.name \
            else (lambda axis: 1.0 if reference else None)
        built = designs.get(s.name)
        points.append(rp.MeasuredPoint(
            s.name, s.kind, s.cpu_seconds, s.peak_rss, s.spread("cpu_seconds"), s.spread("peak_rss"),
            s.name in front, status, s.name == recommended, ratio("cpu_seconds"), ratio("peak_rss"), len(s.runs()),
            built.predicted_footprint if built else None, built.heap_peak_bytes_held if built else None))
    return rp.MeasuredSet(key, heading, note + " Rule: " + race.settings.rule() + ".", points, time_label, rss_label,
                          reference)


def tune_report(out_dir: str | Path, prefer: str = "balanced") -> rp.Report:
    """What a tune directory's report shows, gathered from its files."""
    out = Path(out_dir)
    state = _load(out / STATE) or {}
    command = " ".join(state.get("command", []))
    report = rp.Report(title=f"heapkit tune: {command or out}", command=command)
    selection_data = _load(out / "selection.json")
    if selection_data:
        selection = Selection.from_dict(selection_data)
        if selection.events == 0:
            report.verdict = EMPTY_PROGRAM
            return report
        report.notes.append(selection.describe())
        chosen = {(t.pid, t.image) for t in selection.processes}
        report.processes = [rp.ProcessRow(t.pid, t.image, t.executable, t.events, t.threads, (t.pid, t.image) in chosen)
                            for p in selection.programs for t in p.processes]
    built = {d["name"]: BuiltDesign.from_dict(d) for d in (_load(out / "designs.json") or {}).get("designs", [])}
    program = _load(out / "race-program.json")
    recommendation = None
    if program:
        program_race = hr.RaceResult.from_dict(program)
        recommendation = recommend(program_race, prefer)
        report.verdict = recommendation.line
        missing = [p for p in state.get("settings", {}).get("race-program", {}).get("peers", [])
                   if p not in program_race.names]
        if missing:
            report.notes.append("not installed, so not measured: " + ", ".join(PEER_NAMES.get(p, p) for p in missing))
        if not program_race.output_checked:
            report.notes.append("glibc's own output differed from run to run: only exit statuses were compared")
        report.program = _measured_set(
            program_race, "program", "The measured front: the program under each allocator",
            f"The whole command (every process it started) with each allocator preloaded, {program_race.rounds} "
            f"interleaved rounds ({program_race.seconds:.0f} s); CPU time is user + system, peak RSS the largest "
            f"process's. Output and exit status compared with glibc's.", built, recommendation.name,
            "CPU time (user + system)", "peak RSS")
    trace = _load(out / "race-trace.json")
    if trace:
        trace_race = hr.RaceResult.from_dict(trace)
        note = (f"heapkit-replay of the trace with each allocator preloaded (one thread, trace order), "
                f"{trace_race.rounds} rounds; the replayer's CPU time (decoding the trace included) and the growth "
                "of its resident set during the replay (every page of every object touched). The designs on this "
                "front go on to the race on the program.")
        if program:
            rho = agreement(trace_race, hr.RaceResult.from_dict(program))
            if not math.isnan(rho):
                note += f" The trace ranked the allocators' times as the program did with Spearman ρ = {rho:.2f}."
        report.trace = _measured_set(trace_race, "trace", "The race on the trace", note, built, None,
                                     "replay CPU time", "replay footprint")
    report.profile = _load(out / "profile.json")
    front_path = out / "search" / "front.json"
    if front_path.exists():
        front = Front.load(out / "search")
        report.designs = [rp.design_point(d.name, "chosen" if d.name in built else "front", d.metrics,
                                          show_map=d.name in built) for d in front.designs]
        report.history = front.history
        shown = {d.name for d in report.designs}
        for name, p in front.presets.items():
            if name not in shown and _usable(p.metrics):
                report.designs.append(rp.design_point(name, "chosen" if name in built else "preset", p.metrics,
                                                      show_map=name in built))
    report.timeline = (_load(out / "designs.json") or {}).get("timeline", {})
    return report


def _usable(metrics: dict) -> bool:
    """A simulation that ran the whole trace (not abandoned as too slow, no failed request)."""
    return not metrics.get("abandoned") and not metrics.get("failed")


def write_tune_report(out_dir: str | Path, prefer: str = "balanced") -> Path:
    return rp.write(tune_report(out_dir, prefer), Path(out_dir) / "report.html")


__all__ = ["BuiltDesign", "EMPTY_PROGRAM", "GENERAL_PURPOSE", "PEERS", "finished", "both_axes_flanks", "flanking_peers", "nearest_to_beating_peers", "nearest_to_dominating", "PRESETS_TO_BUILD", "STAGES", "TuneError", "TuneResult",
           "TuneSettings", "agreement", "pick_candidates", "pick_finalists", "tune", "tune_report",
           "write_tune_report"]
