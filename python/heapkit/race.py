"""Racing allocators: which of several runs a program (or replays a trace) fastest and with
the least memory, and what the measurements can and cannot tell apart.

A race runs in rounds. Each round measures once every contender that has not stopped (below), in an
order shuffled afresh (so a slow spell of a shared machine, or a position effect, falls
on all of them alike). Two figures come from each run: the CPU time (user + system) of the
process and of every process it waited for, and the peak resident set. Both are compared
pair by pair, over the rounds the two contenders shared, as ratios a/b:

- the **median of the paired ratios** estimates how a compares with b;
- its **distribution-free confidence interval** comes from the order statistics of the
  ratios (the binomial interval for a median: exact coverage of at least ``confidence``
  whatever the noise's distribution, and no resampling);
- the pair is **tied** on that axis when the whole interval lies within ``1 ± margin``,
  **less** (or greater) when it lies below (above) 1, and **open** otherwise.

a **dominates** b when a is less or tied on both axes and less on one. The race looks at
the evidence after a few rounds only (8, 11, 15 and 20 by default:
:meth:`RaceSettings.looks`), each look's intervals at a confidence that splits
``1 - confidence`` between the looks, so that looking repeatedly does not make a wrong
separation of a pair likelier than ``1 - confidence`` over the whole race.

At each look every contender's standing is decided afresh from all the rounds so far: one
that another dominates is **set aside** (``Standing.eliminated`` says by whom), one that
none dominates is on the front, and a contender set aside at an earlier look that no other
dominates any more (an unlucky start) is **re-admitted** (``Standing.readmitted``). While
the budget lets every contender run to the last round, set-aside contenders keep being
measured: every median is then over the same rounds (a drift in the machine's speed
during the race falls on all of them alike) and a wrong early verdict can be undone. Only
when the budget cannot run them all to the last round do the set-aside contenders **stop**
for real (as in irace/F-race: the runs go to the contenders still in question;
``Standing.stopped_after``); a stopped contender is never re-admitted (its pairs' shared
rounds no longer change). The race ends at a look where every pair of undominated
contenders is decided on both axes, or at ``max_rounds``, or when the next round would
overrun ``budget_seconds`` (after the first look; the round it stops at is then the last
look, in place of the looks it did not reach). The **measured front** is the contenders no
other dominates at the last look. A pair truly within the margin is called tied, not
separated, once the interval is narrow enough.

Every decision is taken on the data of the race and can be checked from it:
``RaceResult.to_dict()`` keeps every run.

::

    from heapkit import race
    contenders = [race.Contender("glibc"), race.Contender("mimalloc", race.peer_library("mimalloc"))]
    result = race.race(contenders, race.program_measure(["./app", "input"]))
    for s in result.front():
        print(s.name, s.cpu_seconds, s.peak_rss)
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

AXES = ("cpu_seconds", "peak_rss")
AXIS_NAMES = {"cpu_seconds": "CPU time", "peak_rss": "peak RSS"}
OUTCOMES = ("less", "greater", "tied", "open")


class RaceError(RuntimeError):
    pass


@dataclass(frozen=True)
class Contender:
    """One allocator in a race: ``library`` is preloaded (None: the C library's malloc)."""

    name: str
    library: Optional[Path] = None
    kind: str = "peer"  # "peer": an allocator off the shelf; "design": one heapkit built for this program

    def to_dict(self) -> dict:
        return {"name": self.name, "library": str(self.library) if self.library else None, "kind": self.kind}

    @classmethod
    def from_dict(cls, d: dict) -> "Contender":
        return cls(d["name"], Path(d["library"]) if d.get("library") else None, d.get("kind", "peer"))


@dataclass(frozen=True)
class Sample:
    """One run: CPU time (user + system, the processes it waited for included), the peak
    resident set in bytes, wall time, exit status (-N: ended by signal N) and a digest of
    what it wrote on its standard output."""

    cpu_seconds: float
    peak_rss: int
    wall_seconds: float = 0.0
    status: int = 0
    output: str = ""

    def value(self, axis: str) -> float:
        return float(getattr(self, axis))


Measure = Callable[[Contender], Sample]


@dataclass(frozen=True)
class RaceSettings:
    min_rounds: int = 8  # the first look at the evidence (later if no interval is possible by then)
    max_rounds: int = 20
    budget_seconds: Optional[float] = None  # wall time of the race; the first look's rounds always run
    confidence: float = 0.95  # per pair and axis, over all of the race's looks
    time_margin: float = 0.02  # CPU times within 2% of each other are tied (when the interval says so)
    rss_margin: float = 0.01
    seed: int = 1

    def margin(self, axis: str) -> float:
        return self.time_margin if axis == "cpu_seconds" else self.rss_margin

    def looks(self) -> list[int]:
        """The rounds after which the race looks at the evidence: from the first round the
        per-look interval exists (and min_rounds), each look about 1.35 times the rounds of
        the one before, and the last round. Looking only there, with the error split
        between the looks, keeps the chance of any wrong separation of a pair over the
        whole race within 1 - confidence."""
        count = 1
        for _ in range(8):  # the per-look confidence depends on the number of looks, and back
            per_look = 1.0 - (1.0 - self.confidence) / count
            first = max(self.min_rounds, _rounds_for(per_look))
            looks = [first] if first <= self.max_rounds else [self.max_rounds]
            while looks[-1] < self.max_rounds:
                looks.append(min(self.max_rounds, max(looks[-1] + 1, math.ceil(looks[-1] * 1.35))))
            if len(looks) == count:
                break
            count = len(looks)
        return looks

    def decision_confidence(self) -> float:
        """The confidence of each look's intervals (Bonferroni over the looks)."""
        return 1.0 - (1.0 - self.confidence) / len(self.looks())

    def rule(self) -> str:
        return (f"interleaved rounds in a random order; per pair, the median of the paired ratios with its "
                f"{self.decision_confidence():.1%} distribution-free interval (order statistics) at rounds "
                f"{', '.join(map(str, self.looks()))} ({self.confidence:.0%} over the race); tied when the interval is "
                f"within ±{self.time_margin:.0%} (CPU time) or ±{self.rss_margin:.0%} (peak RSS), separated when it "
                f"excludes 1; at each look a contender another dominates is set aside, and re-admitted at a later look "
                f"where none does; set-aside contenders are measured to the end unless the budget cannot run every "
                f"contender to the last round, when they stop"
                + (f"; {self.budget_seconds:.0f} s budget" if self.budget_seconds else ""))


def _rounds_for(confidence: float) -> int:
    """The fewest paired runs whose widest median interval (min to max) covers ``confidence``."""
    n = 1
    while 1.0 - 2.0 ** (1 - n) < confidence:
        n += 1
    return n


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b`` on one axis, over the rounds both ran."""

    axis: str
    a: str
    b: str
    rounds: int
    ratio: float  # median of the paired ratios a/b
    low: float  # the interval of that median
    high: float
    outcome: str  # "less" (a below b), "greater", "tied" or "open"


def median_interval(values: Sequence[float], confidence: float) -> tuple[float, float]:
    """The distribution-free interval of the median: order statistics x_(k) and x_(n+1-k)
    with the largest k whose coverage, 1 - 2 P(Binomial(n, 1/2) < k), is at least
    ``confidence``. Infinite when n is too small for any k."""
    n = len(values)
    ordered = sorted(values)
    alpha = (1.0 - confidence) / 2.0
    tail, k = 0.0, 0
    for j in range(n // 2 + 1):  # tail = P(B <= j - 1) while trying k = j
        if j > 0:
            tail += math.comb(n, j - 1) / 2.0 ** n
        if j >= 1 and tail <= alpha:
            k = j
        elif j >= 1:
            break
    if k == 0:
        return -math.inf, math.inf
    return ordered[k - 1], ordered[n - k]


def compare_samples(a: Sequence[float], b: Sequence[float], axis: str, margin: float, confidence: float,
                    names: tuple[str, str] = ("a", "b")) -> Comparison:
    """Paired values (round by round) of two contenders on one axis."""
    logs = [math.log(x / y) for x, y in zip(a, b) if x > 0 and y > 0]
    if not logs:
        return Comparison(axis, names[0], names[1], 0, math.nan, -math.inf, math.inf, "open")
    low, high = median_interval(logs, confidence)
    bound = math.log1p(margin)
    if -bound <= low and high <= bound:
        outcome = "tied"
    elif high < 0:
        outcome = "less"
    elif low > 0:
        outcome = "greater"
    else:
        outcome = "open"
    return Comparison(axis, names[0], names[1], len(logs), math.exp(statistics.median(logs)),
                      math.exp(low) if low > -math.inf else 0.0, math.exp(high) if high < math.inf else math.inf,
                      outcome)


@dataclass
class Standing:
    contender: Contender
    samples: list[Optional[Sample]] = field(default_factory=list)  # by round; None when not measured in it
    eliminated: Optional[str] = None  # set aside at the last look: by whom it was dominated (None: undominated)
    disqualified: Optional[str] = None  # a run that differs from the reference's: never on the front
    stopped_after: Optional[int] = None  # the round after which it was no longer measured (None: to the end)
    readmitted: list[int] = field(default_factory=list)  # the looks at which a set-aside contender came back

    @property
    def name(self) -> str:
        return self.contender.name

    @property
    def kind(self) -> str:
        return self.contender.kind

    def runs(self) -> list[Sample]:
        return [s for s in self.samples if s is not None]

    def values(self, axis: str) -> list[float]:
        return [s.value(axis) for s in self.runs()]

    def median(self, axis: str) -> float:
        values = self.values(axis)
        return statistics.median(values) if values else math.nan

    def spread(self, axis: str) -> tuple[float, float]:
        values = self.values(axis)
        return (min(values), max(values)) if values else (math.nan, math.nan)

    @property
    def cpu_seconds(self) -> float:
        return self.median("cpu_seconds")

    @property
    def peak_rss(self) -> int:
        return int(self.median("peak_rss"))

    @property
    def wall_seconds(self) -> float:
        return self.median("wall_seconds")


@dataclass
class RaceResult:
    standings: list[Standing]
    settings: RaceSettings = field(default_factory=RaceSettings)
    rounds: int = 0
    seconds: float = 0.0
    reference: Optional[str] = None
    output_checked: bool = True  # False when the reference's own output varied between runs

    def standing(self, name: str) -> Standing:
        for s in self.standings:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.standings]

    def compare(self, a: str, b: str, axis: str) -> Comparison:
        """``a`` against ``b`` on ``axis`` over the rounds both ran."""
        sa, sb = self.standing(a), self.standing(b)
        pairs = [(x.value(axis), y.value(axis)) for x, y in zip(sa.samples, sb.samples) if x is not None and y is not None]
        return compare_samples([p[0] for p in pairs], [p[1] for p in pairs], axis, self.settings.margin(axis),
                               self.settings.decision_confidence(), (a, b))

    def dominates(self, a: str, b: str) -> bool:
        """Whether the measurements show ``a`` at least as good as ``b`` on both axes (less
        or tied) and better on one."""
        if a == b or self.standing(a).disqualified:
            return False
        outcomes = [self.compare(a, b, axis).outcome for axis in AXES]
        return all(o in ("less", "tied") for o in outcomes) and "less" in outcomes

    def dominated_by(self, name: str) -> list[str]:
        return [s.name for s in self.standings if self.dominates(s.name, name)]

    def front(self) -> list[Standing]:
        """The measured front: every contender that ran as the reference did and that no
        other dominates, fastest first. A contender stopped for the budget is not on it: its
        standing was final when it stopped, and its medians cover fewer rounds than the
        others' (even when what dominated it was disqualified later)."""
        eligible = [s for s in self.standings if not s.disqualified and s.runs()]
        front = [s for s in eligible if s.stopped_after is None
                 and not any(self.dominates(o.name, s.name) for o in eligible)]
        return sorted(front, key=lambda s: (s.cpu_seconds, s.peak_rss))

    def open_pairs(self, names: Optional[Iterable[str]] = None) -> list[Comparison]:
        """Pairs (of ``names``, default every contender still racing) the race left undecided."""
        chosen = list(names) if names is not None else [s.name for s in self.standings if s.eliminated is None
                                                         and not s.disqualified]
        found = []
        for i, a in enumerate(chosen):
            for b in chosen[i + 1:]:
                for axis in AXES:
                    c = self.compare(a, b, axis)
                    if c.outcome == "open":
                        found.append(c)
        return found

    def to_dict(self) -> dict:
        return {"settings": asdict(self.settings), "rule": self.settings.rule(), "rounds": self.rounds,
                "seconds": self.seconds, "reference": self.reference, "output_checked": self.output_checked,
                "standings": [{"contender": s.contender.to_dict(), "eliminated": s.eliminated,
                               "disqualified": s.disqualified, "stopped_after": s.stopped_after,
                               "readmitted": s.readmitted,
                               "samples": [asdict(x) if x is not None else None for x in s.samples]}
                              for s in self.standings]}

    @classmethod
    def from_dict(cls, d: dict) -> "RaceResult":
        standings = [Standing(Contender.from_dict(s["contender"]),
                              [Sample(**x) if x is not None else None for x in s["samples"]], s.get("eliminated"),
                              s.get("disqualified"), s.get("stopped_after"), list(s.get("readmitted", [])))
                     for s in d["standings"]]
        return cls(standings, RaceSettings(**d["settings"]), d["rounds"], d["seconds"], d.get("reference"),
                   d.get("output_checked", True))


RoundProgress = Callable[[int, "RaceResult"], None]


def race(contenders: Sequence[Contender], measure: Measure, settings: RaceSettings = RaceSettings(), *,
         reference: Optional[str] = None, keep: Iterable[str] = (), on_round: Optional[RoundProgress] = None,
         on_run: Optional[Callable[[Contender], None]] = None) -> RaceResult:
    """Races ``contenders`` with ``measure`` (see the module's docstring). ``reference``
    names the contender whose exit status (and output, while its own output is the same
    from run to run) every other must reproduce, or be disqualified; ``keep`` names
    contenders that stay in the race whatever the measurements say."""
    names = [c.name for c in contenders]
    if len(set(names)) != len(names):
        raise RaceError(f"two contenders share a name: {names}")
    if not contenders:
        raise RaceError("a race needs contenders")
    if settings.min_rounds < 1 or settings.max_rounds < settings.min_rounds:
        raise RaceError("a race needs 1 <= min_rounds <= max_rounds")
    if reference is not None and reference not in names:
        raise RaceError(f"the reference {reference!r} is not a contender")
    keep = set(keep) | ({reference} if reference else set())
    result = RaceResult([Standing(c) for c in contenders], settings, reference=reference)
    rng = random.Random(settings.seed)
    started = time.monotonic()
    reference_outputs: set[str] = set()
    looks = set(settings.looks())
    runs = 0
    for round_number in range(1, settings.max_rounds + 1):
        order = [s for s in result.standings if s.stopped_after is None and not s.disqualified]
        rng.shuffle(order)
        measured: dict[str, Sample] = {}
        for s in order:
            if on_run:
                on_run(s.contender)
            measured[s.name] = measure(s.contender)
        runs += len(order)
        for s in result.standings:
            s.samples.append(measured.get(s.name))
        result.rounds = round_number
        if reference is not None:
            _check_against_reference(result, measured, reference, reference_outputs)
        result.seconds = time.monotonic() - started
        over_budget = False
        if settings.budget_seconds is not None and round_number >= min(looks):
            per_round = result.seconds / round_number
            over_budget = result.seconds + per_round > settings.budget_seconds
        if round_number in looks or over_budget or round_number == settings.max_rounds:
            # Can every contender still measured run to the last round within the budget?
            still = sum(1 for s in result.standings if s.stopped_after is None and not s.disqualified)
            per_run = result.seconds / max(runs, 1)
            afford = settings.budget_seconds is None or \
                result.seconds + per_run * still * (settings.max_rounds - round_number) <= settings.budget_seconds
            _look(result, keep, round_number, stop_set_aside=not afford)
        if on_round:
            on_round(round_number, result)
        if over_budget or (round_number in looks and not result.open_pairs()):
            break
    for s in result.standings:
        if s.stopped_after == result.rounds:
            s.stopped_after = None  # set aside at the race's last look: it ran every round
    result.seconds = time.monotonic() - started
    return result


def _check_against_reference(result: RaceResult, measured: dict[str, Sample], reference: str,
                             outputs: set[str]) -> None:
    ref = measured[reference]
    outputs.add(ref.output)
    result.output_checked = len(outputs) == 1
    for name, sample in measured.items():
        s = result.standing(name)
        if name == reference or s.disqualified:
            continue
        if sample.status != ref.status:
            s.disqualified = f"exit status {_status(sample.status)} where {reference} gave {_status(ref.status)}"
        elif result.output_checked and sample.output != ref.output:
            s.disqualified = f"its output differs from {reference}'s"
    if not result.output_checked:
        # The reference's own output varies: outputs prove nothing; only exit statuses count.
        for s in result.standings:
            if s.disqualified and s.disqualified.startswith("its output"):
                s.disqualified = None


def _status(status: int) -> str:
    return f"signal {-status}" if status < 0 else str(status)


def _look(result: RaceResult, keep: set[str], round_number: int, stop_set_aside: bool) -> None:
    """A look at the evidence: every contender's standing decided afresh from all the rounds
    so far (set aside when another dominates it, re-admitted when none does any more); with
    ``stop_set_aside``, the set-aside contenders stop being measured (``keep`` never does)."""
    eligible = [s for s in result.standings if not s.disqualified and s.runs()]
    for s in eligible:
        if s.stopped_after is not None:
            continue  # its shared rounds no longer change: its standing is final
        by = [o.name for o in eligible if o is not s and result.dominates(o.name, s.name)]
        if by:
            previous = s.eliminated.split(" after ")[0].removeprefix("dominated by ") if s.eliminated else None
            if previous not in by:
                s.eliminated = f"dominated by {by[0]} after {round_number} rounds"
        elif s.eliminated is not None:
            s.eliminated = None
            s.readmitted.append(round_number)
    if stop_set_aside:
        for s in eligible:
            if s.eliminated is not None and s.stopped_after is None and s.name not in keep:
                s.stopped_after = round_number


# ---- measuring a program or a replay ----------------------------------------------------------

_TIME = "/usr/bin/time"


def run_measured(command: Sequence[str], env: dict[str, str], *, cwd: Optional[str | Path] = None,
                 timeout: Optional[float] = None, keep_output: bool = True) -> tuple[Sample, bytes]:
    """Runs ``command`` once and measures it. GNU time starts it, so the peak resident set
    is the command's own (a process forked from this Python one would start from Python's
    resident set: the kernel carries a process's peak across exec), taken by wait4 as the
    largest of the processes the command waited for; the CPU time is wait4's user + system
    of the whole tree (GNU time's own, well under a millisecond, included)."""
    if not Path(_TIME).is_file():
        raise RaceError(f"{_TIME} (GNU time, Debian package 'time') is needed to measure a program's peak RSS")
    with tempfile.TemporaryDirectory(prefix="heapkit-race-") as folder:
        figures = Path(folder) / "time"
        stdout = Path(folder) / "out"
        with open(stdout, "wb") as out, open(os.devnull, "wb") as devnull:
            start = time.monotonic()
            process = subprocess.Popen([_TIME, "-f", "%M %x", "-o", str(figures), *command], env=env, cwd=cwd,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=devnull)
            deadline = None if timeout is None else start + timeout
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG if deadline else 0)
                if pid:
                    break
                if time.monotonic() > deadline:
                    process.kill()
                    os.wait4(process.pid, 0)
                    raise RaceError(f"{' '.join(command)} ran longer than {timeout:.0f} s")
                time.sleep(0.005)
            wall = time.monotonic() - start
            process.returncode = os.waitstatus_to_exitcode(status)
        lines = figures.read_text().split("\n") if figures.exists() else []
        peak_kib, code = _time_figures(lines)
        if "Command terminated by signal" in "\n".join(lines):
            code = -int("\n".join(lines).split("Command terminated by signal")[1].split()[0])
        output = stdout.read_bytes() if keep_output else b""
    digest = hashlib.sha256(output).hexdigest()[:16]
    return Sample(usage.ru_utime + usage.ru_stime, peak_kib * 1024, wall, code, digest), output


def _time_figures(lines: list[str]) -> tuple[int, int]:
    for line in reversed(lines):
        parts = line.split()
        if len(parts) == 2 and all(p.lstrip("-").isdigit() for p in parts):
            return int(parts[0]), int(parts[1])
    raise RaceError("GNU time reported no figures for the run")


def preload_env(library: Optional[Path], base: Optional[dict[str, str]] = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.pop("LD_PRELOAD", None)
    if library is not None:
        env["LD_PRELOAD"] = str(library)
    return env


def program_measure(command: Sequence[str], *, cwd: Optional[str | Path] = None, timeout: Optional[float] = None,
                    env: Optional[dict[str, str]] = None) -> Measure:
    """Measures ``command`` (all the processes it starts) under each contender's library."""
    command = [str(c) for c in command]

    def measure(contender: Contender) -> Sample:
        return run_measured(command, preload_env(contender.library, env), cwd=cwd, timeout=timeout)[0]

    return measure


def replay_measure(trace: str | Path, touch: bool = True) -> Measure:
    """Measures ``heapkit-replay TRACE`` under each contender's library: the replayer's
    process CPU time (decoding the trace, the same for every allocator, included) and, as
    the memory axis, the growth of its resident set during the replay (its peak minus the
    resident set before it: the allocator's footprint, every page of every object touched,
    without the decoded trace that would otherwise dwarf it)."""
    from heapkit.replay import replay_once

    def measure(contender: Contender) -> Sample:
        run = replay_once(trace, contender.library, touch=touch)
        return Sample(run.cpu_seconds, run.footprint_bytes, run.seconds, 0, "")

    return measure


def peer_library(name: str) -> Optional[Path]:
    """The library of a peer allocator by name (see :data:`heapkit.replay.ALLOCATORS`)."""
    from heapkit.replay import resolve_allocator

    return resolve_allocator(name)


#: The allocators off the shelf heapkit tune races: glibc, the Debian packages of jemalloc,
#: mimalloc and tcmalloc, and heapkit's own libheapkit.so and libheapkit-lea.so.
DEFAULT_PEERS = ("glibc", "jemalloc", "mimalloc", "tcmalloc", "heapkit", "lea")


def available_peers(names: Sequence[str]) -> tuple[list[Contender], list[str]]:
    """The peers among ``names`` installed here, and those missing. An unknown name is a
    ValueError naming the known ones."""
    found, missing = [], []
    for name in names:
        try:
            found.append(Contender(name, peer_library(name), "peer"))
        except FileNotFoundError:
            missing.append(name)
    return found, missing


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); nan for fewer than 3 pairs."""
    if len(x) != len(y) or len(x) < 3:
        return math.nan

    def ranks(v: Sequence[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r

    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return num / den if den else math.nan


__all__ = ["AXES", "Comparison", "Contender", "DEFAULT_PEERS", "Measure", "RaceError", "RaceResult", "RaceSettings", "Sample",
           "Standing", "available_peers", "compare_samples", "median_interval", "peer_library", "preload_env",
           "program_measure", "race", "replay_measure", "run_measured", "spearman"]
