"""Per kind everywhere: the leaderboard's section per kind (complete@k and evidence_recall@k for
multi-evidence questions, abstention for unanswerable ones), metrics.json's by_kind, compare's
lines per kind, show's lines; unanswerable questions stay out of every ranking mean."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_bench.evaluation.compare.command import compare_tables
from retrieval_bench.evaluation.compare.kinds import compare_kind_lines
from retrieval_bench.evaluation.panel.kinds import kind_rows, kind_sections, leaderboard_kind_lines
from retrieval_bench.evaluation.panel.leaderboard import leaderboard, scorable
from retrieval_bench.evaluation.score.abstention import abstention_auc
from retrieval_bench.evaluation.score.kinds import by_kind
from retrieval_bench.evaluation.stats import Resampling
from retrieval_bench.show import kind_summary_lines as show_kind_lines

KINDS = ["single"] * 20 + ["multi"] * 12 + ["unanswerable"] * 10


def per_question(rng: np.random.Generator, answer_score: float) -> pd.DataFrame:
    n = len(KINDS)
    unanswerable = np.array([kind == "unanswerable" for kind in KINDS])
    hit = rng.integers(0, 2, size=n).astype(float)
    complete = np.where(np.array(KINDS) == "multi", hit * rng.integers(0, 2, size=n), hit)
    table = pd.DataFrame(
        {
            "qid": [f"q{i}" for i in range(n)],
            "kind": KINDS,
            "n_relevant": np.where(unanswerable, 0, 2),
            "reciprocal_rank": hit,
            "recall@10": hit,
            "ndcg@10": hit,
            "hit@1": hit,
            "hit@10": hit,
            "complete@10": complete,
            "evidence_recall@10": (hit + complete) / 2,
            "top_score": np.where(unanswerable, rng.random(n), rng.random(n) + answer_score),
        }
    )
    metrics = ["reciprocal_rank", "recall@10", "ndcg@10", "hit@1", "hit@10", "complete@10", "evidence_recall@10"]
    table.loc[unanswerable, metrics] = np.nan  # as score_question leaves them
    return table


@pytest.fixture
def tables():
    rng = np.random.default_rng(7)
    return {"base": per_question(rng, 0.0), "sharp": per_question(rng, 0.8)}


def test_the_leaderboard_has_a_section_per_kind_with_its_metrics(tables):
    aligned = scorable(tables)
    assert len(next(iter(aligned.values()))) == 32  # the unanswerable questions never enter a ranking mean
    sections = kind_sections(aligned, tables, resamples=200)
    assert list(sections) == ["single", "multi", "unanswerable"]
    assert list(sections["multi"]["metrics"]) == ["mrr", "complete@10", "evidence_recall@10"]
    assert sections["multi"]["n_questions"] == 12
    multi = tables["sharp"][tables["sharp"]["kind"] == "multi"]
    assert sections["multi"]["metrics"]["complete@10"]["systems"]["sharp"]["mean"] == pytest.approx(
        multi["complete@10"].mean()
    )
    abstention = sections["unanswerable"]
    for name, table in tables.items():
        answerable = table[table["kind"] != "unanswerable"]["top_score"]
        unanswerable = table[table["kind"] == "unanswerable"]["top_score"]
        assert abstention["systems"][name]["abstention_auc"] == pytest.approx(
            abstention_auc(answerable.to_numpy(), unanswerable.to_numpy())
        )
    assert abstention["best"] == "sharp" and abstention["n_questions"] == 10
    board = {**leaderboard(aligned, resamples=200), "kinds": sections}
    text = "\n".join(leaderboard_kind_lines(board))
    assert "### kind multi (12 questions)" in text and "complete@10" in text
    assert "### kind unanswerable (10 questions, beside 32 answerable ones)" in text
    rows = kind_rows(board)
    assert {row["question_set"] for row in rows} == {"kind:single", "kind:multi", "kind:unanswerable"}
    show = show_kind_lines(board)
    assert "kind unanswerable (10 questions): abstention AUC, false-hit rate" in show


def test_one_answerable_kind_has_no_kind_section(tables):
    single = {name: table[table["kind"] == "single"] for name, table in tables.items()}
    assert kind_sections(scorable(single), single) == {}
    assert by_kind(single["base"]) == {}


def test_metrics_json_by_kind_averages_each_kind_on_its_own(tables):
    table = tables["sharp"]
    summary = by_kind(table)
    assert summary["multi"]["complete@10"] == pytest.approx(table[table["kind"] == "multi"]["complete@10"].mean())
    assert summary["single"]["n_questions"] == 20 and "complete@10" not in summary["single"]
    assert 0 <= summary["unanswerable"]["abstention_auc"] <= 1 and summary["unanswerable"]["n_questions"] == 10


def test_compare_reports_per_kind_and_pairs_no_unanswerable_question(tables):
    comparison = compare_tables(tables["base"], tables["sharp"], resampling=Resampling(200))
    assert comparison.n_questions == 32 and comparison.n_unscorable_dropped == 0
    assert not any("no relevant chunk" in warning for warning in comparison.warnings)
    assert set(comparison.by_kind) == {"single", "multi", "unanswerable"}
    multi = comparison.by_kind["multi"]["metrics"]["complete@10"]
    values = {name: t[t["kind"] == "multi"]["complete@10"].mean() for name, t in tables.items()}
    assert (multi["a"], multi["b"]) == pytest.approx((values["base"], values["sharp"]))
    lines = compare_kind_lines(comparison.by_kind)
    assert any(line.strip().startswith("abstention_auc:") for line in lines)
    assert not math.isnan(comparison.by_kind["unanswerable"]["b"]["abstention_auc"])


def test_unanswerable_questions_are_not_reported_as_left_out(tables):
    from retrieval_bench.evaluation.panel.leaderboard import left_out

    report = left_out(tables)
    assert report["n_left_out"] == 0 and report["n_questions"] == 32


def test_an_unanswerable_question_a_judged_chunk_answers_in_one_table_leaves_every_systems_abstention(tables):
    """q32 is contradicted in one system's table only (its chunking's judged chunks): every system's
    abstention figures are read without it, so the systems are compared on the same questions."""
    tables = {name: table.assign(judged_n_relevant=0) for name, table in tables.items()}
    tables["base"].loc[tables["base"]["qid"] == "q32", "judged_n_relevant"] = 1
    section = kind_sections(scorable(tables), tables, resamples=200)["unanswerable"]
    assert section["n_questions"] == 9 and section["n_contradicted"] == 1
    for name, table in tables.items():
        answerable = table[table["kind"] != "unanswerable"]["top_score"].to_numpy()
        kept = table[(table["kind"] == "unanswerable") & (table["qid"] != "q32")]["top_score"].to_numpy()
        assert section["systems"][name]["abstention_auc"] == pytest.approx(abstention_auc(answerable, kept))
        assert "n_unanswerable_contradicted" not in section["systems"][name]
    board = {**leaderboard(scorable(tables), resamples=200), "kinds": {"unanswerable": section}}
    assert "(9 questions, beside 32 answerable ones; 1 left out: a judged chunk answers them)" in "\n".join(
        leaderboard_kind_lines(board)
    )


def test_compare_per_kind_reads_the_same_questions_of_the_same_kind_in_both_runs(tables):
    """B held 6 of A's 10 unanswerable questions: abstention was A's 10 against B's 6 (an
    "improvement" from the subset alone); B calling a multi question single put A's multi figure
    into A's single mean."""
    base = tables["base"]
    subset = base.drop(index=base.index[(base["kind"] == "unanswerable")][:4])
    comparison = compare_tables(base, subset, resampling=Resampling(200))
    unanswerable = comparison.by_kind["unanswerable"]
    assert unanswerable["n"] == 6 and unanswerable["a"] == unanswerable["b"]  # the same run, the same questions
    relabelled = base.assign(kind=base["kind"].where(base.index != 20, "single"))  # q20: multi in A, single in B
    comparison = compare_tables(base, relabelled, resampling=Resampling(200))
    assert comparison.by_kind["single"]["n"] == 20 and comparison.by_kind["multi"]["n"] == 11
    assert "1 question has another kind in B than in A: left out of the per-kind figures" in comparison.warnings


def test_the_markdown_report_fences_the_kind_section_and_names_the_level_to_its_digits(tables):
    """Indented after the footnotes' list, CommonMark (GitHub) ran the per-kind lines into the last
    footnote as one paragraph; a level of 0.975 read "98% CI" and 0.999 "100% CI"."""
    from retrieval_bench.evaluation.compare.report import format_markdown, format_text

    comparison = compare_tables(tables["base"], tables["sharp"], resampling=Resampling(200, level=0.975))
    markdown = format_markdown(comparison)
    fenced = markdown.split("```text\n", 1)[1].split("```", 1)[0]
    assert fenced.startswith("By question kind (A -> B):") and "abstention_auc:" in fenced
    assert "97.5% CI" in format_text(comparison) and "98% CI" not in markdown


def test_the_left_out_line_does_not_count_questions_reviewers_rejected():
    """ "Every system is compared on all 15 questions" under tables of the 13 a reviewer kept."""
    from retrieval_bench.evaluation.panel.leaderboard import left_out, left_out_lines

    marks = ["fine"] * 10 + ["unreviewed"] * 3 + ["ambiguous", "not_answerable"]
    table = pd.DataFrame({"qid": [f"q{i}" for i in range(15)], "n_relevant": 1, "review": marks})
    report = left_out({"a": table, "b": table})
    assert (report["n_compared"], report["n_rejected"]) == (15, 2)
    assert left_out_lines(report) == [
        "Every system is compared on all 15 questions; 2 of them rejected by reviewers leave every figure."
    ]
    report.update(n_compared=12, n_left_out=3, by_system={"a": {"no_relevant_chunk": 3, "missing": 0, "chunking": "c"}})
    assert left_out_lines(report)[0] == (
        "3 of 15 questions are left out of the comparison (a system cannot score them); of the 12 compared, "
        "2 rejected by reviewers leave every figure:"
    )
    assert left_out_lines({**report, "n_rejected": 0})[0].endswith("(a system cannot score them):")
