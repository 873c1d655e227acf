"""The certificate's decision (evaluation/certificate/verdict.py) on simulated panels whose truth
is known: the fast (vectorised, clustered) estimates, max-T permutation and TOST against
straightforward loops on random cases; random splits (false alarms), easy or quoting sets, a weak
system, the style bar; the resampled estimate of the questions that would decide; the line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from retrieval_bench.core.errors import InputError
from retrieval_bench.evaluation.certificate.agreement import RESAMPLES, certificate, pair_verdicts, percentile_interval
from retrieval_bench.evaluation.certificate.certify import (
    certificate_lines,
    certificate_summary,
    panel_certificate,
    set_certificate,
)
from retrieval_bench.evaluation.certificate.verdict import (
    AGREES,
    DISAGREES,
    MAX_BLOCKS,
    MC_BAND,
    UNDETERMINED,
    Rule,
    decide,
    decision_pairs,
    estimates,
    family,
    max_t_critical,
    max_t_null,
    null_until_decided,
    questions_to_decide,
    side,
)
from retrieval_bench.evaluation.stats import ALPHA, Resampling, kendall_tau_rows

# 6 systems; per-question reciprocal ranks drawn so that a question's difficulty is shared by the systems
TRUE_MRR = np.array([0.30, 0.45, 0.50, 0.52, 0.65, 0.80])
# 5 systems whose scores move together (as real retrievers' do): the top three within the margin
CLOSE = np.array([0.30, 0.55, 0.70, 0.71, 0.72])


def pool(n: int, rng: np.random.Generator, means: np.ndarray = TRUE_MRR, luck: float = 0.25) -> np.ndarray:
    """(systems x n) scores in [0, 1]: each question's ease, shared, and each system's own luck."""
    ease = rng.uniform(-0.3, 0.3, n)
    return np.clip(means[:, None] + ease[None, :] + rng.normal(0, luck, (len(means), n)), 0, 1)


def two_metrics(scores: np.ndarray, clusters=None):
    return side({"mrr": scores, "recall@10": (scores > 0.5).astype(float)}, clusters)


def clustered_moments(values: np.ndarray, clusters: np.ndarray) -> tuple[float, float]:
    """The mean and its clustered (CR1) variance, straight from the definition."""
    mean = values.mean()
    groups = np.unique(clusters)
    total = sum((values[clusters == g] - mean).sum() ** 2 for g in groups)
    return mean, len(groups) / (len(groups) - 1) * total / len(values) ** 2


def random_case(rng: np.random.Generator) -> tuple:
    systems, n_r, n_s = rng.integers(3, 7), rng.integers(12, 40), rng.integers(12, 40)
    means = rng.uniform(0.2, 0.8, systems)
    reference = two_metrics(pool(n_r, rng, means), rng.integers(0, rng.integers(3, 12), n_r))
    synthetic = two_metrics(pool(n_s, rng, means + rng.normal(0, 0.05, systems)), rng.integers(0, 9, n_s))
    return reference, synthetic, Rule(margin=float(rng.uniform(0.01, 0.2)), candidates=((0, 1),))


def test_the_clustered_estimates_equal_a_straightforward_computation():
    rng = np.random.default_rng(1)
    for _ in range(20):
        reference, synthetic, rule = random_case(rng)
        fam = family(reference, synthetic, rule)
        diff, se = estimates(reference, synthetic, fam.weights)
        for k in range(len(fam.margin)):
            moments = [
                clustered_moments(fam.weights[k] @ np.vstack(list(one.matrices.values())), one.clusters)
                for one in (reference, synthetic)
            ]
            assert diff[k] == pytest.approx(moments[1][0] - moments[0][0], abs=1e-12)
            assert se[k] == pytest.approx(np.sqrt(moments[0][1] + moments[1][1]), rel=1e-9)


def test_the_max_t_permutation_equals_a_loop_over_the_permutations():
    rng = np.random.default_rng(2)
    for _ in range(5):
        reference, synthetic, rule = random_case(rng)
        fam = family(reference, synthetic, rule)
        groups = (reference.clusters.max() + 1, synthetic.clusters.max() + 1)
        assignments = permutation_assignments(*groups, 40, seed=3)
        fast = max_t_null(reference, synthetic, fam.weights, assignments)
        values = [fam.weights @ np.vstack(list(one.matrices.values())) for one in (reference, synthetic)]
        pooled = np.hstack(values)
        labels = np.concatenate([reference.clusters, synthetic.clusters + groups[0]])
        for draw, to_reference in enumerate(assignments):
            on_reference = np.isin(labels, np.flatnonzero(to_reference))
            largest = 0.0
            for k in range(len(fam.margin)):
                (m_r, v_r), (m_s, v_s) = (
                    clustered_moments(pooled[k, mask], labels[mask]) for mask in (on_reference, ~on_reference)
                )
                largest = max(largest, abs(m_s - m_r) / np.sqrt(v_r + v_s))
            assert fast[draw] == pytest.approx(largest, rel=1e-9)


def test_the_max_t_critical_value_is_the_adjusted_p_value_rule():
    rng = np.random.default_rng(4)
    for draws in (19, 100, 999, 2_000):
        null = rng.normal(size=draws)
        critical = max_t_critical(null)
        for observed in rng.normal(1.5, 1, 200):
            p = (1 + (null >= observed).sum()) / (1 + draws)
            assert (observed > critical) == (p <= ALPHA)
    assert max_t_critical(np.ones(10)) == np.inf  # 10 draws cannot reach p <= 0.05


def test_agrees_is_exactly_two_one_sided_t_tests_on_every_headline_hypothesis():
    rng = np.random.default_rng(5)
    for _ in range(30):
        reference, synthetic, rule = random_case(rng)
        result = decide(reference, synthetic, rule, permutations=200)
        dof = min(reference.clusters.max(), synthetic.clusters.max())
        for h in result["hypotheses"]:
            lower = stats.t.sf((h["diff"] + h["margin"]) / h["se"], dof)  # H0: diff <= -margin
            upper = stats.t.cdf((h["diff"] - h["margin"]) / h["se"], dof)  # H0: diff >= margin
            assert h["equivalent"] == (max(lower, upper) < ALPHA)
        if result["verdict"] == AGREES:
            assert all(h["equivalent"] for h in result["hypotheses"] if h["metric"] == "mrr")


def test_random_splits_are_judged_disagrees_in_at_most_five_percent_of_trials():
    rng = np.random.default_rng(0)
    verdicts = []
    for _ in range(60):
        scores, pages = pool(120, rng), rng.integers(0, 30, 120)
        order = rng.permutation(120)
        halves = [two_metrics(scores[:, half], pages[half]) for half in (order[:60], order[60:])]
        verdicts.append(decide(*halves, permutations=2_000)["verdict"])
    assert verdicts.count(DISAGREES) <= 3  # 5% of 60


def test_a_genuine_split_of_moving_together_systems_mostly_agrees():
    rng = np.random.default_rng(6)
    verdicts = []
    for _ in range(20):
        scores, pages = pool(300, rng, CLOSE, luck=0.05), rng.integers(0, 100, 300)
        halves = [two_metrics(scores[:, half], pages[half]) for half in (np.arange(150), np.arange(150, 300))]
        verdicts.append(decide(*halves, permutations=2_000)["verdict"])
    assert verdicts.count(AGREES) >= 12 and verdicts.count(DISAGREES) <= 1, verdicts


def test_an_easy_set_or_one_the_classifier_tells_apart_is_never_agrees():
    rng = np.random.default_rng(7)
    reference = two_metrics(pool(150, rng, CLOSE, luck=0.05))
    easy = two_metrics(pool(150, rng, CLOSE + 0.25, luck=0.05))  # quoting questions: every system finds the page
    judged = decide(reference, easy, permutations=2_000)
    assert judged["verdict"] == DISAGREES
    assert any(h["kind"] == "level" and h["beyond"] for h in judged["hypotheses"])
    alike = two_metrics(pool(150, rng, CLOSE, luck=0.05))
    assert decide(reference, alike, permutations=2_000)["verdict"] == AGREES
    styled = decide(reference, alike, style_auc=0.97, permutations=2_000)
    assert styled["verdict"] == UNDETERMINED and styled["why_not_agrees"] == ["style"]
    assert decide(reference, alike, Rule(max_style_auc=0.99), style_auc=0.97, permutations=2_000)["verdict"] == AGREES


def test_a_weak_system_cannot_decide_unless_the_set_would_ship_it():
    rng = np.random.default_rng(8)
    means = np.array([0.10, 0.70, 0.71, 0.72])
    reference = two_metrics(pool(200, rng, means, luck=0.05))
    assert decision_pairs(reference.matrices["mrr"].mean(axis=1), reference.matrices["mrr"].mean(axis=1), Rule())[
        1
    ] == [(3, 1), (3, 2)]
    # the weak system does far better here (0.10 -> 0.40), but is still nobody's choice
    lifted = decide(reference, two_metrics(pool(200, rng, means + [0.3, 0, 0, 0], luck=0.05)), permutations=2_000)
    assert lifted["verdict"] == AGREES and all(0 not in h["pair"] for h in lifted["hypotheses"] if h["pair"])
    # unless named
    named = decide(
        reference,
        two_metrics(pool(200, rng, means + [0.3, 0, 0, 0], luck=0.05)),
        Rule(candidates=((0, 3),)),
        permutations=2_000,
    )
    assert named["verdict"] == DISAGREES
    # the set would ship the weak system: its pair with the reference's best decides
    crowned = decide(
        reference, two_metrics(pool(200, rng, np.array([0.80, 0.70, 0.71, 0.72]), luck=0.05)), permutations=2_000
    )
    assert crowned["verdict"] == DISAGREES and crowned["winner"]["mrr"]["synthetic_best"] == 0
    assert crowned["winner"]["mrr"]["p_synthetic_picks_reference_best"] < 0.05


def test_a_set_that_reverses_the_order_is_judged_disagrees():
    rng = np.random.default_rng(9)
    reference = two_metrics(pool(80, rng), rng.integers(0, 25, 80))
    reversed_ = two_metrics(pool(80, rng, TRUE_MRR[::-1]), rng.integers(0, 25, 80))
    assert decide(reference, reversed_, permutations=2_000)["verdict"] == DISAGREES


def test_the_verdict_is_deterministic_and_stable_across_seeds():
    rng = np.random.default_rng(10)
    for _ in range(5):
        reference, synthetic = (two_metrics(pool(60, rng), rng.integers(0, 20, 60)) for _ in range(2))
        runs = [decide(reference, synthetic, seed=seed) for seed in range(5)]
        assert decide(reference, synthetic, seed=0) == runs[0]
        assert len({run["verdict"] for run in runs}) == 1


def test_questions_to_decide_grows_both_sets_and_needs_ten_questions():
    rng = np.random.default_rng(11)
    reference, synthetic = (two_metrics(pool(40, rng, CLOSE, luck=0.05)) for _ in range(2))
    decision = decide(reference, synthetic, permutations=2_000)
    assert decision["verdict"] == UNDETERMINED
    estimate = questions_to_decide(reference, synthetic, decision)
    assert estimate["why"] is None and estimate["n"]["reference"] == estimate["n"]["synthetic"] > 40
    few = two_metrics(pool(8, rng, CLOSE))
    assert questions_to_decide(few, synthetic, decide(few, synthetic, permutations=200))["too_few"] == {
        "set": "reference",
        "n": 8,
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
    """Item 8 of issue 30: the interval ends (steps of the statistic, from RESAMPLES draws) move by at
    most 0.02 over 5 seeds, and the verdict does not move."""
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
            (reference, synthetic),
            (pair_verdicts(reference), pair_verdicts(synthetic)),
            list("abcd"),
            resampling=Resampling(RESAMPLES, seed),
        )["tau_ap"]["ci_low"]
        for seed in range(5)
    }
    assert len(lows) == 1, lows


def test_the_vectorised_tau_ap_equals_the_definition_with_and_without_ties():
    from retrieval_bench.evaluation.certificate.agreement import _tau_ap_rows
    from retrieval_bench.evaluation.stats import tau_ap

    rng = np.random.default_rng(12)
    for levels in (1_000, 3):  # continuous scores (no ties), then few values (ties in both orderings)
        estimated, actual = (rng.integers(0, levels, (300, 6)).astype(float) for _ in range(2))
        expected = [tau_ap(e, a) for e, a in zip(estimated, actual)]
        np.testing.assert_allclose(_tau_ap_rows(estimated, actual), expected, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_each_kind_is_certified_against_reference_questions_of_the_same_kind():
    """Generated multi-evidence questions that reverse the ranking disagree with the hand-written
    multi questions, while the generated single ones do not; a kind the reference lacks is said to
    be uncertified."""
    rng = np.random.default_rng(21)
    n = 60
    sets = ["hand-written"] * (2 * n) + ["generated"] * (3 * n)
    kinds = ["single"] * n + ["multi"] * n + ["single"] * n + ["multi"] * n + ["keyword"] * n
    scores = np.hstack([pool(n, rng), pool(n, rng), pool(n, rng), pool(n, rng, TRUE_MRR[::-1]), pool(n, rng)])
    tables = {
        f"s{i}": pd.DataFrame(
            {"qid": [f"q{j}" for j in range(5 * n)], "question_set": sets, "kind": kinds, "reciprocal_rank": scores[i]}
        )
        for i in range(6)
    }
    cert = panel_certificate(tables, resamples=20)
    by_kind = cert["kinds"]["generated"]
    text = "\n".join(certificate_lines(cert))
    assert "- generated, kind multi against the hand-written questions of that kind: disagrees." in text
    assert "- generated, kind keyword against the hand-written questions of that kind: not certified: 0 " in text
    assert by_kind["multi"]["verdict"] == DISAGREES and by_kind["single"]["verdict"] != DISAGREES
    assert by_kind["keyword"] == {
        "verdict": None,
        "reason": "0 hand-written questions of kind keyword (certified from 10)",
    }
    one_kind = {name: table.assign(kind="single") for name, table in tables.items()}
    assert panel_certificate(one_kind, resamples=20)["kinds"] == {}


def test_a_kinds_verdict_and_line_are_those_of_the_full_set_certificate_of_its_questions():
    """The per-kind verdicts skip the descriptive orderings (set_decision): each kind's verdict
    and line are those the full set_certificate gives that kind's questions, taken here from the
    tables (each question its own cluster, labelled by its row as panel_certificate does)."""
    rng = np.random.default_rng(22)
    n = 30
    sets = ["hand-written"] * (2 * n) + ["generated"] * (2 * n)
    kinds = ["single"] * n + ["multi"] * n + ["single"] * n + ["multi"] * n
    scores = np.hstack([pool(n, rng), pool(n, rng), pool(n, rng, TRUE_MRR + 0.02), pool(n, rng, TRUE_MRR[::-1])])
    systems = [f"s{i}" for i in range(len(TRUE_MRR))]
    tables = {
        name: pd.DataFrame({"qid": range(4 * n), "question_set": sets, "kind": kinds, "reciprocal_rank": scores[i]})
        for i, name in enumerate(systems)
    }
    by_kind = panel_certificate(tables, resamples=20)["kinds"]["generated"]
    verdicts = set()
    for kind in ("single", "multi"):
        rows = [
            [j for j in range(4 * n) if sets[j] == name and kinds[j] == kind] for name in ("hand-written", "generated")
        ]
        sides = tuple(side({"mrr": scores[:, picked]}, [str(j) for j in picked]) for picked in rows)
        full = set_certificate(sides, systems, ("hand-written", "generated"), Rule(), resampling=Resampling(20))
        assert "kendall_tau" in full["metrics"]["mrr"]
        assert by_kind[kind] == {"verdict": full["verdict"], "line": full["line"]}
        verdicts.add(full["verdict"])
    assert DISAGREES in verdicts and len(verdicts) == 2


def test_more_permutations_are_drawn_only_while_the_verdict_sits_on_the_bar():
    """null_until_decided: one block when the largest statistic is far from the max-T bar; more
    blocks (the first one kept, then fresh seeds) while its p is within Monte Carlo error of ALPHA."""
    rng = np.random.default_rng(5)
    reference, synthetic = two_metrics(pool(30, rng)), two_metrics(pool(30, rng))
    weights = family(reference, synthetic, Rule()).weights
    first = max_t_null(reference, synthetic, weights, permutation_assignments(30, 30, 400, 0))
    on_the_bar = float(np.quantile(first, 1 - ALPHA))
    for observed, grows in ((float(first.max()) + 1.0, False), (-1.0, False), (on_the_bar, True)):
        null = null_until_decided((reference, synthetic), weights, observed, 400, 0)
        assert np.array_equal(null[:400], first)  # the first block is the plain one: same seed, same draws
        assert (len(null) > 400) == grows
        assert len(null) % 400 == 0 and len(null) <= MAX_BLOCKS * 400
        if grows:  # drawn until p is clear of ALPHA by MC_BAND errors, or MAX_BLOCKS
            p = (1 + (null >= observed).sum()) / (1 + len(null))
            assert len(null) == MAX_BLOCKS * 400 or abs(p - ALPHA) > MC_BAND * np.sqrt(ALPHA * (1 - ALPHA) / len(null))
    decision = decide(reference, synthetic, permutations=400, seed=0)
    assert decision["permutations"] % 400 == 0


def test_a_side_of_one_question_is_never_agrees_nor_disagrees():
    """One question (one cluster) carries no variance: its side's is infinite, so neither the TOSTs
    nor the max-T test can pass on it, however many reference questions there are."""
    rng = np.random.default_rng(31)
    reference = side({"mrr": pool(1500, rng, CLOSE)})
    for one in (side({"mrr": pool(1, rng, CLOSE)}), side({"mrr": pool(1, rng, CLOSE[::-1])})):
        decision = decide(reference, one, Rule(), permutations=200)
        assert decision["verdict"] == UNDETERMINED
        assert all(h["se"] == np.inf and not h["equivalent"] and not h["beyond"] for h in decision["hypotheses"])


def reviewed_tables(n_generated: int, n_ragas: int, reviewed_ragas: int, kinds: bool = False) -> dict:
    """Systems' tables over generated and ragas questions, the first 40 generated ones and the first
    `reviewed_ragas` ragas ones reviewed and kept (the reference, without real questions)."""
    rng = np.random.default_rng(32)
    n = n_generated + n_ragas
    sets = ["generated"] * n_generated + ["ragas"] * n_ragas
    review = ["fine"] * 40 + ["unreviewed"] * (n_generated - 40) + ["fine"] * reviewed_ragas
    review += ["unreviewed"] * (n_ragas - reviewed_ragas)
    columns = {"question_set": sets, "review": review}
    if kinds:
        columns["kind"] = ["single", "keyword"] * (n // 2)
    scores = pool(n, rng, CLOSE)
    return {f"s{i}": pd.DataFrame({"qid": range(n), "reciprocal_rank": scores[i], **columns}) for i in range(5)}


def test_a_set_left_without_questions_by_the_reviewed_reference_is_not_certified_and_says_why():
    cert = panel_certificate(reviewed_tables(100, 10, 10), resamples=20)
    assert cert["reference"] == "reviewed" and list(cert["sets"]) == ["generated"]
    assert cert["not_certified"] == {
        "ragas": "ragas has 0 questions outside the reviewed questions (a verdict needs 2 on each side)"
    }
    assert "certificate: ragas: not certified: ragas has 0 questions" in "\n".join(certificate_summary(cert))
    assert "**ragas: not certified.** ragas has 0 questions" in "\n".join(certificate_lines(cert))
    one = panel_certificate(reviewed_tables(100, 11, 10), resamples=20)
    assert "ragas has 1 question outside" in one["not_certified"]["ragas"]


def test_a_reference_of_one_reviewed_question_gives_no_certificate():
    tables = {name: table.assign(question_set="generated") for name, table in reviewed_tables(100, 0, 0).items()}
    for table in tables.values():
        table.loc[1:, "review"] = "unreviewed"
    cert = panel_certificate(tables, resamples=20)
    assert cert == {"available": False, "reason": "reviewed has 1 question (a verdict needs 2 on each side)"}


def test_kinds_against_the_reviewed_reference_count_its_questions_and_leave_them_out_of_the_synthetic_side():
    cert = panel_certificate(reviewed_tables(100, 0, 0, kinds=True), resamples=20)
    assert cert["reference"] == "reviewed"
    by_kind = cert["kinds"]["generated"]
    assert set(by_kind) == {"single", "keyword"} and all(entry["verdict"] for entry in by_kind.values())
    # 20 reviewed questions of each kind against the 30 unreviewed generated ones of it
    assert all(
        entry["line"].startswith("generated (30) ") and " reviewed (20) on the decision" in entry["line"]
        for entry in by_kind.values()
    )


def test_the_certificates_best_ties_as_the_leaderboards_does():
    """Equal means summed in another order (0.16833333333333333 and 0.1683333333333333): the
    certificate's best followed the rounding where the leaderboard's goes to the first system."""
    from retrieval_bench.evaluation.certificate.verdict import Rule, decision_pairs
    from retrieval_bench.evaluation.panel.leaderboard import rank_systems

    ranks = np.array([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5, 1 / 6, 0, 0, 1 / 10, 1 / 7, 1 / 9, 0] * 2)
    a, b = ranks, ranks[np.random.default_rng(1).permutation(len(ranks))]
    assert rank_systems({"a": a, "b": b}, 100, 0, 0.95)["best"] == "a"
    for means in (np.array([a.mean(), b.mean()]), np.array([a.mean(), a.mean() + 1e-16])):
        assert decision_pairs(means, np.array([0.5, 0.2]), Rule())[0] == 0


def test_a_tie_for_the_synthetic_sets_best_is_tested_whichever_system_the_panel_lists_first():
    """Systems b and w tie for best on the synthetic set (w's scores are b's); w is 0.30 below b on
    the reference. Only the first of the tied was tested: listing b first gave `agrees`, listing w
    first `disagrees`. Now both orders test (b, w), and a bootstrap tie is an even chance."""
    rng = np.random.default_rng(5)

    def scores(means, n=400):
        ease = rng.normal(0, 0.05, n)
        return np.clip(np.array(means)[:, None] + ease + rng.normal(0, 0.02, (len(means), n)), 0, 1)

    reference = scores([0.80, 0.50, 0.79, 0.40, 0.40])
    synthetic = scores([0.80, 0.80, 0.79, 0.40, 0.40])
    synthetic[1] = synthetic[0]
    clusters = rng.integers(0, 100, 400), rng.integers(0, 100, 400)
    verdicts = []
    for order in ([0, 1, 2, 3, 4], [1, 0, 2, 3, 4]):
        reference_side = side({"mrr": reference[order]}, clusters[0])
        synthetic_side = side({"mrr": synthetic[order]}, clusters[1])
        decision = decide(reference_side, synthetic_side, Rule())
        b, w = order.index(0), order.index(1)
        assert any(h["pair"] in ((b, w), (w, b)) and h["beyond"] for h in decision["hypotheses"])
        verdicts.append(decision["verdict"])
        winner = decision["winner"]["mrr"]
        assert winner["synthetic_best"] == winner["reference_best"] == b
        assert winner["p_synthetic_picks_reference_best"] == pytest.approx(0.5)  # b and w tie in every draw
    assert verdicts == [DISAGREES, DISAGREES]


def test_a_score_that_is_not_a_number_is_refused_not_crowned():
    with pytest.raises(InputError, match="mrr: system 1 has no finite score for question 2"):
        side({"mrr": np.array([[0.5, 0.5, 0.5], [1.0, 0.0, np.nan]])})


def style_case(extra_reference: int = 0) -> tuple[dict, list[dict]]:
    """Three systems scored alike on hand-written and generated questions, the generated single
    ones long and quoting their passage; `extra_reference` unanswerable hand-written rows in the
    golden set only (no ranking metric, no echo measure)."""
    rng = np.random.default_rng(3)
    means = {"default": 0.85, "bm25": 0.55, "hybrid": 0.30}
    rows, golden = [], []
    for question_set, kind, n, quoting in (
        ("hand-written", "single", 300, False),
        ("hand-written", "multi", 30, False),
        ("generated", "single", 300, True),
    ):
        for i in range(n):
            qid, doc = f"{question_set}-{kind}-{i}", f"doc{rng.integers(0, 60)}.md"
            question = "What does the documentation say about " + "word " * 12 + "?" if quoting else "how index?"
            golden.append(
                {
                    "qid": qid,
                    "question": question,
                    "doc_id": doc,
                    "echo_content_share": 1.0 if quoting else 0.1,
                    "echo_longest_ngram": 10 if quoting else 1,
                }
            )
            ease = rng.normal(0, 0.03)
            scores = {s: float(np.clip(m + ease + rng.normal(0, 0.01), 0, 1)) for s, m in means.items()}
            rows.append(
                {"qid": qid, "question_set": question_set, "kind": kind, **{f"rr_{s}": v for s, v in scores.items()}}
            )
    for i in range(extra_reference):
        golden.append({"qid": f"none-{i}", "question": "how index?", "doc_id": "doc0.md", "echo_content_share": None})
    table = pd.DataFrame(rows).set_index("qid")
    aligned = {
        s: table[["question_set", "kind"]].assign(
            reciprocal_rank=table[f"rr_{s}"], **{"recall@10": table[f"rr_{s}"] > 0.5}
        )
        for s in means
    }
    return aligned, golden


def test_a_kind_the_style_classifier_tells_apart_cannot_agree():
    """The per-kind verdicts were taken without the style gap: the set could not agree (AUC 1.00),
    yet its single questions, the very same ones, were `agrees`."""
    aligned, golden = style_case()
    cert = panel_certificate(aligned, resamples=50, golden=golden)
    assert cert["sets"]["generated"]["style_gap"]["classifier_auc"] > 0.85
    single = cert["kinds"]["generated"]["single"]
    assert single["verdict"] != AGREES and "a classifier tells it apart from the reference (AUC 1.00" in single["line"]


def test_the_style_gap_compares_the_questions_the_verdict_scores():
    """Unanswerable reference rows (no ranking metric, no echo measure) entered the classifier,
    their missing echo read as 0: the reference counted 250 where the verdict had 216."""
    aligned, golden = style_case(extra_reference=40)
    gap = panel_certificate(aligned, resamples=50, golden=golden)["sets"]["generated"]["style_gap"]
    assert gap["reference"]["n_questions"] == 330 and gap["synthetic"]["n_questions"] == 300


def test_a_missing_echo_measure_tells_the_classifier_nothing():
    """Two sets drawn alike; 40 rows of one without an echo measure. Read as 0 they told the sets
    apart (AUC 0.61 from 0.51); as the feature's mean they do not."""
    from retrieval_bench.evaluation.certificate.style_gap import style_gap

    rng = np.random.default_rng(4)

    def rows(n, name):
        return [
            {
                "qid": f"{name}{i}",
                "question": " ".join(["word"] * int(rng.integers(4, 14))) + "?",
                "echo_content_share": float(rng.uniform(0.2, 0.8)),
                "echo_longest_ngram": int(rng.integers(1, 6)),
            }
            for i in range(n)
        ]

    reference, synthetic = rows(200, "r"), rows(200, "s")
    alike = style_gap(reference, synthetic)["classifier_auc"]
    for row in reference[:40]:
        row["echo_content_share"] = row["echo_longest_ngram"] = None
    gap = style_gap(reference, synthetic)
    assert abs(gap["classifier_auc"] - 0.5) < 0.06 and abs(gap["classifier_auc"] - alike) < 0.04
    assert gap["feature_auc"]["echo_content_share"] == pytest.approx(
        style_gap(reference[40:], synthetic)["feature_auc"]["echo_content_share"], abs=0.05
    )


def test_fail_on_not_agrees_fails_a_set_too_small_for_a_verdict():
    from retrieval_bench.evaluation.panel.report import failed_line

    cert = panel_certificate(reviewed_tables(100, 10, 10), resamples=20)  # ragas: not certified
    assert cert["sets"]["generated"]["verdict"] and "ragas" in cert["not_certified"]
    line = failed_line(cert, "not-agrees")
    assert line is not None and "ragas" in line and "not certified: ragas has 0 questions" in line
    assert failed_line(cert, "disagrees") is None or "ragas" not in failed_line(cert, "disagrees")


def test_most_inflated_names_the_systems_the_set_shifts_up():
    from retrieval_bench.evaluation.certificate.certify import _inflated

    assert _inflated({"bm25": 0.391, "default": -0.219, "ann": -0.174, "hybrid": 0.01}) == (
        "most inflated: bm25 +0.391, hybrid +0.010"
    )
    assert _inflated({"a": -0.1, "b": -0.3, "c": 0.0}) == "none inflated, most deflated: b -0.300, a -0.100, c +0.000"


def test_multi_questions_are_certified_on_the_metrics_that_fit_them():
    """A kind's verdict was taken on mrr, ndcg and recall, whatever the kind: generated multi
    questions that reverse the order on complete@10 (every piece found) were not judged on it."""
    rng = np.random.default_rng(23)
    n = 60
    sets = ["hand-written"] * (2 * n) + ["generated"] * (2 * n)
    kinds = ["single", "multi"] * (2 * n)
    reciprocal = np.hstack([pool(n, rng), pool(n, rng), pool(n, rng), pool(n, rng)])[:, np.argsort(np.argsort(kinds))]
    complete = np.where(np.array(kinds) == "multi", np.nan, 0.0) * np.ones((len(TRUE_MRR), 1))
    multi = np.flatnonzero(np.array(kinds) == "multi")
    complete[:, multi[:n]] = (pool(n, rng) > 0.5).astype(float)
    complete[:, multi[n:]] = (pool(n, rng, TRUE_MRR[::-1]) > 0.5).astype(float)
    tables = {
        f"s{i}": pd.DataFrame(
            {
                "qid": range(4 * n),
                "question_set": sets,
                "kind": kinds,
                "reciprocal_rank": reciprocal[i],
                "complete@10": complete[i],
            }
        )
        for i in range(len(TRUE_MRR))
    }
    multi_entry = panel_certificate(tables, resamples=20)["kinds"]["generated"]["multi"]
    assert multi_entry["verdict"] == DISAGREES and "on complete@10" in multi_entry["line"]


def test_two_identical_systems_best_on_both_sides_are_the_same_winner():
    """An ANN that returns exact dense's results ties it everywhere: the same winner read P 0.50."""
    rng = np.random.default_rng(6)
    clear = np.array([0.9, 0.5, 0.4, 0.3, 0.2])
    reference, synthetic = pool(60, rng, clear), pool(60, rng, clear)
    reference[1], synthetic[1] = reference[0], synthetic[0]
    winner = decide(side({"mrr": reference}), side({"mrr": synthetic}), Rule())["winner"]["mrr"]
    assert winner["p_synthetic_picks_reference_best"] == winner["p_reference_picks_synthetic_best"] == 1.0
    assert winner["synthetic_best"] == winner["reference_best"] == 0


def test_a_multi_kind_agrees_only_when_its_complete_at_10_does():
    """A kind's headline was mrr whenever present: generated multi questions equal on mrr agreed
    while their only complete@10 decision pair differed by -0.16 against a 0.03 margin."""
    from retrieval_bench.evaluation.certificate.verdict import headline_metric

    assert headline_metric(["mrr", "complete@1", "complete@10", "evidence_recall@10"]) == "complete@10"
    assert headline_metric(["mrr", "complete@5", "complete@20"]) == "complete@20"  # as the leaderboard's
    assert headline_metric(["mrr", "ndcg@10"]) == "mrr"
    rng = np.random.default_rng(9)
    n = 400
    same = pool(n, rng, CLOSE)

    def complete(shares):  # each question's complete@10, 0 or 1, at each system's share
        return (rng.random((len(shares), n)) < np.array(shares)[:, None]).astype(float)

    # on complete@10 the reference's best two are close (0.60, 0.61); the synthetic set puts them 0.2 apart
    reference = {"mrr": same, "complete@10": complete([0.60, 0.61, 0.29, 0.2, 0.1])}
    synthetic = {"mrr": same.copy(), "complete@10": complete([0.45, 0.65, 0.46, 0.2, 0.1])}
    decision = decide(side(reference), side(synthetic), Rule(), permutations=2000)
    assert decision["verdict"] != AGREES


def permutation_assignments(groups_reference: int, groups_synthetic: int, draws: int, seed) -> np.ndarray:
    """All draws' assignments at once, as the certificate drew them before it drew them in blocks:
    the reference the block-wise null is checked against."""
    keys = np.random.default_rng(seed).random((draws, groups_reference + groups_synthetic))
    return np.argsort(keys, axis=1) < groups_reference


def test_the_null_drawn_a_block_at_a_time_is_the_same_null_in_bounded_memory(monkeypatch):
    """10,000 real queries made one 20,000 x clusters array of keys and its order (3.5 GB): the null
    is now drawn a block of draws at a time, the same draws from the same stream."""
    from retrieval_bench.evaluation.certificate import verdict

    rng = np.random.default_rng(6)
    reference, synthetic = two_metrics(pool(30, rng)), two_metrics(pool(25, rng))
    weights = family(reference, synthetic, Rule()).weights
    whole = max_t_null(reference, synthetic, weights, permutation_assignments(30, 25, 1000, 7))
    monkeypatch.setattr(verdict, "ASSIGNMENT_BLOCK", 55 * 64)  # 55 clusters: 64 draws a block
    sizes = []
    one_block = verdict.max_t_null
    monkeypatch.setattr(verdict, "max_t_null", lambda *args: sizes.append(len(args[3])) or one_block(*args))
    assert np.array_equal(verdict.max_t_null_in_blocks(reference, synthetic, weights, 1000, 7), whole)
    assert sizes == [64] * 15 + [40]
