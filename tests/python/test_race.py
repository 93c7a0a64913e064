"""heapkit.race: the statistical rule on made-up measurements (deterministic), and races of
real processes: a deliberately slowed malloc against glibc, glibc against itself."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from heapkit import race as hr


def test_median_interval_has_the_binomial_coverage():
    # n = 5 cannot reach 95% (the widest interval covers 1 - 2/32 = 93.75%)...
    assert hr.median_interval([1, 2, 3, 4, 5], 0.95) == (-math.inf, math.inf)
    # ...n = 6 can, with the extremes (1 - 2/64 = 96.9%).
    assert hr.median_interval([6, 1, 5, 2, 4, 3], 0.95) == (1, 6)
    # n = 20: P(B <= 5) = 2.07% <= 2.5% < P(B <= 6) = 5.77%: the 6th and 15th values.
    assert hr.median_interval(list(range(20)), 0.95) == (5, 14)
    assert hr.median_interval(list(range(20)), 0.80) == (6, 13)


def test_compare_separates_ties_and_stays_open():
    fast, slow = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98], [1.5, 1.52, 1.49, 1.5, 1.51, 1.48]
    assert hr.compare_samples(fast, slow, "cpu_seconds", 0.02, 0.95).outcome == "less"
    assert hr.compare_samples(slow, fast, "cpu_seconds", 0.02, 0.95).outcome == "greater"
    same = [1.0, 1.005, 0.995, 1.0, 1.004, 0.996]
    assert hr.compare_samples(fast[:1] * 6, same, "cpu_seconds", 0.02, 0.95).outcome == "tied"
    # 1% apart on every run, well measured: within the 2% margin, so tied, not separated.
    assert hr.compare_samples([1.01] * 8, [1.0] * 8, "cpu_seconds", 0.02, 0.95).outcome == "tied"
    # Noise as large as the difference: open.
    noisy_a, noisy_b = [1.0, 1.3, 0.8, 1.2, 0.9, 1.1], [1.1, 0.9, 1.2, 0.8, 1.3, 1.0]
    assert hr.compare_samples(noisy_a, noisy_b, "cpu_seconds", 0.02, 0.95).outcome == "open"
    c = hr.compare_samples(fast, slow, "cpu_seconds", 0.02, 0.95)
    assert c.low <= c.ratio <= c.high and c.high < 1 and c.rounds == 6


def _noisy(figures: dict[str, tuple[float, int]], noise: float, seed: int = 3):
    """A measure drawing each run from a contender's true (time, RSS) with multiplicative noise."""
    rng = random.Random(seed)

    def measure(contender: hr.Contender) -> hr.Sample:
        seconds, rss = figures[contender.name]
        return hr.Sample(seconds * math.exp(rng.gauss(0, noise)), int(rss * math.exp(rng.gauss(0, noise / 10))))

    return measure


def test_a_race_eliminates_the_dominated_and_keeps_the_front():
    figures = {"fast": (1.0, 120 << 20), "small": (1.6, 80 << 20), "twin": (1.0, 120 << 20), "slow": (2.0, 150 << 20)}
    contenders = [hr.Contender(n, None, "peer") for n in figures]
    result = hr.race(contenders, _noisy(figures, 0.03), hr.RaceSettings(min_rounds=6, max_rounds=30))
    assert result.standing("slow").eliminated and "dominated by" in result.standing("slow").eliminated
    assert len(result.standing("slow").runs()) < result.rounds  # it stopped being run
    assert {s.name for s in result.front()} == {"fast", "small", "twin"}
    assert result.compare("fast", "twin", "cpu_seconds").outcome in ("tied", "open")
    assert result.compare("fast", "small", "cpu_seconds").outcome == "less"
    assert result.compare("small", "fast", "peak_rss").outcome == "less"
    # Round trip through the JSON tune keeps.
    again = hr.RaceResult.from_dict(result.to_dict())
    assert [s.name for s in again.front()] == [s.name for s in result.front()]


def test_a_race_stops_once_every_pair_is_decided_and_keeps_to_its_budget():
    figures = {"a": (1.0, 100 << 20), "b": (3.0, 300 << 20)}
    contenders = [hr.Contender(n) for n in figures]
    settings = hr.RaceSettings(min_rounds=6, max_rounds=30)
    result = hr.race(contenders, _noisy(figures, 0.01), settings)
    assert result.rounds == settings.looks()[0] == 8 and result.standing("b").eliminated
    slow = hr.RaceSettings(min_rounds=2, max_rounds=50, budget_seconds=0.3)

    def sleepy(contender: hr.Contender) -> hr.Sample:
        import time

        time.sleep(0.01)
        return hr.Sample(1.0 + random.random(), 100)  # never decided: only the budget ends it

    result = hr.race([hr.Contender("x"), hr.Contender("y")], sleepy, slow)
    assert slow.looks()[0] <= result.rounds < 50 and result.seconds < 0.6


def test_looks_split_the_error_between_them():
    settings = hr.RaceSettings()
    assert settings.looks() == [8, 11, 15, 20]
    assert settings.decision_confidence() == pytest.approx(1 - 0.05 / 4)
    # The first look is the first round whose widest interval reaches that confidence.
    assert hr.median_interval(list(range(8)), settings.decision_confidence()) == (0, 7)
    assert hr.median_interval(list(range(7)), settings.decision_confidence()) == (-math.inf, math.inf)
    assert hr.RaceSettings(min_rounds=6, max_rounds=6).looks() == [6]


def test_a_run_that_differs_from_the_reference_is_disqualified():
    def measure(contender: hr.Contender) -> hr.Sample:
        return {"glibc": hr.Sample(1.0, 100, status=0, output="ok"), "crashes": hr.Sample(0.5, 50, status=-11),
                "wrong": hr.Sample(0.5, 50, output="bad"), "good": hr.Sample(0.9, 90, output="ok")}[contender.name]

    contenders = [hr.Contender(n) for n in ("glibc", "crashes", "wrong", "good")]
    result = hr.race(contenders, measure, hr.RaceSettings(min_rounds=6, max_rounds=6), reference="glibc")
    assert "signal 11" in result.standing("crashes").disqualified
    assert "output differs" in result.standing("wrong").disqualified
    assert [s.name for s in result.front()] == ["good"]  # faster and smaller than glibc: it alone is the front


def test_a_race_separates_a_slowed_malloc_from_glibc_and_ties_glibc_with_itself(programs, slow_malloc):
    measure = hr.program_measure([str(programs["churn"]), "60000"])
    contenders = [hr.Contender("glibc"), hr.Contender("glibc-again"), hr.Contender("slowed", slow_malloc)]
    # A margin wide enough for a machine other engineers share (the slowed malloc is far
    # beyond it), and a confidence that makes a false separation of the twins a 1-in-1000
    # event rather than the race's default 1 in 20 (this test must not flake).
    settings = hr.RaceSettings(min_rounds=6, max_rounds=16, time_margin=0.08, rss_margin=0.02, confidence=0.999)
    result = hr.race(contenders, measure, settings, reference="glibc")
    slowed = result.compare("slowed", "glibc", "cpu_seconds")
    assert slowed.outcome == "greater" and slowed.ratio > 1.2, slowed
    assert result.compare("glibc-again", "glibc", "cpu_seconds").outcome in ("tied", "open")
    assert result.compare("glibc-again", "glibc", "peak_rss").outcome == "tied"
    assert "slowed" not in {s.name for s in result.front()}
    assert not result.standing("slowed").disqualified  # same output, same status: only slower


def test_measuring_a_program_reports_its_own_peak_not_pythons(programs):
    sample, output = hr.run_measured([str(programs["known"])], hr.preload_env(None))
    assert sample.status == 0 and sample.cpu_seconds >= 0
    # The Python running this test holds tens of MiB; a small C program holds a few.
    import resource

    assert sample.peak_rss < resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2
    killed, _ = hr.run_measured(["sh", "-c", "kill -9 $$"], hr.preload_env(None))
    assert killed.status == -9
    failed, _ = hr.run_measured(["sh", "-c", "exit 3"], hr.preload_env(None))
    assert failed.status == 3


def test_spearman():
    assert hr.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert hr.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(hr.spearman([1, 2], [1, 2]))


def test_replay_measure_gives_cpu_time_and_rss(churn_trace):
    sample = hr.replay_measure(churn_trace)(hr.Contender("glibc"))
    assert sample.cpu_seconds > 0 and sample.peak_rss > 0
    lib = hr.peer_library("lea")
    assert lib is not None and Path(lib).is_file()
