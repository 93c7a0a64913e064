"""The design search: grammatical evolution over the DMM grammar, multi-objective.

Genomes are lists of integer codons; the grammar (:mod:`heapkit.grammar`, generated from
the trace's size profile) maps each to a design. Selection is DEAP's NSGA-II over the
chosen objectives (any of work, footprint, energy, all minimised), or, with ``weights``,
the paper's single objective: a weighted sum of the objectives normalised to Kingsley's.
The presets the grammar can express (KNG, LEA, FIB, S10, ALEA, HKS) are seeded into the
first population, with designs mixing page-segregated small objects and a best-fit heap (by
size, or by lifetime: the short-lived sizes in an area of their own), and page-segregated
designs on the class lists fitted to the trace,
and NSGA-II keeps the non-dominated designs (one design per point of objective space; the
front that does not fit the population cut by hypervolume contribution), so the front
never loses to them. Offspring come from the derivation tree: a subtree swapped
between parents or redrawn, the rest of the design kept (:func:`subtree_crossover`,
:func:`subtree_mutation`, or one setting alone: :func:`leaf_mutation`; ``operators="codon"``:
GE's one-point crossover and per-codon mutation). With ``screen`` > 1 a surrogate model
(:mod:`heapkit.surrogate`) picks which of several candidates to simulate. Every offspring
derives a design not evaluated before (:func:`make_new`), and a share of them are random
immigrants. A share of each generation's offspring (``refine``, a quarter in the first
generation) are not bred but made one setting or one part away from the front's designs,
those adding most to its hypervolume first (:func:`refine_front`: a Pareto local search).
With ``adaptive`` (the default), each later generation is split between breeding,
immigrants and the local search by how often each one's offspring added to the front
(:func:`adapt_shares`).

Evaluations are simulations (:func:`heapkit.simulate`) on threads, memoised by the
design's normalised form in an on-disk cache that later runs reuse. A checkpoint after
every generation lets ``resume=True`` continue an interrupted search; KeyboardInterrupt
ends it early with the best designs so far::

    import heapkit.search as hs
    result = hs.search("app.hkt", "out/", objectives=("work", "footprint"), generations=20, seed=1)
    for design in result.front:
        print(design.spec.name, design.objectives)
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import random
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from deap import base, tools
import moocore
import numpy as np

from heapkit import simulator, surrogate, timemodel
from heapkit.dmm import Spec
from heapkit.grammar import (PRESET_ALTERNATIVES, Grammar, GrammarError, design_from_text, fitted_alternatives,
                             generate_for_trace, mixed_alternatives)

# time: the time model's predicted replay time (heapkit.timemodel, predicted_ns); work: the
# list steps alone, which miss cache misses and page faults (docs/search.md).
OBJECTIVES = ("time", "work", "footprint", "energy")
DEFAULT_OBJECTIVES = ("time", "footprint", "energy")
# How offspring are varied: "subtree", crossover and mutation on the derivation tree
# (subtree_crossover, subtree_mutation); "codon", GE's classic one-point crossover and
# per-codon uniform mutation over the whole genome (--mutation's rate).
OPERATORS = ("subtree", "codon")
INFEASIBLE = 1e30
# The hypervolume's reference point: twice Kingsley's in every objective.
REFERENCE = surrogate.REFERENCE
# How many candidates are made for each offspring the search simulates; the surrogate
# model picks one (docs/search.md, "Screening offspring with a model"). Off (1) by default:
# on the churn trace, whose footprint is in blocks over 64 KiB that the model's size profile
# lumps together, screening lost to random sampling by 0.19 and 0.06 where the search
# without it won.
SCREEN = 1
# The surrogate's ridge penalty: its ranking of held-out designs (Spearman's rho, learnt
# from 24 to 120 designs) was about as good at 1 as at 3, and searches with 1 did better
# on GCBench (two seeds, the one measure where they differed by more than noise).
SURROGATE_RIDGE = 1.0
# How many standard deviations of its prediction the model's value of a candidate is
# lowered by (optimism where it knows little: heapkit.surrogate.Surrogate.optimistic).
SURROGATE_CONFIDENCE = 1.0
# The share of offspring mutated in one setting alone (leaf_mutation) rather than in a
# whole subtree (subtree_mutation): local steps around the designs selected.
LOCAL_MUTATION = 0.5
# Designs needing more steps per operation than this (a long list walked on every free)
# are abandoned: nothing a search would pick, and they could take hours on a large trace.
MAX_STEPS_PER_EVENT = 400
# Pareto local search (refine_front): the share of each generation's offspring made one
# setting or one part away from a design of the front (docs/search.md, "Pareto local
# search"); the first generation's share, then adapted (ADAPTIVE_MINIMUM).
REFINE = 0.25
# With adaptive shares (the default), each generation's offspring are split between the
# three ways of making them (bred, random immigrants, the local search) in proportion to
# how often each one's offspring added to the front's hypervolume lately (probability
# matching, Thierens 2005), each keeping at least this share: no one way suits every
# trace (a fixed half of local steps won espresso and lost CPython's trace, where random
# immigrants found the regions the front needed).
ADAPTIVE_MINIMUM = 0.125
# How much of a way's credit is kept from one generation to the next (the rest is its
# success rate in the latest generation).
ADAPTIVE_MEMORY = 0.5
SOURCES = ("bred", "immigrants", "refine")


@dataclass
class Design:
    spec: Spec
    metrics: dict  # the simulator's figures (SimulationMetrics.to_dict() without the samples)
    genome: Optional[list[int]] = None

    def objective(self, name: str) -> float:
        if self.metrics.get("failed", 0) > 0 or self.metrics.get("abandoned"):
            return INFEASIBLE
        if name == "time":
            return float(self.metrics["predicted_ns"])
        return float({"work": self.metrics["work"], "footprint": self.metrics["peak_footprint"],
                      "energy": self.metrics["energy_nj"]}[name])

    @property
    def objectives(self) -> dict[str, float]:
        return {name: self.objective(name) for name in OBJECTIVES}


@dataclass
class SearchResult:
    front: list[Design]  # non-dominated over everything evaluated, presets included
    presets: dict[str, Design]
    history: list[dict] = field(default_factory=list)  # per generation: hypervolume, best, evaluations, cache hits
    evaluations: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    individuals: int = 0  # genomes evaluated (the initial population and every offspring)
    distinct: int = 0  # distinct designs among them (by normalised spec)
    evaluated: list[Design] = field(default_factory=list)  # those designs, one each (presets included if derived)
    # The trace's threads allocate concurrently: the grammar derived only designs with a
    # heap per thread, and the front holds no preset that would run behind one lock.
    heap_per_thread: bool = False


def _front_presets(presets: dict[str, Design], heap_per_thread: bool) -> list[Design]:
    """The presets that compete for the front: all, or with a heap per thread only the
    thread-aware ones (HKS): the others would run behind one lock, whose cost the simulator
    does not count (docs/search.md)."""
    from heapkit.build import thread_aware

    return [d for d in presets.values() if not heap_per_thread or thread_aware(d.spec)]


# ---- evaluation with an on-disk cache -------------------------------------------------------

def trace_digest(trace: str | Path) -> str:
    h = hashlib.sha256()
    with open(trace, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:24]


class EvaluationCache:
    """Simulation results by (trace, design, energy model), in SQLite: safe across threads
    and processes, and shared by every later search of the same trace."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("CREATE TABLE IF NOT EXISTS evaluations (key TEXT PRIMARY KEY, metrics TEXT NOT NULL)")
        self._db.commit()

    def get(self, key: str) -> Optional[dict]:
        with self._lock:
            row = self._db.execute("SELECT metrics FROM evaluations WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, metrics: dict) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO evaluations VALUES (?, ?)", (key, json.dumps(metrics)))
            self._db.commit()

    def close(self) -> None:
        self._db.close()


@functools.lru_cache(maxsize=1)
def simulator_identity() -> str:
    """A digest of the simulator's compiled code: cached figures are valid for this build only
    (a rebuilt simulator may count differently, and a stale figure would be a wrong prediction)."""
    return hashlib.sha256(Path(simulator._core.__file__).read_bytes()).hexdigest()[:12]


def default_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "heapkit" / "evaluations.sqlite"


class Evaluator:
    def __init__(self, trace: str | Path, cache: EvaluationCache, energy: dict | None = None,
                 threads: int | None = None, reserve_bytes: int = simulator.DEFAULT_RESERVE_BYTES,
                 runner: Optional[Callable[[list[Spec]], list[dict]]] = None):
        self.trace = str(trace)
        self.cache = cache
        self.energy = dict(simulator.DEFAULT_ENERGY, **(energy or {}))
        self.threads = threads or os.cpu_count() or 1
        self.reserve_bytes = reserve_bytes
        # The cached figures depend on the simulator's build, the energy and the time model
        # (predicted_ns).
        self.time_model = timemodel.load()
        models = json.dumps([self.energy, self.time_model.to_dict()["coefficients_ns"]], sort_keys=True)
        self.prefix = (trace_digest(trace) + ":" + simulator_identity() + ":" +
                       hashlib.sha256(models.encode()).hexdigest()[:8])
        self.evaluations = 0
        self.cache_hits = 0
        # How designs are simulated: locally on threads, or (heapkit.cluster) on a Ray cluster.
        self.runner = runner or self._simulate_locally

    def _simulate_locally(self, specs: list[Spec]) -> list[dict]:
        results = simulator.simulate(self.trace, specs, energy=self.energy, reserve_bytes=self.reserve_bytes,
                                     threads=self.threads, max_steps_per_event=MAX_STEPS_PER_EVENT,
                                     time_model=self.time_model)
        return [metrics_record(r) for r in results]

    def evaluate(self, specs: Sequence[Spec]) -> list[dict]:
        """Metrics for each spec, simulating only what the cache does not have (each
        distinct design once)."""
        keys = [f"{self.prefix}:{s.key}" for s in specs]
        found: dict[str, dict] = {}
        missing: dict[str, Spec] = {}
        for key, spec in zip(keys, specs):
            if key in found or key in missing:
                continue
            cached = self.cache.get(key)
            if cached is not None:
                found[key] = cached
                self.cache_hits += 1
            else:
                missing[key] = spec
        if missing:
            for key, metrics in zip(missing, self.runner(list(missing.values()))):
                self.cache.put(key, metrics)
                found[key] = metrics
            self.evaluations += len(missing)
        return [found[k] for k in keys]


def metrics_record(result: simulator.SimulationMetrics) -> dict:
    record = result.to_dict()
    record.pop("footprint_samples", None)
    record.pop("spec", None)
    return record


# ---- grammatical evolution ---------------------------------------------------------------

class _Individual(list):
    fitness: base.Fitness


def _fitness_class(count: int):
    return type("Fitness", (base.Fitness,), {"weights": (-1.0,) * count})


def seed_genomes(grammar: Grammar, fitted: bool = False) -> dict[str, list[int]]:
    """Genomes deriving the presets the grammar expresses as a whole design; with
    ``fitted``, then the page_segregated designs with each class list fitted to the trace
    (:func:`heapkit.grammar.fitted_alternatives`)."""
    seeds = {}
    alternatives = dict(PRESET_ALTERNATIVES)
    if fitted:
        alternatives.update(fitted_alternatives(grammar))
    for name, alternative in alternatives.items():
        genome = grammar.genome_for(alternative)
        if genome is not None:
            seeds[name] = genome
    return seeds


def initial_seeds(grammar: Grammar, population: int, seed_fitted: bool = True) -> list[list[int]]:
    """The genomes a search's first population starts with: the presets; then, with
    ``seed_fitted``, the mixed designs (page-segregated small objects with a best-fit heap
    behind, by size or by lifetime: :func:`heapkit.grammar.mixed_alternatives`), leaving
    room for two at least of the page-segregated designs on fitted class lists, spread
    from the fewest classes to the most; at most half the population."""
    seeds = list(seed_genomes(grammar).values())
    if seed_fitted:
        mixed = [grammar.genome_for(t) for t in mixed_alternatives(grammar).values()]
        seeds += [g for g in mixed if g is not None][:max(0, population // 2 - len(seeds) - 2)]
    fitted = [g for name, g in seed_genomes(grammar, fitted=seed_fitted).items() if name not in PRESET_ALTERNATIVES]
    room = max(0, population // 2 - len(seeds))
    if fitted and room:
        seeds += [fitted[i * len(fitted) // min(room, len(fitted))] for i in range(min(room, len(fitted)))]
    return seeds[:population]


def truncate_by_contribution(individuals: list, k: int, baseline: Sequence[float]) -> list:
    """``k`` of ``individuals`` (DEAP individuals with minimised fitnesses): NSGA-II's fronts
    in order while they fit; of the front that does not, the designs adding most to the
    hypervolume (objectives over ``baseline``'s, reference REFERENCE in each: the box under
    twice Kingsley's, the search's measure), by dropping the one adding least until the
    rest fit (SMS-EMOA's selection; Beume, Naujoks and Emmerich). A design beyond the box
    adds nothing and goes first, the farthest first, however extreme: NSGA-II's crowding
    distance keeps a front's extremes (a region at 4x Kingsley's footprint and the least
    energy) and breeds from them forever, and in three objectives spreads the rest poorly.
    The chosen get NSGA-II's crowding distances for the parents' tournament."""
    base = np.maximum(np.asarray(baseline, dtype=np.float64), 1e-12)
    chosen: list = []
    for front in tools.sortNondominated(individuals, min(k, len(individuals))):
        if len(chosen) + len(front) <= k:
            chosen += front
            continue
        front = list(front)
        while len(front) > k - len(chosen):
            points = np.array([i.fitness.values for i in front]) / base
            inside = (points < REFERENCE).all(axis=1)
            gains = np.zeros(len(front))
            if inside.any():
                gains[inside] = moocore.hv_contributions(points[inside], ref=[REFERENCE] * len(base))
            # The least gain goes; among designs adding nothing, the farthest beyond the box.
            drop = min(range(len(front)), key=lambda i: (gains[i], -float(points[i].max())))
            front.pop(drop)
        chosen += front
        break
    for front in tools.sortNondominated(chosen, len(chosen)):
        tools.emo.assignCrowdingDist(front)
    return chosen


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def non_dominated(designs: Sequence[Design], objectives: Sequence[str]) -> list[Design]:
    """The designs no other design dominates (feasible ones only; one of each point), by
    moocore's O(n log n) sweep."""
    feasible = [d for d in designs if d.objective(objectives[0]) < INFEASIBLE]
    if not feasible:
        return []
    points = np.array([[d.objective(o) for o in objectives] for d in feasible], dtype=float)
    keep = moocore.is_nondominated(points, keep_weakly=False)
    front = [d for d, k in zip(feasible, keep) if k]
    return sorted(front, key=lambda d: [d.objective(o) for o in objectives])


def hypervolume(designs: Sequence[Design], objectives: Sequence[str], baseline: Design) -> float:
    """Of the front normalised to the baseline (Kingsley), against the reference point 2
    in every objective: larger is better."""
    if not designs:
        return 0.0
    points = [[d.objective(o) / max(baseline.objective(o), 1e-12) for o in objectives] for d in designs]
    return surrogate.hypervolume(np.array(points), REFERENCE)


Progress = Callable[[dict], None]


def search(trace: str | Path, out_dir: str | Path, *, grammar: Grammar | None = None,
           objectives: Sequence[str] = DEFAULT_OBJECTIVES, weights: Sequence[float] | None = None,
           population: int = 60, generations: int = 100, mutation: float = 0.02, crossover: float = 0.8,
           seed: int = 1, resume: bool = False, cache: str | Path | None = None, threads: int | None = None,
           energy: dict | None = None, genome_length: tuple[int, int] = (16, 48),
           progress: Progress | None = None, runner: Optional[Callable[[list[Spec]], list[dict]]] = None,
           diverse: bool = True, seed_fitted: bool = True, immigrants: float = 0.25,
           operators: str = "subtree", unique_points: bool = True, screen: int = SCREEN,
           hv_selection: bool = True, refine: float = REFINE, adaptive: bool = True) -> SearchResult:
    """Grammatical evolution of DMM designs for ``trace``; writes ``out_dir/checkpoint.pkl``
    after each generation and returns the front (see the module's docstring). With
    ``diverse`` (the default), every genome of the first population and every offspring
    derives a design the search has not evaluated yet (:func:`make_new`); with
    ``seed_fitted`` (the default), the first population holds, after the presets, the
    page-segregated designs with the class lists fitted to the trace (up to half of it);
    ``immigrants``: the share of each generation's offspring replaced by random genomes;
    ``operators``: OPERATORS; with ``unique_points`` (the default), NSGA-II selects one
    design per point of objective space before any copy; ``screen``: how many candidates
    are made for each offspring, of which the surrogate model (:mod:`heapkit.surrogate`)
    picks the one to simulate (1: every offspring simulated as made); with ``hv_selection`` (the
    default), the last front to fit is cut by hypervolume contribution, not crowding
    distance (:func:`truncate_by_contribution`); ``refine``: the share of offspring made by
    the Pareto local search (:func:`refine_front`); with ``adaptive`` (the default, for
    multi-objective searches), ``immigrants`` and ``refine`` are the first generation's
    shares, later ones follow each way's recent success (:func:`adapt_shares`)."""
    import time

    objectives = tuple(objectives)
    for o in objectives:
        if o not in OBJECTIVES:
            raise ValueError(f"unknown objective '{o}' (any of {', '.join(OBJECTIVES)})")
    if weights is not None and len(weights) != len(objectives):
        raise ValueError(f"{len(weights)} weights for {len(objectives)} objectives")
    if operators not in OPERATORS:
        raise ValueError(f"unknown operators '{operators}' (any of {', '.join(OPERATORS)})")
    if screen < 1:
        raise ValueError("screen must be at least 1 (one candidate per offspring: no screening)")
    if population < 4 or generations < 1:
        raise ValueError("a search needs a population of at least 4 and at least one generation")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    checkpoint_path = out / "checkpoint.pkl"
    grammar = grammar or generate_for_trace(trace)
    heap_per_thread = grammar.heap_per_thread()
    store = EvaluationCache(cache or default_cache_path())
    evaluator = Evaluator(trace, store, energy=energy, threads=threads, runner=runner)
    started = time.monotonic()
    model = surrogate.Surrogate(surrogate.SizeProfile.of_trace(trace), ridge=SURROGATE_RIDGE) if screen > 1 else None

    from heapkit.dmm import preset

    preset_designs = {}
    from heapkit.dmm import PRESETS

    names = [n for n in ("KNG", "FIB", "S10", "EXA", "LEA", "HKS", "ALEA") if n in PRESETS]
    for name, metrics in zip(names, evaluator.evaluate([preset(n) for n in names])):
        preset_designs[name] = Design(preset(name), metrics)
    baseline = preset_designs["KNG"]
    preset_names = {d.spec.key: name for name, d in preset_designs.items()}

    fitness_class = _fitness_class(1 if weights is not None else len(objectives))

    def scored(design: Design) -> tuple[float, ...]:
        values = [design.objective(o) for o in objectives]
        if weights is None:
            return tuple(values)
        if values[0] >= INFEASIBLE:
            return (INFEASIBLE,)
        return (sum(w * v / max(baseline.objective(o), 1e-12) for w, v, o in zip(weights, values, objectives)),)

    archive: dict[str, Design] = {}
    individuals_evaluated = 0
    adaptive = adaptive and weights is None
    shares = {"immigrants": immigrants, "refine": refine}
    shares["bred"] = max(0.0, 1.0 - immigrants - refine)
    credit = dict.fromkeys(SOURCES, 0.0)

    def evaluate_population(individuals: list[_Individual]) -> None:
        nonlocal individuals_evaluated
        individuals_evaluated += len(individuals)
        specs, owners = [], []
        for individual in individuals:
            spec = individual.spec = _design_of(grammar, individual)
            if spec is not None:
                specs.append(spec)
                owners.append(individual)
        for individual in individuals:
            if individual.spec is None:
                individual.fitness.values = (INFEASIBLE,) * len(individual.fitness.weights)
        for individual, metrics in zip(owners, evaluator.evaluate(specs)):
            spec = individual.spec
            name = preset_names.get(spec.key, f"ge-{spec.key[:8]}")
            named = Spec(name=name, description="found by heapkit search", normalized=spec.normalized)
            design = archive.setdefault(spec.key, Design(named, metrics, list(individual)))
            individual.fitness.values = scored(design)

    if resume and checkpoint_path.exists():
        with open(checkpoint_path, "rb") as f:
            state = pickle.load(f)
        if state["settings"] != _settings(objectives, weights, population, mutation, crossover, seed, grammar, diverse, seed_fitted, immigrants, operators, unique_points, screen, hv_selection, refine, adaptive):
            raise ValueError(f"{checkpoint_path} is of a search with other settings: start afresh without --resume")
        rng = random.Random()
        rng.setstate(state["rng"])
        generation, history = state["generation"], state["history"]
        for normalized, name, metrics, genome in state["archive"]:
            spec = Spec(name=name, description="found by heapkit search", normalized=normalized)
            archive[spec.key] = Design(spec, metrics, genome)
        pop = [_make(fitness_class, g) for g in state["population"]]
        evaluate_population(pop)
        evaluator.evaluations += state["evaluations"]
        evaluator.cache_hits += state["cache_hits"]
        individuals_evaluated = state.get("individuals", individuals_evaluated)
        shares, credit = state.get("shares", shares), state.get("credit", credit)
    else:
        rng = random.Random(seed)
        # The presets, then (with seed_fitted) the page-segregated designs with the class
        # lists fitted to the trace, at most half the population: the rest random.
        pop = [_make(fitness_class, g) for g in initial_seeds(grammar, population, seed_fitted)]
        seen = {spec.key for spec in (_design_of(grammar, i) for i in pop) if spec is not None} | set(preset_names)
        while len(pop) < population:
            individual = _make(fitness_class, [rng.randrange(256) for _ in range(rng.randint(*genome_length))])
            if diverse:
                make_new(grammar, individual, seen, rng)
            pop.append(individual)
        evaluate_population(pop)
        generation, history = 0, []

    def select(individuals: list, k: int) -> list:
        if weights is None:
            if not unique_points:
                return tools.selNSGA2(individuals, k)
            # One design per point of objective space: designs that differ only in
            # settings that change nothing on this trace (a cache size it never fills)
            # would otherwise fill the population with copies of one point and leave no
            # room to explore; the copies come last.
            firsts, copies, points = [], [], set()
            for individual in individuals:
                (copies if individual.fitness.values in points else firsts).append(individual)
                points.add(individual.fitness.values)
            chosen = (truncate_by_contribution(firsts, k, [baseline.objective(o) for o in objectives]) if hv_selection
                      else tools.selNSGA2(firsts, min(k, len(firsts))))
            for copy in copies[:k - len(chosen)]:
                copy.fitness.crowding_dist = 0.0
                chosen.append(copy)
            return chosen
        return sorted(individuals, key=lambda i: i.fitness.values[0])[:k]  # elitist (mu + lambda)

    def breed(pop: list, with_immigrants: bool = True) -> list:
        """One offspring per member of the population: tournament, variation, immigrants
        (marked as such)."""
        with _seeded(rng):  # every draw, DEAP's included, from the search's generator
            parents = tools.selTournamentDCD(pop, population) if weights is None and population % 4 == 0 \
                else [random.choice(pop) for _ in range(population)]
            offspring = [_make(fitness_class, list(p)) for p in parents]
            if operators == "subtree":
                for a, b in zip(offspring[::2], offspring[1::2]):
                    if random.random() < crossover:
                        subtree_crossover(grammar, a, b, random)
                for individual in offspring:
                    if random.random() < LOCAL_MUTATION:
                        leaf_mutation(grammar, individual, random)
                    else:
                        subtree_mutation(grammar, individual, random)
            else:
                for a, b in zip(offspring[::2], offspring[1::2]):
                    if random.random() < crossover and len(a) > 1 and len(b) > 1:
                        tools.cxOnePoint(a, b)
                for individual in offspring:
                    tools.mutUniformInt(individual, 0, 255, indpb=mutation)
            # Random immigrants: a share of the offspring replaced by fresh random genomes.
            for index in range(len(offspring)):
                if with_immigrants and shares["immigrants"] and random.random() < shares["immigrants"]:
                    offspring[index] = _make(fitness_class, [random.randrange(256)
                                                             for _ in range(random.randint(*genome_length))])
                    offspring[index].immigrant = True
        return offspring

    def screened(pools: list[list]) -> list:
        """For each offspring slot, the candidate whose objectives the surrogate
        (heapkit.surrogate, fitted to every design simulated so far) predicts add most to
        the front's hypervolume, counting the candidates already picked (so that the picks
        spread along the front), or that come nearest to adding to it; a candidate deriving
        no valid design only when every one of its slot does. A random immigrant is kept
        as drawn: the model knows only what was simulated, and would otherwise turn away
        every mechanism it has seen little of (on GCBench, a region for the small sizes,
        which no early design had tried)."""
        known = [d for d in list(archive.values()) + list(preset_designs.values()) if d.objective(objectives[0]) < INFEASIBLE]
        base = [max(baseline.objective(o), 1e-12) for o in objectives]
        model.fit([d.spec for d in known], np.array([[d.objective(o) / b for o, b in zip(objectives, base)] for d in known]))
        front = non_dominated(list(archive.values()) + _front_presets(preset_designs, heap_per_thread), objectives)
        points = np.array([[d.objective(o) / b for o, b in zip(objectives, base)] for d in front]).reshape(-1, len(objectives))
        chosen = []
        for candidates in zip(*pools):
            if getattr(candidates[0], "immigrant", False):
                chosen.append(candidates[0])
                continue
            specs = [_design_of(grammar, c) for c in candidates]
            valid = [i for i, spec in enumerate(specs) if spec is not None]
            if not valid:
                chosen.append(candidates[0])
                continue
            predicted = model.optimistic([specs[i] for i in valid], SURROGATE_CONFIDENCE)
            if weights is not None:
                best = int(np.argmin(predicted @ np.asarray(weights, dtype=np.float64)))
            else:
                volume = surrogate.hypervolume(points, REFERENCE)
                best = int(np.argmax([surrogate.promise(p, points, volume, REFERENCE) for p in predicted]))
                points = np.vstack([points, predicted[best]])
            chosen.append(candidates[valid[best]])
        return chosen

    interrupted = False
    try:
        while generation < generations:
            pop = select(pop, population)
            # With screening, `screen` candidates for each offspring, made alike (the same
            # operators, immigrants in the same share); the model picks one of each.
            pools = [breed(pop)] + [breed(pop, with_immigrants=False) for _ in range(screen - 1)]
            seen = set(archive) | set(preset_names)
            refined = []
            if shares["refine"] > 0:
                # Pareto local search: a share of the offspring one setting or one part
                # away from the front's designs (refine_front), the rest bred as before.
                front = non_dominated(list(archive.values()), objectives)
                refined = [_make(fitness_class, g) for g in
                           refine_front(grammar, front, [baseline.objective(o) for o in objectives], objectives,
                                        round(shares["refine"] * population), seen, rng)]
                pools = [pool[:population - len(refined)] for pool in pools]
            if diverse:
                # An offspring whose design the search has already evaluated (or another
                # offspring of this generation derives) would cost an evaluation and teach
                # nothing: mutated further until its design is new.
                for pool in pools:
                    for individual in pool:
                        make_new(grammar, individual, seen, rng)
            offspring = (pools[0] if len(pools) == 1 else screened(pools)) + refined
            for individual in refined:
                individual.refined = True
            evaluate_population(offspring)
            pop = pop + offspring
            generation += 1
            front = non_dominated(list(archive.values()) + _front_presets(preset_designs, heap_per_thread), objectives)
            if adaptive:
                made, added = _sources_success(offspring, front, objectives, [baseline.objective(o) for o in objectives])
                shares, credit = adapt_shares(credit, made, added, shares)
            best = min(front, key=lambda d: scored(d)) if front else baseline
            history.append({"generation": generation, "hypervolume": hypervolume(front, objectives, baseline),
                            "front": len(front), "best": {o: best.objective(o) for o in objectives},
                            "evaluations": evaluator.evaluations, "cache_hits": evaluator.cache_hits,
                            "individuals": individuals_evaluated, "distinct": len(archive),
                            "shares": dict(shares),
                            "seconds": time.monotonic() - started})
            with open(checkpoint_path.with_suffix(".tmp"), "wb") as f:
                pickle.dump({"settings": _settings(objectives, weights, population, mutation, crossover, seed, grammar, diverse, seed_fitted, immigrants, operators, unique_points, screen, hv_selection, refine, adaptive),
                             "rng": rng.getstate(), "generation": generation, "history": history,
                             "population": [list(i) for i in pop],
                             "archive": [(d.spec.normalized, d.spec.name, d.metrics, d.genome) for d in archive.values()],
                             "evaluations": evaluator.evaluations, "cache_hits": evaluator.cache_hits,
                             "individuals": individuals_evaluated, "shares": shares, "credit": credit}, f)
            checkpoint_path.with_suffix(".tmp").replace(checkpoint_path)
            if progress is not None:
                progress(history[-1])
    except KeyboardInterrupt:
        interrupted = True
    store.close()
    front = non_dominated(list(archive.values()) + _front_presets(preset_designs, heap_per_thread), objectives)
    if weights is not None:
        front = sorted(front, key=lambda d: scored(d))
    return SearchResult(front=front, presets=preset_designs, history=history, evaluations=evaluator.evaluations,
                        cache_hits=evaluator.cache_hits, seconds=time.monotonic() - started, interrupted=interrupted,
                        individuals=individuals_evaluated, distinct=len(archive), evaluated=list(archive.values()),
                        heap_per_thread=heap_per_thread)


def _sources_success(offspring: Sequence, front: Sequence[Design], objectives: Sequence[str],
                     baseline: Sequence[float]) -> tuple[dict[str, int], dict[str, int]]:
    """How many of ``offspring`` each way made (SOURCES), and how many of those are designs
    of ``front`` adding to its hypervolume (inside the box, not tied with another point)."""
    base = np.maximum(np.asarray(baseline, dtype=np.float64), 1e-12)
    adding = set()
    if front:
        points = np.array([[d.objective(o) for o in objectives] for d in front]) / base
        inside = (points < REFERENCE).all(axis=1)
        if inside.any():
            gains = moocore.hv_contributions(points[inside], ref=[REFERENCE] * len(base))
            adding = {d.spec.key for d, g in zip([d for d, i in zip(front, inside) if i], gains) if g > 0}
    made, added = dict.fromkeys(SOURCES, 0), dict.fromkeys(SOURCES, 0)
    for individual in offspring:
        source = "refine" if getattr(individual, "refined", False) else \
            "immigrants" if getattr(individual, "immigrant", False) else "bred"
        made[source] += 1
        if individual.spec is not None and individual.spec.key in adding:
            added[source] += 1
    return made, added


def adapt_shares(credit: dict[str, float], made: dict[str, int], added: dict[str, int],
                 shares: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """The next generation's shares of offspring for each way of making them (SOURCES) and
    their credits: a way's credit is ADAPTIVE_MEMORY of its last plus the rest times the
    share of its offspring that added to the front this generation (a way that made none
    keeps its credit); the shares follow the credits (probability matching), each at least
    ADAPTIVE_MINIMUM; while no way has credit, the shares stay. A way at a share of 0 (turned
    off: ``--refine 0``) stays off."""
    ways = [s for s in SOURCES if shares.get(s, 0) > 0]
    credit = {s: credit[s] if not made.get(s) else
              ADAPTIVE_MEMORY * credit[s] + (1 - ADAPTIVE_MEMORY) * added.get(s, 0) / made[s] for s in SOURCES}
    total = sum(credit[s] for s in ways)
    if total <= 0:
        return dict(shares), credit
    minimum = min(ADAPTIVE_MINIMUM, 1.0 / len(ways))
    free = 1.0 - minimum * len(ways)
    return {s: minimum + free * credit[s] / total if s in ways else 0.0 for s in SOURCES}, credit


def random_sample(trace: str | Path, count: int, *, seed: int = 1, presets: Sequence[Design] = (),
                  objectives: Sequence[str] = DEFAULT_OBJECTIVES, population: int = 0,
                  cache: str | Path | None = None, grammar: Grammar | None = None,
                  threads: int | None = None, genome_length: tuple[int, int] = (16, 48)) -> list[Design]:
    """The baseline a search must beat: the front of ``count`` distinct valid designs, none
    a preset, and of ``presets``. With ``population``, the designs a search's first
    population starts from come first (:func:`initial_seeds`: the mixed and fitted
    page-segregated seeds), so that both start alike; then random genomes through the
    same grammar, uniformly (docs/search.md, "Does the search beat random sampling?")."""
    grammar = grammar or generate_for_trace(trace)
    rng = random.Random(seed)
    specs, seen = [], {p.spec.key for p in presets}
    for genome in initial_seeds(grammar, population) if population else []:
        spec = _design_of(grammar, genome)
        if spec is not None and spec.key not in seen and len(specs) < count:
            seen.add(spec.key)
            specs.append(spec)
    while len(specs) < count:
        spec = _design_of(grammar, [rng.randrange(256) for _ in range(rng.randint(*genome_length))])
        if spec is not None and spec.key not in seen:
            seen.add(spec.key)
            specs.append(spec)
    store = EvaluationCache(cache or default_cache_path())
    try:
        evaluator = Evaluator(trace, store, threads=threads)
        designs = [Design(s, m) for s, m in zip(specs, evaluator.evaluate(specs))]
    finally:
        store.close()
    return non_dominated(designs + list(presets), objectives)


def confirm(result: SearchResult, trace: str | Path, objectives: Sequence[str], *, cache: str | Path | None = None,
            energy: dict | None = None, threads: int | None = None) -> SearchResult:
    """The front of a search on a sample, re-evaluated on the whole trace (the presets too):
    the designs that stay non-dominated there."""
    store = EvaluationCache(cache or default_cache_path())
    evaluator = Evaluator(trace, store, energy=energy, threads=threads)
    designs = list(result.front) + [d for d in result.presets.values() if d not in result.front]
    confirmed = [Design(d.spec, m, d.genome) for d, m in zip(designs, evaluator.evaluate([d.spec for d in designs]))]
    store.close()
    presets = {name: next(c for c in confirmed if c.spec.key == d.spec.key) for name, d in result.presets.items()}
    excluded = {d.spec.key for d in presets.values()} - {d.spec.key for d in _front_presets(presets, result.heap_per_thread)}
    candidates = [d for d in confirmed if d.spec.key not in excluded]
    return SearchResult(front=non_dominated(candidates, objectives), presets=presets, history=result.history,
                        evaluations=result.evaluations + evaluator.evaluations,
                        cache_hits=result.cache_hits + evaluator.cache_hits, seconds=result.seconds,
                        interrupted=result.interrupted, heap_per_thread=result.heap_per_thread)


def write_front(result: SearchResult, out_dir: str | Path, objectives: Sequence[str],
                references: dict[str, dict[str, float]]) -> dict[str, Path]:
    """OUT/front.json (each design's spec, metrics and DMM map, the history, the references)
    and OUT/specs/NAME.json, one file per design on the front."""
    out = Path(out_dir)
    specs = out / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    designs = []
    for d in result.front:
        path = specs / f"{d.spec.name}.json"
        path.write_text(d.spec.to_json())
        designs.append({"name": d.spec.name, "spec": d.spec.data, "spec_file": str(path), "key": d.spec.key,
                        "objectives": {o: d.objective(o) for o in objectives}, "metrics": d.metrics,
                        "normalized": {ref: {o: d.objective(o) / v[o] for o in objectives if v.get(o)}
                                       for ref, v in references.items()},
                        "genome": d.genome})
    front = out / "front.json"
    front.write_text(json.dumps({"objectives": list(objectives), "designs": designs, "history": result.history,
                                 "references": references, "evaluations": result.evaluations,
                                 "cache_hits": result.cache_hits, "seconds": result.seconds,
                                 "interrupted": result.interrupted,
                                 "presets": {n: {"objectives": d.objectives, "metrics": d.metrics}
                                             for n, d in result.presets.items()}}, indent=1))
    return {"front": front, "specs": specs}


class _seeded:
    """DEAP's operators draw from the global random module: point it at the search's own
    generator for the duration, so a seed reproduces a run."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def __enter__(self):
        self.saved = random.getstate()
        random.setstate(self.rng.getstate())

    def __exit__(self, *exc):
        self.rng.setstate(random.getstate())
        random.setstate(self.saved)


def _design_of(grammar: Grammar, genome: Sequence[int]) -> Spec | None:
    """The valid design a genome derives, or None."""
    text = grammar.derive(genome)
    if text is None:
        return None
    try:
        return design_from_text(text, name="ge")
    except (GrammarError, ValueError, KeyError, TypeError):
        return None


#: How many codons make_new changes, one at a time, before it gives up on a genome.
MAX_FRESH_MUTATIONS = 64


def make_new(grammar: Grammar, genome: list[int], seen: set[str], rng: random.Random) -> bool:
    """Mutates ``genome`` in place, one random codon among those its derivation reads to a
    random value at a time, until it derives a valid design whose key is not in ``seen``
    (then adds it and returns True); after MAX_FRESH_MUTATIONS changes it leaves the genome
    as it is and returns False. A random walk from the offspring, so the new design stays
    near its parents."""
    for _ in range(MAX_FRESH_MUTATIONS + 1):
        spec = _design_of(grammar, genome)
        if spec is not None and spec.key not in seen:
            seen.add(spec.key)
            return True
        if not genome:
            genome.append(0)
        _text, used = grammar.derive_counting(genome)
        genome[rng.randrange(max(1, min(used, len(genome))))] = rng.randrange(256)
    return False


def subtree_crossover(grammar: Grammar, a: list[int], b: list[int], rng: random.Random, tries: int = 8) -> None:
    """Swaps a subtree of one parent's derivation for one of the other's deriving the same
    nonterminal (a part, a general allocator, a policy's value, a whole page_segregated
    heap...): each child keeps everything else its parent derived (the derivation-tree
    crossover of grammar-based GP, on GE's codon blocks). When a derivation wraps around
    its genome, or the parents share no such subtree, a cut among the codons both read
    (:func:`choice_crossover`)."""
    tree_a, tree_b = grammar.subtrees(a), grammar.subtrees(b)
    if tree_a and tree_b:
        nodes = [n for n in tree_a[1:] if n[2] > n[1]]
        for _ in range(tries if nodes else 0):
            symbol, start, end = nodes[rng.randrange(len(nodes))]
            matches = [n for n in tree_b[1:] if n[0] == symbol and b[n[1]:n[2]] != a[start:end]]
            if matches:
                _, b_start, b_end = matches[rng.randrange(len(matches))]
                a[:], b[:] = a[:start] + b[b_start:b_end] + a[end:], b[:b_start] + a[start:end] + b[b_end:]
                return
    choice_crossover(grammar, a, b, rng)


def subtree_mutation(grammar: Grammar, genome: list[int], rng: random.Random) -> None:
    """Another alternative at one choice of the derivation, drawn uniformly among its
    choices, with a random subtree below it; the rest of the derivation unchanged (a
    point mutation of GE reinterprets every codon after a changed choice whose
    alternatives differ in shape). When the derivation wraps, :func:`choice_mutation`."""
    tree = grammar.subtrees(genome)
    nodes = [n for n in tree or [] if len(grammar.rules[n[0]]) > 1]
    if not nodes:
        choice_mutation(grammar, genome, rng)
        return
    symbol, start, end = nodes[rng.randrange(len(nodes))]
    block = grammar.random_subtree(symbol, rng, avoid=genome[start] % len(grammar.rules[symbol]))
    genome[:] = genome[:start] + block + genome[end:]


def leaf_mutation(grammar: Grammar, genome: list[int], rng: random.Random) -> None:
    """Another value for one setting of the design: another alternative at one choice whose
    alternatives are all literal (a bound, a header, a chunk size, a class list, a fit, a
    policy's value), the rest of the design unchanged: a step to a neighbour in the design's
    parameter vector, where :func:`subtree_mutation` may redraw a whole part. When the
    derivation wraps or makes no such choice, :func:`subtree_mutation`."""
    tree = grammar.subtrees(genome)
    leaves = [n for n in tree or [] if len(grammar.rules[n[0]]) > 1 and n[2] - n[1] == 1
              and not any(item.startswith("<") for alternative in grammar.rules[n[0]] for item in alternative)]
    if not leaves:
        subtree_mutation(grammar, genome, rng)
        return
    symbol, start, _ = leaves[rng.randrange(len(leaves))]
    count = len(grammar.rules[symbol])
    old = genome[start] % count
    genome[start] = (old + 1 + rng.randrange(count - 1)) % count + count * rng.randrange(256 // count)


def leaf_neighbours(grammar: Grammar, genome: Sequence[int]) -> list[list[int]]:
    """Every genome one setting away from ``genome``: at each choice whose alternatives are
    all literal (a bound, a header, a chunk size, a class list, a class count, one of
    page_segregated's policies...), each other alternative, the rest of the genome kept
    (so the rest of the design too). Empty when the derivation wraps around the genome."""
    out = []
    for symbol, start, end in grammar.subtrees(genome) or []:
        alternatives = grammar.rules[symbol]
        if len(alternatives) < 2 or end - start != 1 or \
                any(item.startswith("<") for alternative in alternatives for item in alternative):
            continue
        old = genome[start] % len(alternatives)
        for other in range(len(alternatives)):
            if other != old:
                neighbour = list(genome)
                value = genome[start] - old + other
                neighbour[start] = value if value < 256 else value - len(alternatives)
                out.append(neighbour)
    return out


def part_neighbours(grammar: Grammar, genome: Sequence[int], rng: random.Random) -> list[list[int]]:
    """Genomes one part away from ``genome``: at each choice whose alternatives are not all
    literal (how many parts a design has, a part's mechanism, the general allocator, a
    list's structure...), each other alternative, keeping the subtrees of the current one
    that it has too (in order: one part more keeps the design's parts and general
    allocator, one part fewer drops the last part), random choices for the rest; the rest
    of the genome kept. Empty when the derivation wraps around the genome."""
    tree = grammar.derivation_tree(genome)
    if tree is None:
        return []
    out, todo = [], [tree]
    while todo:
        symbol, start, end, children = todo.pop()
        todo.extend(children)
        alternatives = grammar.rules[symbol]
        if len(alternatives) < 2 or \
                not any(item.startswith("<") for alternative in alternatives for item in alternative):
            continue
        old = genome[start] % len(alternatives)
        for other in range(len(alternatives)):
            if other == old:
                continue
            block = [other + len(alternatives) * rng.randrange(256 // len(alternatives))]
            unused = list(children)
            for item in alternatives[other]:
                if not item.startswith("<"):
                    continue
                match = next((c for c in unused if c[0] == item), None)
                if match is not None:
                    unused = unused[unused.index(match) + 1:]
                    block += list(genome[match[1]:match[2]])
                else:
                    block += grammar.random_subtree(item, rng)
            out.append(list(genome[:start]) + block + list(genome[end:]))
    return out


def refine_front(grammar: Grammar, front: Sequence[Design], baseline: Sequence[float], objectives: Sequence[str],
                 count: int, seen: set[str], rng: random.Random) -> list[list[int]]:
    """Up to ``count`` genomes for a Pareto local search around ``front``: each one setting
    away from a design of the front (:func:`leaf_neighbours`), deriving a valid design
    not in ``seen`` (added to it). The front's designs that add to the hypervolume
    (objectives over ``baseline``'s, the search's box) are taken in turn, those adding
    most first, each giving one random neighbour not yet evaluated per turn; the others
    only when those neighbourhoods are spent; until ``count`` are made or every
    neighbourhood is. A step random sampling cannot take: it tries the
    settings next to the best designs found, one at a time."""
    parents = [d for d in front if d.genome]
    if not parents or count <= 0:
        return []
    base = np.maximum(np.asarray(baseline, dtype=np.float64), 1e-12)
    points = np.array([[d.objective(o) for o in objectives] for d in parents]) / base
    inside = (points < REFERENCE).all(axis=1)
    gains = np.zeros(len(parents))
    if inside.any():
        gains[inside] = moocore.hv_contributions(points[inside], ref=[REFERENCE] * len(base))
    pending = {}
    for i in range(len(parents)):
        neighbours = leaf_neighbours(grammar, parents[i].genome) + part_neighbours(grammar, parents[i].genome, rng)
        rng.shuffle(neighbours)
        pending[i] = neighbours
    made: list[list[int]] = []
    # The designs adding to the hypervolume first, in turn; those adding nothing (beyond
    # the box, or tied with another) only once every neighbourhood of the others is spent.
    adding = sorted((i for i in range(len(parents)) if gains[i] > 0), key=lambda i: -gains[i])
    for order in (adding, [i for i in range(len(parents)) if gains[i] <= 0]):
        while len(made) < count and any(pending[i] for i in order):
            for i in order:
                while pending[i]:
                    genome = pending[i].pop()
                    spec = _design_of(grammar, genome)
                    if spec is not None and spec.key not in seen:
                        seen.add(spec.key)
                        made.append(genome)
                        break
                if len(made) == count:
                    break
    return made


def choice_crossover(grammar: Grammar, a: list[int], b: list[int], rng: random.Random) -> None:
    """One-point crossover with the cut among the codons both derivations read: the head
    of one parent's choices with the tail of the other's. (A cut beyond the codons a
    genome reads, as DEAP's cxOnePoint often makes on genomes of 16 to 48 codons, changes
    nothing.)"""
    read = min(len(grammar.choices(a)), len(a), len(grammar.choices(b)), len(b))
    if read < 2:
        return
    cut = rng.randrange(1, read)
    a[cut:], b[cut:] = b[cut:], a[cut:]


def choice_mutation(grammar: Grammar, genome: list[int], rng: random.Random) -> None:
    """Another alternative at one choice of the derivation, drawn uniformly among the
    choices it makes: a leaf's choice (a fit, a policy's value) changes that value alone,
    one nearer the root a whole part. (Per-codon mutation at GE's rates mostly hits codons
    the derivation does not read, and a changed codon keeps its alternative with
    probability 1/k.)"""
    read = grammar.choices(genome)
    if not read:
        return
    index, alternatives = read[rng.randrange(len(read))]
    old = genome[index] % alternatives
    value = genome[index] - old + (old + rng.randrange(1, alternatives)) % alternatives
    genome[index] = value if value < 256 else value - alternatives


def _make(fitness_class, genome: Sequence[int]) -> _Individual:
    individual = _Individual(genome)
    individual.fitness = fitness_class()
    individual.spec = None
    individual.immigrant = False
    individual.refined = False
    return individual


def _settings(objectives, weights, population, mutation, crossover, seed, grammar, diverse=True,
              seed_fitted=True, immigrants=0.0, operators="codon", unique_points=False, screen=1, hv_selection=False,
              refine=0.0, adaptive=False) -> dict:
    return {"objectives": list(objectives), "weights": list(weights) if weights else None, "population": population,
            "mutation": mutation, "crossover": crossover, "seed": seed, "diverse": diverse, "seed_fitted": seed_fitted,
            "immigrants": immigrants, "operators": operators,
            "unique_points": unique_points, "screen": screen, "hv_selection": hv_selection,
            "refine": refine, **({"adaptive": True} if adaptive else {}),
            "grammar": hashlib.sha256(grammar.to_text().encode()).hexdigest()}


__all__ = ["DEFAULT_OBJECTIVES", "Design", "EvaluationCache", "Evaluator", "OBJECTIVES", "OPERATORS", "REFERENCE",
           "SearchResult", "adapt_shares", "choice_crossover", "choice_mutation", "confirm", "default_cache_path", "dominates",
           "hypervolume", "make_new", "non_dominated", "leaf_mutation", "leaf_neighbours", "part_neighbours",
           "random_sample", "refine_front", "search", "truncate_by_contribution", "seed_genomes", "subtree_crossover",
           "subtree_mutation", "write_front"]
