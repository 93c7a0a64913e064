"""The recommendation rule on hand-made measurement tables: never a dominated point, a peer
when it dominates every built design, --prefer picking as documented."""

from __future__ import annotations

import random

import pytest

from heapkit import race as hr
from heapkit.recommend import PREFERENCES, recommend


def table(rows: dict[str, tuple[str, float, float]], rounds: int = 8, noise: float = 0.004, seed: int = 1,
          reference: str = "glibc") -> hr.RaceResult:
    """A race result from a hand-made table: name -> (kind, CPU seconds, peak RSS in MiB),
    each round a little noise around those figures."""
    rng = random.Random(seed)
    standings = []
    for name, (kind, seconds, rss) in rows.items():
        samples = [hr.Sample(seconds * (1 + rng.uniform(-noise, noise)), int(rss * 2**20 * (1 + rng.uniform(-noise, noise) / 4)))
                   for _ in range(rounds)]
        standings.append(hr.Standing(hr.Contender(name, None, kind), samples))
    return hr.RaceResult(standings, hr.RaceSettings(), rounds, 1.0, reference if reference in rows else None)


PEERS = {"glibc": ("peer", 1.00, 20.0), "mimalloc": ("peer", 0.80, 22.0), "jemalloc": ("peer", 0.90, 21.0)}


def test_a_dominated_design_is_never_recommended():
    race = table(dict(PEERS, bloated=("design", 1.10, 30.0), slow=("design", 1.30, 20.5)))
    assert race.dominates("glibc", "bloated") and race.dominates("glibc", "slow")
    for prefer in PREFERENCES:
        r = recommend(race, prefer)
        assert r.name not in ("bloated", "slow")
        assert r.dominated_by == [] and not race.dominated_by(r.name)


def test_a_peer_that_dominates_every_design_is_recommended_in_one_line():
    race = table(dict(PEERS, d1=("design", 0.85, 23.0), d2=("design", 0.95, 22.5)))
    assert race.dominates("mimalloc", "d1") and race.dominates("jemalloc", "d2")
    r = recommend(race, "balanced")
    assert r.kind == "peer" and r.line.startswith(f"no design heapkit built beats {r.name} on this program")
    assert "\n" not in r.line and "--prefer balanced" in r.line


def test_a_design_on_the_front_that_beats_the_peers_is_recommended():
    race = table(dict(PEERS, mine=("design", 0.78, 19.0)))
    r = recommend(race, "balanced")
    assert r.name == "mine" and r.is_design and r.line.startswith("recommended (--prefer balanced): mine")
    assert r.time_ratio == pytest.approx(0.78, rel=0.02) and r.rss_ratio == pytest.approx(0.95, rel=0.02)
    assert r.front == ["mine"]


def test_prefer_picks_the_documented_point():
    # A front of three: fast and big, balanced, small and slow.
    rows = {"glibc": ("peer", 1.00, 30.0), "fast": ("design", 0.60, 40.0), "middle": ("design", 0.75, 22.0),
            "small": ("peer", 1.20, 18.0)}
    race = table(rows)
    assert {s.name for s in race.front()} == {"fast", "middle", "small"}
    assert recommend(race, "time").name == "fast"
    assert recommend(race, "memory").name == "small"
    # balanced: least (time / best time) x (RSS / best RSS): 0.75/0.6 * 22/18 = 1.53 beats 40/18 = 2.22 and 2.
    assert recommend(race, "balanced").name == "middle"


def test_prefer_time_takes_the_smaller_of_two_tied_on_time():
    rows = {"glibc": ("peer", 1.00, 30.0), "quick": ("peer", 0.700, 40.0), "quick-small": ("design", 0.705, 25.0)}
    race = table(rows, rounds=10)
    assert race.compare("quick-small", "quick", "cpu_seconds").outcome == "tied"
    assert recommend(race, "time").name == "quick-small"


def test_a_design_the_race_cannot_tell_from_the_best_peer_is_not_recommended():
    # 0.5% faster and 0.3% smaller than glibc: within the margins, so tied on both.
    race = table({"glibc": ("peer", 1.00, 30.0), "tcmalloc": ("peer", 1.10, 40.0), "same": ("design", 0.995, 29.9)},
                 rounds=12)
    assert race.compare("same", "glibc", "cpu_seconds").outcome == "tied"
    r = recommend(race, "balanced")
    assert r.name == "glibc" and r.line.startswith("no design heapkit built beats glibc")


def test_a_disqualified_design_is_never_recommended():
    race = table(dict(PEERS, wrong=("design", 0.5, 10.0)))
    race.standing("wrong").disqualified = "its output differs from glibc's"
    assert all(recommend(race, p).name != "wrong" for p in PREFERENCES)


@pytest.mark.parametrize("seed", range(40))
def test_random_tables_never_get_a_dominated_recommendation(seed):
    rng = random.Random(seed)
    rows = {"glibc": ("peer", 1.0, 20.0)}
    for i in range(rng.randint(1, 5)):
        rows[f"peer{i}"] = ("peer", rng.uniform(0.5, 1.5), rng.uniform(10, 40))
    for i in range(rng.randint(0, 5)):
        rows[f"design{i}"] = ("design", rng.uniform(0.5, 1.5), rng.uniform(10, 40))
    race = table(rows, noise=rng.choice([0.002, 0.02, 0.08]), seed=seed)
    for prefer in PREFERENCES:
        r = recommend(race, prefer)
        assert not race.dominated_by(r.name), (prefer, r.name, race.dominated_by(r.name))
        chosen = race.standing(r.name)
        # nor beaten on both medians by anything the race put on the front
        for s in race.front():
            assert not (s.cpu_seconds < chosen.cpu_seconds and s.peak_rss < chosen.peak_rss), (prefer, r.name, s.name)


def test_the_program_race_gets_the_design_nearest_to_beating_every_peer():
    # "near" is dominated by mimalloc on the trace by a hair (0.83 s, 22.5 MiB), so it is
    # off the trace's front; "balanced" is on it but far from beating the peers on RSS.
    from heapkit.tune import nearest_to_beating_peers, pick_finalists

    race = table(dict(PEERS, near=("design", 0.83, 22.5), balanced=("design", 0.70, 40.0),
                      slow=("design", 1.50, 19.0)))
    assert race.dominates("mimalloc", "near")
    assert nearest_to_beating_peers(race, ["near", "balanced", "slow"]) == "near"  # max(0.83/0.80, 22.5/20.0)
    assert nearest_to_beating_peers(race, []) is None
    finalists = pick_finalists(race, 1, "balanced", ["near", "balanced", "slow"])
    # and "slow", the only design as small as glibc (flanking_peers): three of three
    assert "near" in finalists and sorted(finalists) == ["balanced", "near", "slow"]


def test_tune_builds_the_design_nearest_to_beating_its_fast_and_dense_presets(tmp_path):
    # Simulated fronts by hand: HKS fast and big, ALEA small and slow; "mix" is within 2% of
    # both, and no other searched design comes near; a huge region is the fastest of all.
    from pathlib import Path

    from heapkit.designs import Front, FrontDesign, PresetFigures
    from heapkit.tune import nearest_to_dominating, pick_candidates

    def design(name, ns, mib):
        metrics = {"predicted_ns": ns, "work": ns, "peak_footprint": mib * 2**20}
        return FrontDesign(name, Path(f"{name}.json"), name, {"time": ns, "footprint": mib}, metrics)

    designs = [design("ALEA", 130, 20.0), design("HKS", 100, 25.0), design("mix", 101, 20.3),
               design("fast-big", 60, 30.0), design("region", 20, 160.0), design("small", 200, 19.0),
               design("mid", 120, 21.0)]
    presets = {d.name: PresetFigures(d.objectives, d.metrics) for d in designs if d.name in ("ALEA", "HKS")}
    front = Front(["time", "footprint"], designs, presets=presets)
    assert nearest_to_dominating(front).name == "mix"
    picked = [d.name for d in pick_candidates(front, 5)]
    assert "mix" in picked[:2] and "small" in picked and "region" in picked
    assert len(picked) == 5 and len(set(picked)) == 5
    assert nearest_to_dominating(Front(["time"], designs)) is None  # no presets to measure against
    # Where glibc's replayed footprint is below both presets', it is the footprint to beat:
    # "dense" (1.02x HKS's time at 19.6 MiB) trails "mix" (1.01x, 20.3 MiB) against ALEA's
    # 20 MiB, and leads it against glibc's 19.5 MiB.
    denser = designs + [design("dense", 102, 19.6)]
    assert nearest_to_dominating(Front(["time", "footprint"], denser, presets=presets)).name == "mix"
    glibc_front = Front(["time", "footprint"], denser, presets=presets, references={"glibc": {"footprint": 19.5 * 2**20}})
    assert nearest_to_dominating(glibc_front).name == "dense"


def test_tune_builds_the_designs_flanking_both_axes_and_no_hopeless_one(tmp_path):
    # HKS fast and big, ALEA small and slow, glibc replayed at 20 MiB. "quick" is as fast as
    # HKS and the smallest of those; "dense" is within glibc's footprint and the fastest of
    # those; "balanced" is what one figure prefers (1.03x on both), neither side of the goal.
    # "crawl" is 40x HKS's time: never built, even to spread along the front.
    from pathlib import Path

    from heapkit.designs import Front, FrontDesign, PresetFigures
    from heapkit.tune import both_axes_flanks, nearest_to_dominating, pick_candidates

    def design(name, ns, mib):
        metrics = {"predicted_ns": ns, "work": ns, "peak_footprint": mib * 2**20}
        return FrontDesign(name, Path(f"{name}.json"), name, {"time": ns, "footprint": mib}, metrics)

    designs = [design("ALEA", 130, 19.5), design("HKS", 100, 25.0), design("balanced", 103, 20.6),
               design("quick", 99, 21.5), design("dense", 125, 19.9), design("fastest", 90, 26.0),
               design("crawl", 4000, 19.0), design("mid", 110, 20.8)]
    presets = {d.name: PresetFigures(d.objectives, d.metrics) for d in designs if d.name in ("ALEA", "HKS")}
    front = Front(["time", "footprint"], designs, presets=presets,
                  references={"glibc": {"footprint": 20.0 * 2**20}})
    assert nearest_to_dominating(front).name == "balanced"
    assert [d.name for d in both_axes_flanks(front)] == ["quick", "dense"]
    picked = [d.name for d in pick_candidates(front, 5)]
    assert {"balanced", "quick", "dense"} <= set(picked[:4])
    assert "crawl" in picked  # the least footprint is built: it is the front's extreme
    assert "ALEA" not in picked and "HKS" not in picked  # raced as peers already
    # Spread picks leave out a design 40x slower than HKS when there are others.
    assert "crawl" not in [d.name for d in pick_candidates(Front(["time", "footprint"], designs[:6] + designs[7:] +
                                                                 [design("crawl", 4000, 20.7)], presets=presets,
                                                                 references=front.references), 5)]


def test_the_program_race_gets_the_designs_flanking_every_peer_on_the_trace():
    # "quick" is as fast as mimalloc (the fastest peer) and smaller than the other such
    # design; "tight" is as small as glibc (the smallest peer) and the fastest such.
    from heapkit.tune import flanking_peers, pick_finalists

    race = table(dict(PEERS, quick=("design", 0.79, 21.5), quicker=("design", 0.78, 24.0),
                      tight=("design", 0.95, 19.9), tighter=("design", 1.10, 19.0)))
    assert flanking_peers(race, ["quick", "quicker", "tight", "tighter"]) == ["quick", "tight"]
    assert flanking_peers(race, []) == []
    finalists = pick_finalists(race, 1, "balanced", ["quick", "quicker", "tight", "tighter"])
    assert {"quick", "tight"} <= set(finalists)
