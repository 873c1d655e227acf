"""The certificate's decision (evaluation/certificate/verdict.py) on simulated panels whose true order is known:
Welch's test against scipy's independent implementation, random splits of one question pool
(false alarms), a synthetic set that reverses or erases the reference's order (detection), the
noise floor, and the resampled estimate of the questions that would decide."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from retrieval_bench.evaluation.certificate.agreement import certificate, pair_verdicts, percentile_interval
from retrieval_bench.evaluation.certificate.certify import panel_certificate
from retrieval_bench.evaluation.certificate.verdict import (
    AGREES,
    DISAGREES,
    UNDETERMINED,
    decide,
    metric_verdict,
    noise_floor,
    questions_to_decide,
    set_verdict,
    welch_p,
)
from retrieval_bench.evaluation.stats import kendall_tau_rows, pearson

# 6 systems; per-question reciprocal ranks drawn so that a question's difficulty is shared by the systems
TRUE_MRR = np.array([0.30, 0.45, 0.50, 0.52, 0.65, 0.80])


def pool(n: int, rng: np.random.Generator, means: np.ndarray = TRUE_MRR) -> np.ndarray:
    """(systems x n) scores in [0, 1]: each question's ease, shared, and each system's own luck."""
    ease = rng.uniform(-0.3, 0.3, n)
    return np.clip(means[:, None] + ease[None, :] + rng.normal(0, 0.25, (len(means), n)), 0, 1)


def test_welch_p_equals_scipys_welch_test():
    rng = np.random.default_rng(3)
    for _ in range(50):
        a, b = (
            rng.normal(rng.uniform(-1, 1), rng.uniform(0.1, 2), rng.integers(2, 40)),
            rng.normal(0, 1, rng.integers(2, 40)),
        )
        expected = stats.ttest_ind(a, b, equal_var=False).pvalue
        assert welch_p(a, b) == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert welch_p(np.zeros(5), np.ones(5)) == 0.0 and welch_p(np.ones(5), np.ones(5)) == 1.0
    assert np.isnan(welch_p(np.ones(1), np.ones(5)))


def test_random_splits_of_one_pool_are_judged_disagrees_in_at_most_five_percent_of_trials():
    rng = np.random.default_rng(0)
    verdicts = []
    for _ in range(60):
        scores = pool(120, rng)
        order = rng.permutation(120)
        both = [{"mrr": scores[:, order[:60]], "recall@10": (scores[:, order[:60]] > 0.5).astype(float)}]
        both.append({"mrr": scores[:, order[60:]], "recall@10": (scores[:, order[60:]] > 0.5).astype(float)})
        verdicts.append(decide(*both, permutations=2_000)["verdict"])
    assert verdicts.count(DISAGREES) <= 3  # 5% of 60
    assert verdicts.count(AGREES) > 0  # and the test can say yes


def test_a_set_that_reverses_or_erases_the_order_is_judged_disagrees():
    rng = np.random.default_rng(1)
    reference = {"mrr": pool(100, rng)}
    reversed_ = decide(reference, {"mrr": pool(100, rng, TRUE_MRR[::-1])}, permutations=2_000)
    erased = decide(reference, {"mrr": pool(100, rng, np.full(6, 0.5))}, permutations=2_000)
    for decision in (reversed_, erased):
        calls = decision["metrics"]["mrr"]
        assert decision["verdict"] == DISAGREES and calls["contradicted"] >= 1
        # only separable pairs can be contradicted
        assert all(call["separable"] for call in calls["calls"] if call.get("status") == "contradicted")


def test_verdict_rules():
    judged = [
        {"separable": True, "status": "reproduced"},
        {"separable": True, "status": "unsettled"},
        {"separable": False},
    ]
    assert metric_verdict(judged)["verdict"] == UNDETERMINED
    assert metric_verdict(judged[:1] + judged[2:])["verdict"] == AGREES
    assert metric_verdict(judged + [{"separable": True, "status": "contradicted"}])["verdict"] == DISAGREES
    assert metric_verdict(judged[2:])["verdict"] == UNDETERMINED  # nothing separable: nothing to agree on
    assert set_verdict({"mrr": AGREES, "recall@1": UNDETERMINED}) == AGREES
    assert set_verdict({"mrr": AGREES, "recall@1": DISAGREES}) == DISAGREES
    assert set_verdict({"mrr": UNDETERMINED, "recall@1": AGREES}) == UNDETERMINED


def test_the_noise_floor_puts_a_set_from_the_same_pool_near_its_own_size():
    rng = np.random.default_rng(2)
    reference = pool(300, rng)
    worth = {n: [noise_floor(reference, pool(n, rng), draws=40, seed=1) for _ in range(7)] for n in (10, 40)}
    median = {n: np.median([floor["as_consistent_as"] for floor in floors]) for n, floors in worth.items()}
    assert 5 <= median[10] <= 25 and 20 <= median[40] <= 150 and median[10] < median[40]
    # a set that orders the systems backwards is worth fewer than the smallest subset of real questions
    backwards = noise_floor(reference, pool(80, rng, TRUE_MRR[::-1]), draws=20)
    assert backwards["bound"] == "fewer than" and backwards["as_consistent_as"] == 5
    curve = [point["reference_correlation"] for point in backwards["curve"]]
    assert [point["n"] for point in backwards["curve"]] == [5, 10, 20, 40, 80, 150] and curve == sorted(curve)


def test_pearson_equals_a_hand_computation():
    x, y = np.array([0.1, 0.4, 0.35, 0.9]), np.array([0.2, 0.3, 0.5, 0.7])
    dx, dy = x - x.mean(), y - y.mean()
    assert pearson(x, y) == pytest.approx((dx * dy).sum() / np.sqrt((dx**2).sum() * (dy**2).sum()))
    assert np.isnan(pearson([1, 1, 1], [1, 2, 3])) and np.isnan(pearson([1.0], [2.0]))


def test_questions_to_decide_grows_the_limiting_set():
    rng = np.random.default_rng(4)
    close = np.array([0.50, 0.55, 0.60])

    def sets(n_ref: int, n_syn: int, means: np.ndarray) -> tuple[dict, dict]:
        return {"mrr": pool(n_ref, rng, means)}, {"mrr": pool(n_syn, rng, means)}

    # 15 reference questions separate nothing: more reference questions would
    estimate = questions_to_decide(*sets(15, 200, close), permutations=500)
    assert estimate["grown"] == ["reference"] and estimate["n"]["reference"] in (30, 60, 120, 240)
    assert estimate["why"] is None
    # copies of a handful of questions would look decisive: no estimate
    few = questions_to_decide(*sets(4, 30, close), permutations=200)
    assert few == {
        "grown": ["reference"],
        "n": None,
        "why": "too few reference questions (4) to estimate how many would decide it",
        "too_few": {"set": "reference", "n": 4},
    }


def test_every_synthetic_set_is_certified_against_the_real_queries():
    rng = np.random.default_rng(5)
    n = 60
    sets = ["real"] * n + ["generated"] * n + ["ragas"] * n + ["hand-written"] * n
    scores = np.hstack([pool(n, rng), pool(n, rng), pool(n, rng, TRUE_MRR[::-1]), pool(n, rng)])
    tables = {
        f"s{i}": pd.DataFrame(
            {"qid": [f"q{j}" for j in range(4 * n)], "question_set": sets, "reciprocal_rank": scores[i]}
        )
        for i in range(6)
    }
    cert = panel_certificate(tables, resamples=20)
    assert cert["reference"] == "real" and list(cert["sets"]) == ["generated", "hand-written", "ragas"]
    assert cert["sets"]["ragas"]["verdict"] == DISAGREES and cert["sets"]["generated"]["verdict"] != DISAGREES


def test_certificate_intervals_and_verdicts_are_stable_across_seeds():
    """Item 8 of issue 30: the interval ends (steps of the statistic, from 100,000 draws) move by at
    most 0.02 over 5 seeds, and the verdict does not move; the noise floor moves little."""
    rng = np.random.default_rng(8)
    n = 100
    sets = ["hand-written"] * n + ["generated"] * n
    scores = np.hstack([pool(n, rng), pool(n, rng)])
    tables = {
        f"s{i}": pd.DataFrame(
            {"qid": [f"q{j}" for j in range(2 * n)], "question_set": sets, "reciprocal_rank": scores[i]}
        )
        for i in range(6)
    }
    runs = [panel_certificate(tables, seed=seed)["sets"]["generated"] for seed in range(5)]
    for key in ("kendall_tau", "tau_ap"):
        for end in ("ci_low", "ci_high"):
            ends = [run["metrics"]["mrr"][key][end] for run in runs]
            assert max(ends) - min(ends) <= 0.02, (key, end, ends)
    assert len({run["verdict"] for run in runs}) == 1
    floors = [run["noise_floor"]["as_consistent_as"] for run in runs]
    assert max(floors) - min(floors) <= 0.25 * np.median(floors), floors


def test_vectorised_kendall_tau_equals_scipys_with_ties():
    rng = np.random.default_rng(9)
    x, y = rng.integers(0, 4, (200, 6)).astype(float), rng.integers(0, 4, (200, 6)).astype(float)
    expected = [stats.kendalltau(a, b).statistic for a, b in zip(x, y)]
    np.testing.assert_allclose(kendall_tau_rows(x, y), expected, rtol=1e-12, equal_nan=True)
    assert np.isnan(kendall_tau_rows([[1.0, 1.0, 1.0]], [[1.0, 2.0, 3.0]])[0])


def test_a_far_outlier_among_the_draws_does_not_drag_an_interval_end():
    """Reading ends between steps let one draw at -1 among 9,999 at 0.867 pull the low end to -0.95."""
    assert percentile_interval(np.array([-1.0] + [0.867] * 9_999), 0.95) == (0.867, 0.867)
    rng = np.random.default_rng(3)
    means = np.array([0.2, 0.4, 0.55, 0.8])
    reference, synthetic = (np.clip(means[:, None] + rng.normal(0, 0.3, (4, 150)), 0, 1) for _ in range(2))
    lows = {
        certificate(
            reference, synthetic, (pair_verdicts(reference), pair_verdicts(synthetic)), list("abcd"), seed=seed
        )["tau_ap"]["ci_low"]
        for seed in range(5)
    }
    assert len(lows) == 1, lows


def test_the_noise_floor_says_why_it_has_no_figure():
    rng = np.random.default_rng(6)
    assert noise_floor(pool(8, rng), pool(20, rng))["why"] == "fewer than 10 reference questions"
    flat = noise_floor(pool(40, rng), np.full((6, 20), 0.5))
    assert flat["as_consistent_as"] is None and flat["why"] == "the synthetic set scores every system alike"


def test_an_undetermined_line_names_the_sets_the_estimate_could_not_grow():
    """The estimate says why in parts (the set, its size, the factor): the line names the sets as
    the panel does, not the roles, and no message is made by rewriting another."""
    from retrieval_bench.evaluation.certificate.certify import verdict_line

    head = {"reproduced": 1, "separable": 1, "pairs": 3, "unsettled": 2}
    cert = {
        "verdict": "undetermined",
        "headline_metric": "mrr",
        "metrics": {"mrr": {**head, "pair_calls": []}},
        "noise_floor": {"as_consistent_as": None, "why": "fewer than 10 reference questions"},
    }
    names, sizes = ("hand-written", "generated"), {"hand-written": 4, "generated": 30}
    few = {"grown": ["reference"], "n": None, "why": "...", "too_few": {"set": "reference", "n": 4}}
    line = verdict_line({**cert, "to_decide": few}, names, sizes)
    assert "; too few hand-written questions (4) to estimate how many would decide it;" in line
    none = {"grown": ["reference", "synthetic"], "n": None, "why": "...", "factor": 16}
    line = verdict_line({**cert, "to_decide": none}, names, sizes)
    assert "not even 16 times as many hand-written and generated questions would decide it (resampled)" in line
