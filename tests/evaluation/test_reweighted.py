"""score.weights real-mix: the leaderboard's headline reweighted to the real (else hand-written)
questions' mix of kinds: the weighted mean against a hand computation, the stratified interval
against the plain bootstrap (one kind) and its coverage, the sign-flip test against every flip
enumerated, the lines that state it, and the default leaving every output as it was."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from retrieval_bench.core.errors import InputError
from retrieval_bench.evaluation.panel.leaderboard import scorable
from retrieval_bench.evaluation.panel.report import PanelInputs, panel_report, summary_line
from retrieval_bench.evaluation.panel.reweighted import real_mix, reweighted, stratified_bootstrap_ci
from retrieval_bench.evaluation.stats import paired_bootstrap_ci
from retrieval_bench.show import leaderboard_lines, mix_lines

ANSWERABLE = ("single", "multi", "keyword")


def system_table(kinds: list[str], values: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "qid": [f"q{i}" for i in range(len(kinds))],
            "kind": kinds,
            "n_relevant": 1,
            "reciprocal_rank": values,
            "ndcg@10": values,
            "recall@10": values,
            "question_set": ["hand-written" if i % 3 == 0 else "generated" for i in range(len(kinds))],
        }
    )


def golden(kinds: dict[str, int], question_set: str = "hand-written") -> list[dict]:
    source = {"hand-written": "hand-written", "real": "qrels"}.get(question_set, "claude")
    return [
        {"qid": f"{question_set}{kind}{i}", "question": "q?", "kind": kind, "source": source}
        for kind, n in kinds.items()
        for i in range(n)
    ]


@pytest.mark.parametrize("seed", range(6))
def test_the_reweighted_mean_is_each_kinds_mean_weighted_by_the_real_mix(seed):
    rng = np.random.default_rng(seed)
    kinds = [str(k) for k in rng.choice(ANSWERABLE, size=int(rng.integers(15, 60)))]
    tables = {name: system_table(kinds, rng.random(len(kinds))) for name in ("a", "b", "c")}
    mix = {kind: int(rng.integers(1, 9)) for kind in ANSWERABLE + ("unanswerable",)}
    entry = reweighted(scorable(tables), golden(mix), resamples=200)
    # by hand: unanswerable's share dropped, the rest renormalised over the kinds the tables hold
    present = [kind for kind in ANSWERABLE if kind in kinds]
    total = sum(mix[kind] for kind in present)
    assert entry["weights"] == {kind: round(mix[kind] / total, 4) for kind in present}
    for name, table in tables.items():
        expected = 0.0
        for kind in present:
            own = [v for v, k in zip(table["reciprocal_rank"], kinds, strict=True) if k == kind]
            expected += mix[kind] / total * sum(own) / len(own)
        assert entry["metrics"]["mrr"]["systems"][name]["mean"] == pytest.approx(expected, abs=1e-12)


def test_a_kind_of_the_mix_no_compared_question_has_is_dropped_and_named():
    tables = {"a": system_table(["single"] * 6 + ["multi"] * 4, np.linspace(0, 1, 10))}
    entry = reweighted(scorable(tables), golden({"single": 5, "keyword": 3, "multi": 2}), resamples=100)
    assert entry["weights"] == {"single": round(5 / 7, 4), "multi": round(2 / 7, 4)} and entry["absent"] == ["keyword"]


def test_the_mix_is_the_real_questions_else_the_handwritten_ones():
    rows = golden({"single": 1, "multi": 3}) + golden({"single": 3, "keyword": 1}, "real")
    assert real_mix(rows) == ("real", {"single": 0.75, "keyword": 0.25})
    assert real_mix(golden({"single": 1, "multi": 3}))[0] == "hand-written"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (golden({"single": 4}, "generated"), "score.weights real-mix: the golden set has no real or hand-written"),
        (golden({"unanswerable": 4}), "score.weights real-mix: every hand-written question is unanswerable"),
    ],
)
def test_real_mix_without_a_mix_to_take_is_one_line(rows, message):
    tables = {"a": system_table(["single"] * 4, np.array([0.1, 0.2, 0.3, 0.4]))}
    with pytest.raises(InputError) as error:
        panel_report(PanelInputs(tables, rows), {"fail_on": "none"}, weights="real-mix")
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.parametrize("seed", range(3))
def test_the_interval_of_one_kind_is_the_plain_bootstrap_interval(seed):
    values = np.random.default_rng(seed).random(37)
    kinds = np.full(37, "single")
    assert stratified_bootstrap_ci(values, kinds, {"single": 1.0}, 2000, seed) == paired_bootstrap_ci(
        values, 2000, seed
    )


def test_the_stratified_interval_covers_the_true_weighted_mean():
    """Two kinds with different means and spreads, few questions of one: over 300 golden sets
    drawn at random the 95% interval holds the true weighted mean about 95% of the time."""
    rng = np.random.default_rng(11)
    weights, n = {"single": 0.7, "multi": 0.3}, {"single": 40, "multi": 12}
    truth = 0.7 * 0.6 + 0.3 * 0.25  # Bernoulli(0.6) singles, Beta(1, 3) multis (mean 0.25)
    kinds = np.array(["single"] * n["single"] + ["multi"] * n["multi"])
    covered = 0
    for trial in range(300):
        values = np.concatenate([rng.random(n["single"]) < 0.6, rng.beta(1, 3, n["multi"])]).astype(float)
        low, high = stratified_bootstrap_ci(values, kinds, weights, 1000, trial)
        covered += low <= truth <= high
    assert 0.91 <= covered / 300 <= 0.99


def test_the_holm_marks_test_the_reweighted_difference_exactly():
    """With 12 questions every sign flip is enumerated: p is the share of flips of the per-question
    differences, each weighted by its kind's weight over its count, whose weighted mean reaches the
    observed one."""
    rng = np.random.default_rng(3)
    kinds = ["single"] * 8 + ["multi"] * 4
    a, b = rng.random(12), rng.random(12)
    a[8:] += 0.3  # a is the better on the multi questions, which weigh twice what singles do
    entry = reweighted(
        scorable({"a": system_table(kinds, a), "b": system_table(kinds, b)}), golden({"single": 1, "multi": 1})
    )
    weight = np.array([0.5 / 8] * 8 + [0.5 / 4] * 4)
    assert entry["metrics"]["mrr"]["best"] == "a" and np.sum(weight * a) > np.sum(weight * b)
    observed = abs(np.sum(weight * (b - a)))
    flips = [abs(np.sum(weight * np.array(signs) * (b - a))) for signs in itertools.product((1, -1), repeat=12)]
    expected = np.mean([flip >= observed - 1e-12 for flip in flips])
    assert entry["metrics"]["mrr"]["systems"]["b"]["p_vs_best"] == pytest.approx(expected, abs=1e-12)


def test_the_leaderboard_and_the_decision_state_the_weights():
    from tests.evaluation.test_panel_costs import row

    rng = np.random.default_rng(5)
    kinds = ["single"] * 30 + ["multi"] * 10
    tables = {"dense": system_table(kinds, rng.random(40)), "bm25": system_table(kinds, rng.random(40) * 0.5)}
    costs = {
        "dense": row("dense", "default", "dense", 0.4, 1_750_000, 3.0),
        "bm25": row("bm25", "default", "bm25", 0.1, 900_000, None),
    }
    report = panel_report(
        PanelInputs(tables, golden({"single": 7, "multi": 3}), costs), {"fail_on": "none"}, weights="real-mix"
    )
    said = "reweighted to the hand-written mix: single 0.70, multi 0.30"
    board = report["leaderboard"]
    assert report["markdown"].startswith(f"### the headline: all questions, {said} (40 questions)")
    assert "hand-written (the reference) (14 questions)" in report["markdown"]  # the headline is the table above
    assert said in report["decision"] and said in summary_line(board) and said in "\n".join(leaderboard_lines(board))
    assert json.loads(json.dumps(board))["reweighted"]["weights"] == {"single": 0.7, "multi": 0.3}
    mrr = board["reweighted"]["metrics"]["mrr"]["systems"]
    csv = [r for r in report["rows"] if r["question_set"] == "reweighted" and r["metric"] == "mrr"]
    assert {r["system"]: r["mean"] for r in csv} == {name: row["mean"] for name, row in mrr.items()}
    assert f"{mrr['dense']['mean']:.3f} [{mrr['dense']['ci_low']:.3f}" in report["decision"]
    # the Pareto front and the line read the reweighted mrr
    assert report["costs"]["systems"]["dense"]["mrr"] == pytest.approx(mrr["dense"]["mean"])
    # and so do metrics/headline.json and the decision's rule: 0.7 x mean(single) + 0.3 x mean(multi), by hand
    for name, table in tables.items():
        single, multi = (table.loc[table["kind"] == k, "reciprocal_rank"].mean() for k in ("single", "multi"))
        assert report["headline"]["panel"][name]["mrr"] == pytest.approx(round(0.7 * single + 0.3 * multi, 4))
        assert report["headline"]["panel"][name]["recall@10"] == pytest.approx(round(0.7 * single + 0.3 * multi, 4))
    assert f"Rule: the best system on mrr ({said});" in report["decision"]


def test_the_default_weights_leave_every_output_as_it_was():
    rng = np.random.default_rng(8)
    kinds = ["single"] * 20 + ["multi"] * 10
    tables = {"dense": system_table(kinds, rng.random(30)), "bm25": system_table(kinds, rng.random(30))}
    rows = golden({"single": 1, "multi": 1})
    before = panel_report(PanelInputs(tables, rows), {"fail_on": "none"})
    after = panel_report(PanelInputs(tables, rows), {"fail_on": "none"}, weights="none")
    assert "reweighted" not in after["leaderboard"] and "reweighted" not in after["markdown"]
    for key in ("markdown", "decision", "rows", "headline"):
        assert after[key] == before[key]
    weighted = panel_report(PanelInputs(tables, rows), {"fail_on": "none"}, weights="real-mix")
    assert weighted["leaderboard"]["question_sets"] == before["leaderboard"]["question_sets"]  # only added to


def test_show_states_each_question_sets_mix():
    lines = mix_lines(
        {"mix_by_question_set": {"generated": {"single": 1.0}, "hand-written": {"single": 0.72, "multi": 0.28}}}
    )
    assert lines == ["  mix of kinds:", "    generated: single 100%", "    hand-written: single 72%, multi 28%"]
    assert mix_lines({}) == []
    told = {
        "by": "llm",
        "asked": 14,
        "classified": 12,
        "by_rule": 2,
        "changed": {"single->multi": 2, "keyword->single": 1},
    }
    assert mix_lines({"mix_by_question_set": {"hand-written": {"single": 1.0}}, "kind_classifier": told})[-1] == (
        "    kinds told by the LLM: 12 of 14 (3 changed from the rules)"
    )


def test_a_panel_without_a_compared_question_has_no_headline_to_reweight():
    tables = {"a": system_table(["single"] * 3, np.array([0.1, 0.2, 0.3])).assign(n_relevant=0)}
    with pytest.raises(InputError, match="no question can be compared"):
        panel_report(PanelInputs(tables, golden({"single": 2})), {"fail_on": "none"}, weights="real-mix")
