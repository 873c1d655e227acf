"""The panel statistics: Holm and Benjamini-Hochberg against statsmodels' multipletests, tau_AP and
pair agreement against hand computations (Kendall tau, tau_AP under ties and the p-values against
independent computations: tests/evaluation/test_exact_statistics.py)."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import false_discovery_control
from statsmodels.stats.multitest import multipletests

from retrieval_bench.evaluation import stats
from retrieval_bench.evaluation.certificate.agreement import (
    certificate,
    differing_pairs,
    pair_verdicts,
    verdict_agreement,
)
from retrieval_bench.evaluation.certificate.certify import panel_certificate
from retrieval_bench.evaluation.panel.leaderboard import leaderboard_metrics
from retrieval_bench.evaluation.panel.report import summary_line
from retrieval_bench.evaluation.score.per_question import metric_columns
from retrieval_bench.evaluation.stats import (
    Resampling,
    bh_adjust,
    holm_adjust,
    kendall_tau,
    paired_bootstrap_ci,
    randomization_p_value,
    tau_ap,
    win_tie_loss,
)

P_VALUE_SETS = [
    [0.01, 0.04, 0.03, 0.005, 0.5],
    [0.2, 0.2, 0.01, 0.01, 0.04, 0.9, 0.001],  # ties
    [0.5],
    [0.04, 0.04, 0.04],
    list(np.random.default_rng(3).uniform(0, 0.2, 40)),
]


@pytest.mark.parametrize("p_values", P_VALUE_SETS)
def test_holm_and_bh_match_statsmodels(p_values):
    np.testing.assert_allclose(holm_adjust(p_values), multipletests(p_values, method="holm")[1], atol=1e-12)
    np.testing.assert_allclose(bh_adjust(p_values), multipletests(p_values, method="fdr_bh")[1], atol=1e-12)
    np.testing.assert_array_equal(bh_adjust(p_values), false_discovery_control(p_values, method="bh"))  # scipy's own


def test_corrections_of_nothing_are_empty():
    assert len(holm_adjust([])) == 0 and len(bh_adjust([])) == 0


def test_kendall_tau_of_a_constant_is_nan():
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3])) and math.isnan(kendall_tau([0.5], [0.7]))


def test_tau_ap_by_hand():
    """Yilmaz et al. 2008: tau_AP = 2/(N-1) sum_{i=2..N} C(i)/(i-1) - 1, C(i) = systems above the
    i-th of the estimated ordering that the true ordering also puts above it."""
    actual = [4, 3, 2, 1]  # true order: A B C D
    assert tau_ap([4, 3, 2, 1], actual) == pytest.approx(1.0)
    assert tau_ap([1, 2, 3, 4], actual) == pytest.approx(-1.0)
    # estimated B A C D: i=2 (A): above it B, truly below A -> C=0; i=3 (C): B, A both truly above -> 2/2;
    # i=4 (D): 3/3. tau_AP = 2/3 (0 + 1 + 1) - 1 = 1/3, while Kendall tau = (5 - 1)/6 = 2/3.
    assert tau_ap([3, 4, 2, 1], actual) == pytest.approx(1 / 3)
    # estimated A B D C: i=2: 1/1, i=3 (D): A, B above -> 2/2, i=4 (C): A, B above, D not -> 2/3.
    # tau_AP = 2/3 (1 + 1 + 2/3) - 1 = 7/9: a swap at the bottom costs less than one at the top.
    assert tau_ap([4, 3, 1, 2], actual) == pytest.approx(7 / 9)
    assert kendall_tau([3, 4, 2, 1], actual) == kendall_tau([4, 3, 1, 2], actual) == pytest.approx(2 / 3)


def test_pair_verdicts_and_agreement_by_hand():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 60)
    # three systems: s1 = s0 + 0.3 (clearly better), s2 = s0 + tiny noise (no difference)
    scores = np.vstack([base, base + 0.3, base + rng.normal(0, 1e-3, 60)])
    verdicts = pair_verdicts(scores)
    assert list(verdicts) == [1, 0, -1]  # (s0,s1): s1 better; (s0,s2): none; (s1,s2): s2 worse
    other = np.array([1, -1, 0], dtype=np.int8)
    assert verdict_agreement(verdicts, other) == pytest.approx(1 / 3)
    rows = differing_pairs(verdicts, other, ["s0", "s1", "s2"], ("real", "synthetic"))
    assert rows == [
        {"a": "s0", "b": "s2", "real": "no significant difference", "synthetic": "worse", "flip": False},
        {"a": "s1", "b": "s2", "real": "worse", "synthetic": "no significant difference", "flip": False},
    ]


def _panel(n: int, means: list[float], rng) -> np.ndarray:
    difficulty = rng.uniform(0, 1, n)
    return np.vstack([np.clip(difficulty * 0.5 + m + rng.normal(0, 0.05, n), 0, 1) for m in means])


def test_certificate_separates_agreeing_from_disagreeing_sets():
    rng = np.random.default_rng(7)
    systems = ["a", "b", "c", "d"]
    real = _panel(80, [0.1, 0.2, 0.3, 0.4], rng)
    agreeing = _panel(80, [0.12, 0.21, 0.33, 0.41], rng)
    reversed_ = _panel(80, [0.4, 0.3, 0.2, 0.1], rng)
    verdicts = {
        name: pair_verdicts(scores, permutations=500)
        for name, scores in (("real", real), ("good", agreeing), ("bad", reversed_))
    }
    good = certificate(
        (real, agreeing), (verdicts["real"], verdicts["good"]), systems, ("real", "synthetic"), Resampling(50)
    )
    bad = certificate(
        (real, reversed_), (verdicts["real"], verdicts["bad"]), systems, ("real", "synthetic"), Resampling(50)
    )
    assert (
        good["kendall_tau"]["value"] == 1.0 and good["pair_agreement"]["value"] == 1.0 and good["differing_pairs"] == []
    )
    assert (
        bad["kendall_tau"]["value"] == -1.0 and bad["tau_ap"]["value"] == -1.0 and bad["pair_agreement"]["value"] == 0.0
    )
    assert all(row["flip"] for row in bad["differing_pairs"]) and len(bad["differing_pairs"]) == len(
        list(itertools.combinations(systems, 2))
    )
    assert good["kendall_tau"]["ci_low"] <= 1.0 <= good["kendall_tau"]["ci_high"]
    assert bad["kendall_tau"]["ci_high"] < good["kendall_tau"]["ci_low"]


def test_tau_ap_with_ties_never_depends_on_the_order_within_a_tie():
    """The definition has no ties: a tie is the mean over the orders of the tied systems, and an
    ordering that ties every system orders nothing (NaN, as Kendall's tau)."""
    assert tau_ap([2, 1, 1], [2, 1, 1]) == pytest.approx(1.0)
    assert tau_ap([2, 1, 1], [2, 1, 0]) == tau_ap([2, 1, 1], [2, 0, 1])  # the tie in `estimated` is unordered
    assert tau_ap([3, 2, 2, 1], [4, 3, 2, 1]) == pytest.approx(tau_ap([3, 2, 2, 1], [4, 2, 3, 1]))
    assert math.isnan(tau_ap([3, 2, 1], [1, 1, 1])) and math.isnan(tau_ap([1, 1, 1], [3, 2, 1]))
    rng = np.random.default_rng(5)
    for _ in range(50):  # without ties it is the definition: C(i) counted strictly, as in test_tau_ap_by_hand
        estimated, actual = rng.permutation(6).astype(float), rng.permutation(6).astype(float)
        ranked = actual[np.argsort(-estimated)]
        expected = 2 / 5 * sum(np.count_nonzero(ranked[:i] > ranked[i]) / i for i in range(1, 6)) - 1
        assert tau_ap(estimated, actual) == pytest.approx(expected)


def test_a_nan_difference_has_no_p_value():
    """A NaN would make every sign flip look less extreme than the observed mean: p would be tiny."""
    assert math.isnan(randomization_p_value(np.array([np.nan, 0.1, -0.1, 0.0])))


def test_a_reference_that_ties_every_system_makes_every_system_a_close_candidate():
    sets = ["hand-written"] * 6 + ["generated"] * 6
    tables = {
        name: pd.DataFrame(
            {
                "qid": [f"q{i}" for i in range(12)],
                "question_set": sets,
                "reciprocal_rank": [1.0] * 6 + [score] * 6,  # every system perfect on the hand-written questions
            }
        )
        for name, score in (("dense", 0.9), ("bm25", 0.5), ("hybrid", 0.2))
    }
    generated = panel_certificate(tables, resamples=20)["sets"]["generated"]
    mrr = generated["metrics"]["mrr"]
    pairs = [h["pair"] for h in mrr["hypotheses"] if h["kind"] == "pair"]
    assert pairs == [["dense", "bm25"], ["dense", "hybrid"]] and generated["verdict"] != "agrees"
    assert "0 of 2 decision pairs equivalent within 0.03" in generated["line"]


def test_a_one_system_leaderboard_names_no_other_system():
    board = {"question_sets": {"all": {"metrics": {"mrr": {"best": "only", "systems": {"only": {"mean": 0.5}}}}}}}
    assert summary_line(board) == "leaderboard: one system: only (mrr 0.500)"


def test_one_significance_level_and_one_list_of_metrics():
    """Every test's alpha is stats.ALPHA (no module keeps its own 0.05), and the leaderboard ranks
    the metrics compare compares, hit@k aside, in compare's order."""
    columns = ["qid", "recall@20", "hit@5", "ndcg@10", "recall@5", "map@10", "reciprocal_rank"]
    assert (
        leaderboard_metrics(columns)
        == [pair for pair in metric_columns(columns) if not pair[0].startswith("hit@")]
        == [("mrr", "reciprocal_rank"), ("ndcg@10", "ndcg@10"), ("recall@5", "recall@5"), ("recall@20", "recall@20")]
    )
    evaluation = Path(stats.__file__).parent
    own_alpha = [
        path.name
        for path in sorted(evaluation.glob("*.py"))
        if path.name != "stats.py" and re.search(r"(=\s*|alpha )0\.05\b", path.read_text())
    ]
    assert own_alpha == [] and stats.ALPHA == 0.05


def test_the_quantiles_from_scipy_special_are_scipy_stats_to_the_bit():
    """The stages take t and normal quantiles from scipy.special (scipy.stats costs about 0.4
    CPU-s more to import): the same values scipy.stats gives, for every n and level tried."""
    from scipy import stats as scipy_stats

    from retrieval_bench.evaluation import ppi
    from retrieval_bench.evaluation.certificate import verdict

    rng = np.random.default_rng(5)
    for n in [2, 3, 7, 30, 300, 4999, *rng.integers(2, 10_000, 40)]:
        for level in (0.5, 0.9, 0.95, 0.99, float(rng.uniform(0.5, 0.999))):
            tail = (1 - level) / 2
            expected = scipy_stats.norm.cdf(-math.sqrt(n / (n - 1)) * scipy_stats.t.ppf(1 - tail, n - 1))
            assert stats.expanded_tail(int(n), level) == expected
        assert ppi.t95(int(n)) == scipy_stats.t.ppf(0.975, n - 1)
    assert stats.expanded_tail(1, 0.95) == pytest.approx(0.025)
    assert verdict.MC_BAND == scipy_stats.norm.ppf(1 - 0.001 / 2)
    for m in [*range(1, 8), *rng.integers(8, 200, 30)]:  # BH, the leaderboard's segment tests' correction
        p = rng.random(int(m)) ** rng.uniform(0.2, 5)
        for p_values in (p, np.round(p, 2)):  # with ties
            np.testing.assert_array_equal(bh_adjust(p_values), false_discovery_control(p_values, method="bh"))


@pytest.mark.parametrize("n, resamples", [(300, 10_000), (50, 999), (5_000, 1_000), (1, 100)])
def test_bootstrap_intervals_sharing_their_draws_equal_fresh_draws(n, resamples):
    """paired_bootstrap_ci keeps one batch of resampled rows for the next call with the same n,
    resamples and seed (every metric and system of a question set): each interval equals one
    computed with its own fresh draws, on a hit (the same n and seed twice running), after a new
    seed at the same n, and after another n in between. (5_000, 1_000) is over one batch: not kept."""
    rng = np.random.default_rng(n)

    def fresh(diffs, seed, level=0.95):
        draws = np.random.default_rng(seed)
        means = [diffs[draws.integers(0, n, size=(b, n))].mean(axis=1) for b in stats._batches(resamples, n)]
        tail = (1 - level) / 2 if n == 1 else stats.expanded_tail(n, level)
        return tuple(float(x) for x in np.quantile(np.concatenate(means), [tail, 1 - tail]))

    for seed in (0, 0, 3, 3, 0):
        for _ in range(2):
            diffs = rng.normal(size=n)
            assert stats.paired_bootstrap_ci(diffs, resamples, seed) == fresh(diffs, seed)
    stats.paired_bootstrap_ci(rng.normal(size=n + 1), resamples, 0)  # another n in between
    diffs = rng.normal(size=n)
    assert stats.paired_bootstrap_ci(diffs, resamples, 0) == fresh(diffs, 0)


def test_bh_refuses_what_is_not_a_p_value():
    """As scipy.stats.false_discovery_control does: a NaN would otherwise turn every adjusted p-value
    into NaN (the minimum carried down from the largest), and a p outside [0, 1] be clipped."""
    for bad in ([0.01, math.nan, 0.02], [0.5, 1.2], [-0.1, 0.3]):
        with pytest.raises(ValueError, match="between 0 and 1"):
            bh_adjust(bad)


def test_a_nan_difference_gives_no_interval_and_no_win_tie_loss_count():
    """As randomization_p_value gives NaN for it: an unknown difference is no evidence of none."""
    assert all(math.isnan(value) for value in paired_bootstrap_ci(np.array([math.nan, 0.0, 0.0])))
    assert math.isnan(randomization_p_value(np.array([math.nan, 0.0, 0.0])))
    with pytest.raises(ValueError, match="1 NaN differences"):
        win_tie_loss(np.array([0.0, 0.1, 0.2]), np.array([math.nan, 0.1, 0.3]))
