"""The time model (heapkit.timemodel): the fit on synthetic data, its file format and bad
input, and predicted_ns in the simulator's results (present, deterministic, the model's
sum over the memory model's counts) and as the search's default time objective."""

from __future__ import annotations

import json
import random
import subprocess

import numpy as np
import pytest

import heapkit
from heapkit import search as hs
from heapkit import timemodel as tm


# ---- the fit --------------------------------------------------------------------------------

def synthetic_rows(coefficients: dict[str, float], count: int, noise: float = 0.0, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        features = {f: rng.uniform(1e3, 1e6) for f in tm.FEATURES}
        ns = sum(coefficients.get(f, 0) * v for f, v in features.items()) * (1 + rng.uniform(-noise, noise))
        rows.append({"trace": f"t{i % 4}", **features, "ns": ns})
    return rows


def test_fit_recovers_the_coefficients_of_noiseless_data():
    truth = {"events": 20.0, "work": 1.5, "l2_misses": 30.0, "pages_touched": 400.0}
    model = tm.fit(synthetic_rows(truth, 60))
    for f in tm.FEATURES:
        assert model.coefficients[f] == pytest.approx(truth.get(f, 0.0), rel=1e-6, abs=1e-6), f


def test_fit_keeps_every_coefficient_non_negative():
    # Time falls with a feature here: unconstrained least squares would weigh it negatively.
    rng = random.Random(3)
    rows = []
    for _ in range(40):
        work, accesses = rng.uniform(50, 100), rng.uniform(1, 100)
        rows.append({"work": work, "accesses": accesses, "ns": 10 * work - 2 * accesses})
    x = np.array([[r["work"], r["accesses"]] for r in rows])
    unconstrained, *_ = np.linalg.lstsq(x, np.array([r["ns"] for r in rows]), rcond=None)
    assert unconstrained[1] < 0
    model = tm.fit(rows, features=("work", "accesses"))
    assert model.coefficients["accesses"] == 0.0
    assert model.coefficients["work"] > 0


def test_nonnegative_least_squares_matches_a_brute_force_search():
    rng = np.random.default_rng(5)
    a = rng.normal(size=(30, 3))
    b = rng.normal(size=30)
    x = tm.nonnegative_least_squares(a, b)
    assert (x >= 0).all()
    # the best of every subset of free columns (the others at zero), feasible ones only
    best = np.inf
    for mask in range(8):
        cols = [i for i in range(3) if mask >> i & 1]
        z = np.zeros(3)
        if cols:
            z[cols], *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
        if (z >= 0).all():
            best = min(best, float(np.sum((a @ z - b) ** 2)))
    assert float(np.sum((a @ x - b) ** 2)) == pytest.approx(best, rel=1e-9)


def test_leave_one_trace_out_predicts_each_trace_from_the_others():
    truth = {"events": 5.0, "l3_misses": 50.0}
    rows = synthetic_rows(truth, 40, noise=0.01)
    predicted = tm.leave_one_group_out(rows)
    for p, r in zip(predicted, rows):
        assert p == pytest.approx(r["ns"], rel=0.05)
    # A trace whose time is the only evidence for a feature cannot be predicted from the others.
    odd = [dict(r, l1_misses=0.0) for r in rows]
    for r in odd:
        if r["trace"] == "t0":
            r["l1_misses"] = 1e6
            r["ns"] += 1e9
    predicted = tm.leave_one_group_out(odd)
    assert all(p < r["ns"] * 0.5 for p, r in zip(predicted, odd) if r["trace"] == "t0")


def test_each_trace_gets_an_offset_and_events_is_fitted_to_the_offsets():
    # Each trace costs a fixed amount whatever the design (its events at 40 ns, and a part
    # no feature explains); within a trace the designs differ by work and pages touched.
    rng = random.Random(7)
    truth = {"work": 2.0, "pages_touched": 500.0}
    rows = []
    for t in range(5):
        events = rng.uniform(1e5, 1e6)
        unexplained = rng.uniform(0, 0.2) * 40 * events
        for _ in range(12):
            work, pages = rng.uniform(1e5, 5e6), rng.uniform(1e2, 1e4)
            rows.append({"trace": f"t{t}", "events": events, "work": work, "pages_touched": pages,
                         "ns": 40 * events + unexplained + 2.0 * work + 500.0 * pages})
    model = tm.fit(rows, features=("events", "work", "pages_touched"))
    # The slopes are exactly those of the designs' differences, though no coefficient explains
    # every trace's level; events takes the levels (at least their 40 ns, the rest as it fits).
    for f, c in truth.items():
        assert model.coefficients[f] == pytest.approx(c, rel=1e-6), f
    assert 40.0 <= model.coefficients["events"] <= 40.0 * 1.2
    # A plain fit over the same rows, without the offsets, misweighs the slopes.
    pooled = tm.fit([{k: v for k, v in r.items() if k != "trace"} for r in rows],
                    features=("events", "work", "pages_touched"))
    assert pooled.coefficients["work"] != pytest.approx(2.0, rel=1e-3)


def test_requests_of_each_mechanism_are_features(churn_trace):
    two = {"format": "heapkit-dmm/1", "name": "two", "fallback": "os",
           "allocators": [{"range": [0, 256], "mechanism": "kingsley"}, {"range": [256, None], "mechanism": "lea"}]}
    kng, mixed = heapkit.simulate(churn_trace, ["KNG", two])
    features = tm.features_of(kng)
    assert features["requests_kingsley"] == kng.dmm_map[0].requests > 0
    assert sum(features[f] for f in tm.REQUEST_FEATURES) == features["requests_kingsley"]
    mixed_features = tm.features_of(mixed.to_dict())  # the same from the dict form
    served = {u.mechanism: u.requests for u in mixed.dmm_map}
    assert mixed_features["requests_kingsley"] == served["kingsley"] > 0
    assert mixed_features["requests_lea"] == served["lea"] > 0
    assert set(tm.MECHANISMS) >= {"kingsley", "lea", "page_segregated", "os"}


def test_spearman_on_hand_made_ranks():
    assert tm.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert tm.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert tm.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)  # ties share a mean rank
    assert np.isnan(tm.spearman([1, 1, 1], [1, 2, 3]))


# ---- the file -------------------------------------------------------------------------------

def test_a_model_round_trips_through_its_file(tmp_path):
    model = tm.TimeModel({"events": 12.5, "pages_touched": 300.0}, machine="m", note="n")
    model.save(tmp_path / "m.json")
    loaded = tm.load(tmp_path / "m.json")
    assert loaded.coefficients == {**{f: 0.0 for f in tm.FEATURES}, "events": 12.5, "pages_touched": 300.0}
    assert loaded.predict({"events": 2, "pages_touched": 1, "work": 1e9}) == pytest.approx(325.0)


def test_the_shipped_model_loads_and_the_environment_overrides_it(tmp_path, monkeypatch):
    shipped = tm.load(tm.DEFAULT_PATH)
    assert any(c > 0 for c in shipped.coefficients.values())
    tm.TimeModel({"work": 7.0}).save(tmp_path / "mine.json")
    monkeypatch.setenv(tm.ENVIRONMENT, str(tmp_path / "mine.json"))
    assert tm.load().coefficients["work"] == 7.0


@pytest.mark.parametrize("data, message", [
    ([], "not a time model"),
    ({"format": "heapkit-time-model/1"}, "coefficients_ns"),
    ({"format": "heapkit-time-model/1", "coefficients_ns": {"cycles": 1}}, "unknown time-model feature 'cycles'"),
    ({"format": "heapkit-time-model/1", "coefficients_ns": {"work": -1}}, "must be a number >= 0"),
    ({"format": "heapkit-time-model/1", "coefficients_ns": {"work": True}}, "must be a number >= 0"),
])
def test_bad_models_are_refused_in_one_line(tmp_path, data, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        tm.load(path)


def test_fit_refuses_nothing_to_fit():
    with pytest.raises(ValueError, match="no measurements"):
        tm.fit([])


# ---- in the simulator and the search ---------------------------------------------------------

def test_predicted_ns_is_the_models_sum_and_deterministic(churn_trace, tmp_path):
    model = tm.TimeModel({"events": 10.0, "work": 1.0, "l1_misses": 5.0, "l2_misses": 20.0, "tlb_misses": 30.0,
                          "pages_touched": 500.0, "copied_bytes": 0.5})
    first = heapkit.simulate(churn_trace, ["KNG", "LEA", "S10"], time_model=model)
    again = heapkit.simulate(churn_trace, ["KNG", "LEA", "S10"], time_model=model, threads=1)
    for a, b in zip(first, again):
        assert a.cache_modelled
        assert a.pages_touched > 0 and a.l1_misses >= a.l2_misses > 0 and a.tlb_misses > 0
        assert (a.l1_misses, a.l2_misses, a.tlb_misses, a.pages_touched, a.copied_bytes, a.predicted_ns) == \
               (b.l1_misses, b.l2_misses, b.tlb_misses, b.pages_touched, b.copied_bytes, b.predicted_ns)
        assert a.predicted_ns == pytest.approx(model.predict(tm.features_of(a)))
        assert a.to_dict()["predicted_ns"] == a.predicted_ns
    # The program's touches are the replay's: without them, fewer pages are touched.
    untouched = heapkit.simulate(churn_trace, ["KNG"], time_model=model, touch=False)[0]
    assert untouched.pages_touched < first[0].pages_touched
    off = heapkit.simulate(churn_trace, ["KNG"], time_model=model, cache_model=False)[0]
    assert not off.cache_modelled and off.l1_misses == 0 and off.pages_touched == 0
    assert off.work == first[0].work and off.accesses == first[0].accesses


def test_simulate_json_reports_predicted_ns_and_the_model(churn_trace, tmp_path, heapkit_cli):
    model = tmp_path / "model.json"
    tm.TimeModel({"events": 3.0}).save(model)
    out = tmp_path / "sim.json"
    done = subprocess.run([*heapkit_cli, "simulate", str(churn_trace), "-p", "LEA", "--json", str(out),
                           "--time-model", str(model), "--no-map"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["time_model"]["coefficients_ns"]["events"] == 3.0
    for r in data["results"]:
        assert r["predicted_ns"] == pytest.approx(3.0 * r["events"])
        for key in ("l1_misses", "l2_misses", "tlb_misses", "pages_touched", "copied_bytes"):
            assert key in r
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    done = subprocess.run([*heapkit_cli, "simulate", str(churn_trace), "-p", "LEA", "--time-model", str(bad)],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "not a time model" in done.stderr and "Traceback" not in done.stderr


def test_the_search_optimises_predicted_time_by_default(churn_trace):
    assert hs.DEFAULT_OBJECTIVES[0] == "time" and "work" in hs.OBJECTIVES
    result = heapkit.simulate(churn_trace, ["LEA"])[0]
    design = hs.Design(result.spec, hs.metrics_record(result))
    assert design.objective("time") == result.predicted_ns
    assert design.objective("work") == result.work


def test_the_tlb_misses_are_counted_but_not_fitted():
    # The modelled TLB ranked perl's designs backwards once fitted (timemodel.UNFITTED).
    model = tm.fit(synthetic_rows({"events": 5.0, "tlb_misses": 50.0}, 40))
    assert model.coefficients["tlb_misses"] == 0.0
    assert "tlb_misses" in tm.FEATURES and "tlb_misses" not in tm.FITTED
