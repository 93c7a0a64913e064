"""Placement by lifetime: the short-lived sizes chosen from a trace's profile, the grammar's
designs that place them apart, and the simulator running them (tests/sim/fidelity_test.cpp
checks the simulated footprint against the real allocator's, to the byte)."""

from __future__ import annotations

import json
import random

import pytest

import heapkit
from heapkit import search as hs
from heapkit.grammar import design_from_text, generate, generate_for_trace, mixed_alternatives
from heapkit.lifetimes import MAX_RANGES, ranges_from_profile, short_lived_sets
from heapkit.stats import size_profile


def test_short_lived_sizes_on_a_hand_made_profile():
    # 24 and 40 B: 1000 requests, 1 live at the peak (short); 64 B: all 10 live (long);
    # 200 B short, 208 B never requested (joins its short neighbours), 216 B short;
    # 100000 B: above 64 KiB, never in the set.
    sizes = [24, 40, 64, 200, 216, 100000]
    counts = [1000, 1000, 10, 50, 50, 7]
    live = [1, 1, 10, 0, 2, 0]
    assert ranges_from_profile(sizes, counts, live, 0.05) == [(16, 48), (192, 224)]
    # 216 B keeps 2 of 50 live (4%): long-lived under a 2% share, and 208 B goes with it.
    assert ranges_from_profile(sizes, counts, live, 0.02) == [(16, 48), (192, 208)]
    # A share of 1: everything requested is short-lived, one range from 16 to 224 B.
    assert ranges_from_profile(sizes, counts, live, 1.0) == [(16, 224)]
    assert ranges_from_profile([], [], [], 0.1) == []


def test_too_many_ranges_close_the_gaps_holding_the_fewest_live_bytes():
    # 40 short sizes each with a long-lived size after it: 40 ranges, 32 at most; the long
    # ones with the fewest live bytes at the peak (the first) are swallowed.
    sizes, counts, live = [], [], []
    for i in range(40):
        sizes += [32 * i + 16, 32 * i + 32]
        counts += [100, 10]
        live += [0, 1 + i]
    ranges = ranges_from_profile(sizes, counts, live, 0.05)
    assert len(ranges) == MAX_RANGES
    assert ranges[0] == (0, 32 * 8 + 16)  # the 8 cheapest gaps (the first 8 long sizes) closed
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))


def test_the_grammar_places_short_lived_sizes_apart(churn_trace):
    grammar = generate_for_trace(churn_trace)
    sets = [json.loads("".join(items)) for items in grammar.rules["<sl-sizes>"]]
    assert sets and sets == [[list(r) for r in s] for s in short_lived_sets(size_profile(churn_trace))]
    rng = random.Random(11)
    placed = mechanisms = 0
    kinds = set()
    for _ in range(3000):
        text = grammar.derive([rng.randrange(256) for _ in range(rng.randint(4, 80))])
        if text is None:
            continue
        spec = design_from_text(text)  # a SpecError if the grammar derived an invalid design
        if "short_lived" in spec.data:
            placed += 1
            kinds.add(spec.data["short_lived"]["allocator"]["mechanism"])
        mechanisms += any(a["mechanism"] == "page_segregated" and a["range"][1] is not None for a in spec.allocators)
    assert placed > 100 and {"page_segregated", "lea", "kingsley"} <= kinds
    assert mechanisms > 20, "page_segregated in front of another allocator (a range of small sizes)"


def test_mixed_seeds_derive_and_simulate(churn_trace):
    grammar = generate_for_trace(churn_trace)
    mixed = mixed_alternatives(grammar)
    assert any(n.startswith("NUR-") for n in mixed) and any(n.startswith("MIX-") for n in mixed)
    for name, text in mixed.items():
        genome = grammar.genome_for(text)
        assert genome is not None, name
        spec = design_from_text(grammar.derive(genome), name)
        assert spec.allocators[-1]["mechanism"] == "adaptive_lea"
        assert heapkit.parse_spec(spec.to_json()).key == spec.key, "the spec file is the design, its area included"
        if name.startswith("NUR-"):
            assert spec.data["short_lived"]["allocator"]["mechanism"] == "page_segregated"
            (metrics,) = heapkit.simulate(churn_trace, [spec])
            area = [u for u in metrics.dmm_map if "short-lived" in u.mechanism]
            assert len(area) == 1 and area[0].requests > 0
            assert metrics.peak_footprint > 0 and not metrics.failed


def test_a_search_starts_from_the_mixed_designs(churn_trace):
    grammar = generate_for_trace(churn_trace)
    seeds = hs.initial_seeds(grammar, 24)
    designs = [design_from_text(grammar.derive(g)) for g in seeds]
    presets = hs.seed_genomes(grammar)
    assert seeds[:len(presets)] == list(presets.values())
    assert any("short_lived" in d.data for d in designs), "a nursery design"
    assert any(len(d.allocators) == 2 and d.allocators[0]["mechanism"] == "page_segregated" for d in designs)
    assert sum(len(d.allocators) == 1 and d.allocators[0]["mechanism"] == "page_segregated"
               and d.allocators[0]["warm_superblocks"] == 16 for d in designs) >= 2, "fitted class lists too"
    assert len(seeds) <= 12


def test_schema_and_validator_agree_on_short_lived_areas():
    """What heapkit accepts the published schema accepts; what the schema rejects heapkit rejects."""
    import jsonschema

    schema = jsonschema.Draft202012Validator(heapkit.dmm.schema())
    rng = random.Random(5)
    accepted = rejected = 0
    for _ in range(600):
        ranges, low = [], rng.choice([0, 16, 32, 40])
        for _ in range(rng.randint(0, 4)):
            high = low + rng.choice([16, 48, 1008, 1000, 70000])
            ranges.append([low, high])
            low = high + rng.choice([-16, 0, 32])
        allocator = rng.choice([{"mechanism": "lea"}, {"mechanism": "page_segregated", "warm_superblocks": 4},
                                {"mechanism": "segregated_lists", "classes": 5}, {"mechanism": "kingsley", "split": True},
                                {"range": [0, 64], "mechanism": "lea"}, {}])
        area = {"sizes": ranges, "allocator": allocator}
        if rng.random() < 0.1:
            area["age"] = 1
        document = {"format": "heapkit-dmm/1", "allocators": [{"range": [0, None], "mechanism": "adaptive_lea"}],
                    "short_lived": area}
        try:
            heapkit.parse_spec(json.dumps(document))
            ok = True
        except heapkit.SpecError as error:
            ok = False
            assert str(error).startswith("short_lived"), str(error)
        assert not (ok and not schema.is_valid(document)), document
        accepted += ok
        rejected += not ok
    assert accepted > 20 and rejected > 20


def test_a_built_nursery_design_holds_what_the_simulator_predicted(churn_trace, tmp_path):
    """`heapkit build` of a design with a short-lived area (through its spec file, as tune
    builds it): the built heap replaying the trace holds the predicted bytes, to the byte."""
    from heapkit import build as hb

    grammar = generate_for_trace(churn_trace)
    text = next(t for n, t in mixed_alternatives(grammar).items() if n.startswith("NUR-"))
    spec = design_from_text(text, "nursery")
    path = tmp_path / "nursery.json"
    path.write_text(spec.to_json())
    loaded = heapkit.load_spec(path)
    assert "short_lived" in loaded.data
    built = hb.build(loaded, tmp_path / "libnursery.so")
    assert "ShortLivedArea" in built.header.read_text()
    (metrics,) = heapkit.simulate(churn_trace, [loaded])
    assert hb.built_footprint(built, churn_trace) == metrics.peak_footprint
