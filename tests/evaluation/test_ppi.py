"""Prediction-powered figures (evaluation.ppi) against computations written independently, and what
people's reviews change in a system's scores, the leaderboard's report, compare and the certificate."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from judge_helpers import chunk_table, golden_rows, run_table
from scipy import optimize, special, stats
from statsmodels.stats.multitest import multipletests

from retrieval_bench.corpus.duplicates import find_duplicates
from retrieval_bench.evaluation import ppi
from retrieval_bench.evaluation.compare.command import compare_tables
from retrieval_bench.evaluation.compare.report import format_text
from retrieval_bench.evaluation.panel.headline import headline
from retrieval_bench.evaluation.panel.reviewed import judge_agreement, ppi_figures, show_lines
from retrieval_bench.evaluation.ppi import ReviewSample, ppi_mean, ppi_paired
from retrieval_bench.evaluation.score.judged import JudgedInputs
from retrieval_bench.evaluation.score.reviewed import human_grades, review_marks
from retrieval_bench.evaluation.score.scoring import score_system
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.reviews import append_clicks, grade_click, question_click, read_reviews, rejections


def _t975(df: int) -> float:
    """Student's t 97.5% quantile solved from its CDF written as the regularized incomplete beta."""
    return optimize.brentq(
        lambda x: 1 - 0.5 * special.betainc(df / 2, 0.5, df / (df + x * x)) - 0.975, 0, 100, xtol=1e-14
    )


def _case(rng: np.random.Generator, most: int = 80):
    n, big_n = int(rng.integers(3, most)), int(rng.integers(3, 500))
    f_lab, f_unl = rng.random(n), rng.random(big_n)
    noise = rng.normal(0, rng.random(), n)
    y = np.clip(rng.random() * f_lab + noise, 0, 1)
    return y, f_lab, f_unl


def _lambda_by_hand(y, keep, f_lab, f_unl):
    """PPI++'s power-tuned lambda of one set of reviewed questions, its sums written out."""
    m, big_n = len(y), len(f_unl)
    if sum(keep) == 0:
        return 0.0
    theta0 = sum(k * v for k, v in zip(keep, y, strict=True)) / sum(keep)
    g = [k * (v - theta0) for k, v in zip(keep, y, strict=True)]
    g_f = [v - theta0 for v in f_lab]
    g_mean, g_f_mean = sum(g) / m, sum(g_f) / m
    covariance = sum((a - g_mean) * (b - g_f_mean) for a, b in zip(g, g_f, strict=True)) / m
    f_all = list(f_lab) + list(f_unl)
    f_mean = sum(f_all) / len(f_all)
    spread = sum((v - f_mean) ** 2 for v in f_all) / (len(f_all) - 1)
    return 0.0 if spread < 1e-12 else min(1.0, max(0.0, covariance / ((1 + m / big_n) * spread)))


def _point_by_hand(y, keep, f_lab, f_unl, lam=None):
    """The estimate with each reviewed question's lambda tuned on the others (or the given lam):
    the root of the estimating equation, and the mean lambda."""
    lams = [
        _lambda_by_hand(np.delete(y, i), np.delete(keep, i), np.delete(f_lab, i), f_unl) if lam is None else lam
        for i in range(len(y))
    ]
    lam_bar = sum(lams) / len(lams)

    def equation(theta):
        labelled = [k * (v - theta) - li * (f - theta) for k, v, f, li in zip(keep, y, f_lab, lams, strict=True)]
        return sum(labelled) / len(y) + lam_bar * (unl_mean - theta)

    unl_mean = sum(f_unl) / len(f_unl)

    return optimize.brentq(equation, -10, 10, xtol=1e-14), lam_bar


def _by_hand(y, f_lab, f_unl, keep=None, lam=None):
    """The estimate, its mean lambda and its 95% interval: the jackknife over the reviewed questions
    (each left out in turn, everything tuned again), the unreviewed mean's variance, Student's t."""
    keep = np.ones_like(y) if keep is None else keep
    n, big_n = len(y), len(f_unl)
    estimate, lam_bar = _point_by_hand(y, keep, f_lab, f_unl, lam)
    left_out = [
        _point_by_hand(np.delete(y, j), np.delete(keep, j), np.delete(f_lab, j), f_unl, lam)[0] for j in range(n)
    ]
    centre = sum(left_out) / n
    variance = (n - 1) / n * sum((v - centre) ** 2 for v in left_out)
    unl_mean = sum(f_unl) / big_n
    variance += (lam_bar * n / sum(keep)) ** 2 * sum((v - unl_mean) ** 2 for v in f_unl) / big_n / big_n
    half = _t975(n - 1) * math.sqrt(variance)
    return estimate, lam_bar, (estimate - half, estimate + half)


def _in_range(estimate, interval, n_kept):
    """The interval kept in [0, 1]; one of no width (every kept Y alike) is the share's exact
    95% bound (Clopper-Pearson: the Beta(n, 1) quantile), the rest of the questions anywhere."""
    if interval[1] - interval[0] < 1e-12:
        elsewhere = 1 - stats.beta.ppf(0.05, n_kept, 1)
        interval = (estimate * (1 - elsewhere), estimate + (1 - estimate) * elsewhere)
    return tuple(np.clip(interval, 0, 1))


def test_the_ppi_mean_matches_a_hand_computation_on_random_cases():
    rng = np.random.default_rng(7)
    for _ in range(60):
        y, f_lab, f_unl = _case(rng, most=25)
        estimate, lam, interval = _by_hand(y, f_lab, f_unl)
        got = ppi_mean(y, f_lab, f_unl)
        assert got is not None
        assert got.estimate == pytest.approx(np.clip(estimate, 0, 1), abs=1e-10) and got.lam == pytest.approx(
            lam, abs=1e-12
        )
        assert (got.low, got.high) == pytest.approx(_in_range(estimate, interval, len(y)), abs=1e-10)


def test_with_rejected_questions_it_matches_the_hand_computation_too():
    rng = np.random.default_rng(11)
    for case in range(60):
        y, f_lab, f_unl = _case(rng, most=20)
        keep = (rng.random(len(y)) < (0.7 if case % 3 else 0.0)).astype(float)
        keep[:2] = 1.0  # every third case keeps just 2: some left-out pairs leave no kept question
        lam = None if case % 2 else float(rng.random())
        estimate, lam_bar, interval = _by_hand(y, f_lab, f_unl, keep, lam)
        got = ppi_mean(y, f_lab, f_unl, keep, lam)
        assert got.estimate == pytest.approx(np.clip(estimate, 0, 1), abs=1e-10) and got.lam == pytest.approx(
            lam_bar, abs=1e-12
        )
        assert (got.low, got.high) == pytest.approx(_in_range(estimate, interval, keep.sum()), abs=1e-10)
        assert got.n_kept == int(keep.sum())
        assert ppi_mean(y, f_lab, f_unl, np.ones_like(y), lam) == ppi_mean(y, f_lab, f_unl, None, lam)


def test_lambda_zero_is_students_t_interval_and_lambda_one_plain_ppi():
    rng = np.random.default_rng(3)
    for _ in range(20):
        y, f_lab, f_unl = _case(rng)
        classical = ppi_mean(y, f_lab, f_unl, lam=0.0)
        student = stats.ttest_1samp(y, 0.0)
        assert (classical.estimate, classical.low, classical.high) == pytest.approx(
            (y.mean(), *np.clip(student.confidence_interval(0.95), 0, 1)), abs=1e-12
        )
        assert classical.p_value() == pytest.approx(student.pvalue, rel=1e-9)
        plain = ppi_mean(y, f_lab, f_unl, lam=1.0)
        assert plain.estimate == pytest.approx(np.clip(f_unl.mean() + (y - f_lab).mean(), 0, 1))


def test_a_model_figure_that_never_varies_gets_lambda_zero():
    rng = np.random.default_rng(19)
    y = rng.random(30)
    flat = ppi_mean(y, np.full(30, 0.3), np.full(200, 0.3))
    assert flat.lam == 0.0 and flat == ppi_mean(y, np.full(30, 0.3), np.full(200, 0.3), lam=0.0)


def test_the_jackknife_in_chunks_equals_it_in_one_go(monkeypatch):
    rng = np.random.default_rng(17)
    y, f_lab, f_unl = _case(rng)
    whole = ppi_mean(y, f_lab, f_unl)
    monkeypatch.setattr(ppi, "LAMBDAS_AT_ONCE", 3 * len(y) + 1)  # 3 left-out questions at a time
    chunked = ppi_mean(y, f_lab, f_unl)
    assert chunked.to_dict(12) == pytest.approx(whole.to_dict(12), abs=1e-12)


def test_the_paired_interval_is_the_ppi_mean_of_the_differences():
    rng = np.random.default_rng(5)
    reviewed = rng.random(120) < 0.3
    f_a, f_b = rng.random(120), rng.random(120)
    y_a, y_b = np.clip(f_a[reviewed] + 0.1, 0, 1), f_b[reviewed]
    direct = ppi_mean(y_b - y_a, (f_b - f_a)[reviewed], (f_b - f_a)[~reviewed], bounds=(-1, 1))
    assert ppi_paired(y_a, y_b, f_a, f_b, ReviewSample(reviewed)) == direct


def lenient_coverage(seed: int, reviewed_n: int, trials: int) -> float:
    """The share of `trials` PPI intervals from `reviewed_n` random reviewed questions (of 2,000)
    that cover the true mean, under a lenient model calling 30% of pairs relevant."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(2000) < 0.4).astype(float)
    model = np.where(rng.random(2000) < 0.3, 1.0, truth)
    covered = 0
    for _ in range(trials):
        reviewed = np.zeros(2000, dtype=bool)
        reviewed[rng.choice(2000, reviewed_n, replace=False)] = True
        got = ppi_mean(truth[reviewed], model[reviewed], model[~reviewed])
        covered += got.low <= truth.mean() <= got.high
    return covered / trials


def test_the_intervals_cover_a_biased_judges_truth_about_95_percent_of_the_time():
    assert lenient_coverage(0, 60, 400) >= 0.91  # 95% nominal; 400 draws put the share within about 2 points


def test_with_25_reviewed_questions_the_intervals_still_cover():
    """The lenient judge on 25 reviewed questions: a lambda tuned on the very questions it
    corrects, a variance that ignored it and the normal's 1.96 covered 89.5% here."""
    assert lenient_coverage(1, 25, 600) >= 0.92  # 95% nominal; 600 draws put the share within about 1.8 points


def test_reviewed_questions_that_all_agree_still_give_an_interval_of_the_right_size():
    """25 reviewed recall@10s of 1 said [1.000, 1.000] (and a paired delta of 1 on each of 4
    questions p = 0) where the mean was 0.95: a t interval has no width without spread. The bound
    is then Clopper-Pearson's on the share at that value, the rest anywhere in range."""
    ones = np.ones(25)
    got = ppi_mean(ones, np.full(25, 0.6), np.random.default_rng(0).random(200))
    assert got.estimate == 1.0 and got.high == 1.0
    assert got.low == pytest.approx(stats.beta.ppf(0.05, 25, 1), abs=1e-12)  # the exact lower bound of a share
    assert got.low < 0.95
    delta = ppi_paired(np.zeros(4), np.ones(4), np.zeros(60), np.ones(60), ReviewSample(np.arange(60) < 4))
    assert delta.high == 1.0 and delta.low == pytest.approx(1 - 2 * (1 - 0.05**0.25))
    assert 0.05 < delta.p_value() < 0.2  # four questions cannot make a difference certain
    coverage = []
    rng = np.random.default_rng(7)
    for _ in range(400):  # a 0/1 metric whose mean is 0.95, judged by a lenient model
        truth = (rng.random(2000) < 0.95).astype(float)
        model = np.where(rng.random(2000) < 0.3, 1.0, truth)
        reviewed = np.zeros(2000, dtype=bool)
        reviewed[rng.choice(2000, 25, replace=False)] = True
        got = ppi_mean(truth[reviewed], model[reviewed], model[~reviewed])
        coverage.append(got.low <= truth.mean() <= got.high)
    assert np.mean(coverage) >= 0.9  # 73% before, a quarter of the intervals of no width


def test_the_people_only_interval_of_a_share_is_exact_and_covers_at_least_95_percent():
    """The people-only interval of a 0/1 figure was the t interval of a share: 87.5% coverage at a
    share of 0.9 from 50 reviewed, 88.8% at 0.8 from 25 (bench/ppi_coverage.py --binary). It is now
    Clopper-Pearson's, checked against scipy's exact binomial interval, and its coverage computed
    exactly over the binomial's outcomes is at least 95% at every share and size."""
    rng = np.random.default_rng(11)
    for _ in range(30):
        size = int(rng.integers(2, 80))
        y = (rng.random(size) < rng.random()).astype(float)
        keep = (rng.random(size) < 0.8).astype(float)
        keep[:2] = 1.0
        got = ppi_mean(y, rng.random(size), rng.random(50), keep, lam=0.0)
        kept = int(keep.sum())
        exact = stats.binomtest(int((keep * y).sum()), kept).proportion_ci(0.95, method="exact")
        assert (got.low, got.high) == pytest.approx((exact.low, exact.high), abs=1e-9)
        assert got.estimate == pytest.approx((keep * y).sum() / kept) and got.n_kept == kept
    for size in (10, 25, 50, 100):
        outcomes = np.arange(size + 1)
        ends = [ppi_mean(np.r_[np.ones(x), np.zeros(size - x)], np.zeros(size), np.zeros(9), lam=0.0) for x in outcomes]
        for share in np.linspace(0.01, 0.99, 99):
            inside = np.array([end.low <= share <= end.high for end in ends])
            assert stats.binom.pmf(outcomes, size, share)[inside].sum() >= 0.95 - 1e-12, (size, share)
    graded = np.array([0.5, 0.6, 0.5, 0.7])  # not a share: the t interval
    half = _t975(3) * graded.std(ddof=1) / 2
    got = ppi_mean(graded, np.zeros(4), np.zeros(9), lam=0.0)
    assert (got.low, got.high) == pytest.approx((graded.mean() - half, graded.mean() + half), abs=1e-12)


def test_an_interval_stays_in_the_metrics_range():
    """Two reviewed mrrs of 1/3 and 1 said 0.667 [-3.569, 4.902]."""
    got = ppi_mean(np.array([1 / 3, 1.0]), np.array([0.5, 0.5]), np.array([0.4, 0.6]), lam=0.0)
    assert (got.low, got.high) == (0.0, 1.0) and got.estimate == pytest.approx(2 / 3)
    wide = stats.ttest_1samp([1 / 3, 1.0], 0.0)
    assert got.p_value() == pytest.approx(wide.pvalue, rel=1e-9)  # the test is the t test still


def test_too_few_reviewed_questions_give_no_interval():
    assert ppi_mean(np.array([1.0]), np.array([1.0]), np.array([0.0, 1.0])) is None
    assert ppi_mean(np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([0.5]), np.zeros(2)) is None
    assert ppi_mean(np.array([1.0, 0.0]), np.array([1.0, 0.0]), np.array([0.5]), np.array([1.0, 0.0])) is None


# --- reviews in the pipeline's scoring ---------------------------------------------------------
def _reviewed(tmp_path, golden):
    folder = tmp_path / "reviews"
    for click in (
        question_click("ana", "q0", "fine"),
        question_click("ana", "q1", "ambiguous"),
        question_click("ana", "q2", "fine"),
        question_click("bo", "q2", "fine"),
        grade_click("ana", "q0", "c05", 3),
        grade_click("ana", "q0", "c01", 0),
        grade_click("bo", "q0", "c01", 1),
        grade_click("bo", "q0", "other-chunking:0-800", 3),  # another system's chunk: not this one's
    ):
        append_clicks(folder, [click])
    return read_reviews(folder, {row["qid"] for row in golden})


def _scored(golden, chunks, reviews, pool=()):
    return score_system(
        Scoring(ks=(1, 5)),
        golden,
        chunks,
        run_table(golden, chunks),
        JudgedInputs(find_duplicates(chunks), list(pool), "pool", reviews),
        run_info_path="absent.json",
    )[:2]


def test_without_reviews_the_scores_are_unchanged(tmp_path):
    chunks = chunk_table()
    golden = golden_rows(chunks)
    before = _scored(golden, chunks, None)
    empty = _scored(golden, chunks, read_reviews(tmp_path / "none", {row["qid"] for row in golden}))
    pd.testing.assert_frame_equal(before[0], empty[0])
    assert before[1] == empty[1] and "review" not in before[0] and "n_rejected" not in before[1]


def test_rejected_questions_leave_the_summary_and_peoples_grades_win_over_the_judges(tmp_path):
    chunks = chunk_table()
    golden = golden_rows(chunks)
    reviews = _reviewed(tmp_path, golden)
    pool = [{"qid": "q0", "chunk_id": "c01", "grade": 3}, {"qid": "q0", "chunk_id": "c05", "grade": 0}]
    table, summary = _scored(golden, chunks, reviews, pool)
    assert table["review"].tolist() == ["fine", "ambiguous", "fine", "unreviewed", "unreviewed", "unreviewed"]
    assert summary["n_rejected"] == 1 and summary["n_questions"] == 5
    kept = table[table["review"] != "ambiguous"]
    assert summary["mrr"] == pytest.approx(kept["reciprocal_rank"].mean())
    # q0: the judge calls c01 (rank 1) relevant, people do not (grades 0 and 1: lower median 0) and
    # call c05 relevant: people's view ranks its gold (rank 3) first among relevant chunks
    ranked = run_table(golden, chunks)
    first = ranked[(ranked["qid"] == "q0") & ranked["chunk_id"].isin(["c00", "c05"])]["rank"].min()
    assert table.loc[0, "judged_reciprocal_rank"] == pytest.approx(1 / first)
    assert table.loc[0, "judge_only_reciprocal_rank"] == pytest.approx(1.0)
    assert human_grades(reviews, set(chunks["chunk_id"])) == {"q0": {"c01": 0, "c05": 3}}
    assert review_marks(reviews, ["q0", "q1", "q9"]) == ["fine", "ambiguous", "unreviewed"]


def test_the_review_report_counts_rejections_by_set_and_kind_and_the_judges_agreement(tmp_path):
    chunks = chunk_table()
    golden = golden_rows(chunks)
    golden[1]["kind"] = "multi_hop"
    reviews = _reviewed(tmp_path, golden)
    counted = rejections(golden, reviews)
    assert counted["n_reviewed"] == 3 and counted["n_rejected"] == 1 and counted["by_reason"]["ambiguous"] == 1
    assert counted["by_set"]["hand-written"]["multi_hop"]["rejection_rate"] == 1.0
    assert counted["by_set"]["hand-written"]["single"] == {
        "n_reviewed": 2,
        "n_rejected": 0,
        "by_reason": dict.fromkeys(["ambiguous", "not_answerable", "gives_away", "not_real"], 0),
        "rejection_rate": 0.0,
    }
    pool = [{"qid": "q0", "chunk_id": "c01", "grade": 3}, {"qid": "q0", "chunk_id": "c05", "grade": 3}]
    agreement = judge_agreement(reviews, pool, min_grade=2)
    assert agreement["n_pairs"] == 2 and agreement["leniency"] == 1.0  # c01: people 0, judge 3
    assert agreement["confusion"]["counts"][0][3] == 1 and agreement["confusion"]["counts"][3][3] == 1
    assert agreement["kappa"] == 0.0  # the judge says 3 to everything: no agreement beyond chance
    # metrics/headline.json's reviews block: the counts, a number per reason
    figures = headline({}, None, None, {}, rejections=counted)["reviews"]
    assert figures == {
        "n_reviewed": 3,
        "n_rejected": 1,
        "rejected_ambiguous": 1,
        "rejected_not_answerable": 0,
        "rejected_gives_away": 0,
        "rejected_not_real": 0,
    }
    assert "reviews" not in headline({}, None, None, {})


def _aligned_tables(rng, n=300, reviewed_n=60, levels=(("a", 0.4), ("b", 0.6))):
    marks = np.array(["unreviewed"] * n, dtype=object)
    marks[rng.choice(n, reviewed_n, replace=False)] = "fine"
    tables = {}
    for system, level in levels:
        truth = (rng.random(n) < level).astype(float)
        judge = np.where(rng.random(n) < 0.2, 1.0, truth)
        tables[system] = pd.DataFrame(
            {
                "reciprocal_rank": truth,
                "judged_reciprocal_rank": np.where(marks == "fine", truth, judge),
                "judge_only_reciprocal_rank": judge,
                "review": marks,
            },
            index=[f"q{i}" for i in range(n)],
        )
    return tables


def test_the_leaderboards_ppi_figures_and_compares_paired_interval_agree():
    tables = _aligned_tables(np.random.default_rng(2))
    figures = ppi_figures(tables)
    assert figures["available"] and figures["n_reviewed"] == 60 and figures["n_unreviewed"] == 240
    assert figures["too_few"] is None
    assert ppi_figures(_aligned_tables(np.random.default_rng(2), reviewed_n=10))["too_few"].startswith("only 10 ")
    judged = figures["views"]["judged"]["mrr"]
    assert judged["best"] == "b" and "delta_to_best" in judged["systems"]["a"]
    delta = judged["systems"]["a"]["delta_to_best"]
    df = delta["n_reviewed"] - 1
    t = delta["estimate"] / ((delta["high"] - delta["low"]) / (2 * _t975(df)))
    p = 2 * stats.t.sf(abs(t), df)  # one system against the best: Holm leaves it as it is
    assert judged["systems"]["a"]["p_holm"] == pytest.approx(p, abs=1e-3)
    assert judged["systems"]["a"]["differs_from_best"] == (p < 0.05)
    reviewed = tables["a"]["review"].to_numpy() == "fine"
    a = tables["a"]
    direct = ppi_mean(
        a["judged_reciprocal_rank"][reviewed],
        a["judge_only_reciprocal_rank"][reviewed],
        a["judge_only_reciprocal_rank"][~reviewed],
    )
    assert judged["systems"]["a"]["ppi"] == direct.to_dict()
    assert judged["systems"]["a"]["uncorrected"] == round(a["judge_only_reciprocal_rank"].mean(), 4)
    comparison = compare_tables(tables["b"].reset_index(names="qid"), tables["a"].reset_index(names="qid"))
    assert comparison.ppi["judged"]["mrr"] == judged["systems"]["a"]["delta_to_best"]
    assert "Prediction-powered delta B - A" in format_text(comparison)
    assert "ppi_deltas" in json.loads(json.dumps(comparison.to_dict(), default=str))


def _p_from_interval(delta: dict) -> float:
    df = delta["n_reviewed"] - 1
    return 2 * stats.t.sf(abs(delta["estimate"] / ((delta["high"] - delta["low"]) / (2 * _t975(df)))), df)


def test_the_marks_against_the_best_are_holm_over_every_pair_of_systems():
    """The best is picked from the same data: each system's p against it is Holm-adjusted over
    every pair (here 3), each pair's p read back from compare's own paired interval."""
    tables = _aligned_tables(np.random.default_rng(5), levels=(("a", 0.4), ("b", 0.6), ("c", 0.45)))
    judged = ppi_figures(tables)["views"]["judged"]["mrr"]
    assert judged["best"] == "b"
    pairs = [("b", "a"), ("b", "c"), ("a", "c")]
    raw = []
    for first, second in pairs:
        first_table, second_table = (tables[name].reset_index(names="qid") for name in (first, second))
        raw.append(_p_from_interval(compare_tables(first_table, second_table).ppi["judged"]["mrr"]))
    adjusted = multipletests(raw, method="holm")[1]
    for system, p in zip(("a", "c"), adjusted[:2], strict=True):
        assert judged["systems"][system]["p_holm"] == pytest.approx(p, abs=2e-3)
        assert judged["systems"][system]["differs_from_best"] == (p < 0.05)


def test_the_judged_views_best_is_its_own_not_the_strict_leaderboards():
    """The leaderboard's best (strict view) names the strict leader; the judged view takes its own
    highest PPI estimate, so its deltas and Holm tests are against the judged leader."""
    tables = _aligned_tables(np.random.default_rng(2))
    figures = ppi_figures(tables, best={"mrr": "a"})
    assert figures["views"]["strict"]["mrr"]["best"] == "a"
    judged = figures["views"]["judged"]["mrr"]
    estimates = {name: row["ppi"]["estimate"] for name, row in judged["systems"].items()}
    assert judged["best"] == max(estimates, key=estimates.get) == "b"
    assert "delta_to_best" not in judged["systems"]["b"] and "delta_to_best" in judged["systems"]["a"]
    one = _aligned_tables(np.random.default_rng(2), reviewed_n=1)  # too few reviewed for any PPI figure
    assert ppi_figures(one)["views"]["judged"]["mrr"]["best"] == "b"  # the higher mean, not the first listed
    every = ppi_figures(_aligned_tables(np.random.default_rng(2), n=40, reviewed_n=40))
    assert all(row["ppi"] for row in every["views"]["judged"]["mrr"]["systems"].values())  # they were all None


def test_without_reviews_the_figures_say_so_and_compare_is_unchanged():
    tables = _aligned_tables(np.random.default_rng(2))
    unreviewed = {name: t.assign(review="unreviewed") for name, t in tables.items()}
    assert ppi_figures(unreviewed) == {"available": False, "note": show_lines({})[0].removeprefix("reviews: ")}
    plain = {name: t.drop(columns=["review", "judge_only_reciprocal_rank"]) for name, t in tables.items()}
    comparison = compare_tables(*(t.reset_index(names="qid") for t in plain.values()))
    assert comparison.ppi == {} and "ppi_deltas" not in comparison.to_dict()


def test_show_says_when_chunks_are_graded_but_no_question_is_marked():
    """It printed "0 questions reviewed, 0 rejected (none) ...; rejection rate: " and no note."""
    entry = {
        "rejections": {"n_reviewed": 0, "n_rejected": 0, "by_reason": {}, "by_set": {}},
        "agreement": {"n_pairs": 3, "kappa": 0.5, "leniency": 0.25},
        "ppi": {"available": False, "note": ppi_figures({"a": pd.DataFrame({"review": ["unreviewed"]})})["note"]},
    }
    lines = show_lines(entry)
    assert lines[0] == (
        "reviews: chunks graded but no question marked yet; no reviews yet: review a sample "
        "(retrieval-bench review) for prediction-powered intervals"
    )
    assert lines[1] == "  judge against people (3 pairs): kappa 0.50, leniency 25%"


def test_the_estimate_stays_in_range_and_inside_its_own_interval():
    """PPI++ stepped past the end of the range: 1.152 [0.855, 1.000], and with lambda 1 an interval
    whose low end was above its high end (1.139 to 1.000)."""
    y = np.array([1.0] * 24 + [0.0])
    f = 0.3 + 0.5 * y
    for lam in (None, 1.0):
        got = ppi_mean(y, f, np.ones(200), lam=lam)
        assert 0.0 <= got.low <= got.estimate <= got.high <= 1.0, got
        assert got.estimate == 1.0  # the raw estimate was above 1: the range's end is the nearest figure


def test_the_p_value_reads_the_side_of_the_interval_towards_zero():
    """Every kept figure 0.05: the distribution-free interval excludes 0, so the test must reject."""
    got = ppi_mean(np.full(25, 0.05), np.full(25, 0.05), np.full(100, 0.05), lam=0.0)
    elsewhere = 1 - stats.beta.ppf(0.05, 25, 1)  # the share of questions that may not be at 0.05
    assert (got.low, got.high) == pytest.approx((0.05 * (1 - elsewhere), 0.05 + 0.95 * elsewhere))
    assert got.low > 0 and got.p_value() < 0.05


def test_with_every_question_reviewed_the_figure_is_the_people_s_own():
    """Reviewing all 18 questions of a small golden set left every PPI figure and delta "n/a"
    (no unreviewed question to correct), and the judged view named the first system its best."""
    y = np.array([1.0, 0.5, 0.25, 1.0, 0.0, 1 / 3])
    every = ppi_mean(y, y + 0.1, np.array([]))
    assert every == ppi_mean(y, y + 0.1, np.array([]), lam=0.0) and every.lam == 0.0 and every.n_unreviewed == 0
    assert every.estimate == pytest.approx(y.mean())
    delta = ppi_paired(y, y[::-1], y, y[::-1], ReviewSample(np.ones(6, dtype=bool)))
    assert delta is not None and delta.estimate == pytest.approx(0.0, abs=1e-12)


def test_compare_leaves_out_the_questions_either_run_s_reviewers_rejected():
    """A run from before the reviews against one after: B's metrics.json left out its 2 rejected
    questions, compare kept them (it read A's marks only), and the two disagreed silently."""
    tables = _aligned_tables(np.random.default_rng(3), n=40, reviewed_n=10)
    before = tables["a"].drop(columns="review").reset_index(names="qid")  # no reviews yet
    after = tables["b"].reset_index(names="qid")
    rejected = after.index[after["review"] == "fine"][:2]
    after.loc[rejected, "review"] = "ambiguous"
    comparison = compare_tables(before, after)
    assert comparison.n_questions == 38
    assert "2 questions a reviewer rejected are left out (data/reviews)" in comparison.warnings
