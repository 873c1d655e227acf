"""retrieval_bench.evaluation.compare.command: the paired statistics, pairing by qid, flipped questions, the
revision/experiment lookup, and `retrieval-bench compare` end to end across two git commits."""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import dvc, git, run, set_params

from retrieval_bench.core.errors import InputError
from retrieval_bench.evaluation.compare import command as compare
from retrieval_bench.evaluation.compare import report as compare_report
from retrieval_bench.evaluation.compare.command import choose_flip_k, compare_tables
from retrieval_bench.evaluation.panel.leaderboard import segment_regressions
from retrieval_bench.evaluation.stats import (
    Resampling,
    min_detectable_delta,
    paired_bootstrap_ci,
    randomization_p_value,
)

KS = [1, 3, 5, 10, 20]


def per_question(first_ranks, qids=None) -> pd.DataFrame:
    """A per_question.csv-shaped table from each question's first relevant rank (NaN = none),
    one relevant chunk per question, as the score stage writes it."""
    ranks = np.asarray(first_ranks, dtype=np.float64)
    qids = qids if qids is not None else [f"q{i:03d}" for i in range(len(ranks))]
    found = ~np.isnan(ranks)
    rr = np.where(found, 1.0 / np.where(found, ranks, 1.0), 0.0)
    table = {
        "qid": qids,
        "first_relevant_rank": ranks,
        "reciprocal_rank": rr,
        "reciprocal_rank@10": np.where(found & (ranks <= 10), rr, 0.0),
        "ndcg@10": np.where(found & (ranks <= 10), 1.0 / np.log2(np.where(found, ranks, 1.0) + 1.0), 0.0),
        "map@10": np.where(found & (ranks <= 10), rr, 0.0),
    }
    for k in KS:
        table[f"recall@{k}"] = (found & (ranks <= k)).astype(float)
        table[f"hit@{k}"] = (found & (ranks <= k)).astype(float)
    return pd.DataFrame(table)


# --- statistics ------------------------------------------------------------------------------


def test_bootstrap_ci_coverage_is_calibrated():
    """Over 500 simulated paired samples of 100 questions, the 95% interval holds the true mean
    difference 93-97% of the time."""
    true_delta, simulations, n = 0.05, 500, 100
    rng = np.random.default_rng(12345)
    covered = 0
    for simulation in range(simulations):
        a = rng.uniform(0.0, 1.0, n)  # per-question scores of run A
        b = a + true_delta + rng.normal(0.0, 0.3, n)  # run B: same questions, shifted, noisy
        low, high = paired_bootstrap_ci(b - a, resamples=2000, seed=simulation, level=0.95)
        covered += low <= true_delta <= high
    coverage = covered / simulations
    assert 0.93 <= coverage <= 0.97, coverage


def test_bootstrap_ci_is_seeded_and_ordered():
    diffs = np.random.default_rng(0).normal(0.1, 1.0, 50)
    first = paired_bootstrap_ci(diffs, resamples=1000, seed=7)
    assert first == paired_bootstrap_ci(diffs, resamples=1000, seed=7)
    assert first[0] < diffs.mean() < first[1]
    narrow = paired_bootstrap_ci(diffs, resamples=1000, seed=7, level=0.5)
    assert first[0] < narrow[0] < narrow[1] < first[1]


def test_identical_runs_give_zero_delta_and_p_one():
    table = per_question([1, 2, 3, 7, 15, np.nan, 1, 4, 30, 2])
    result = compare_tables(table, table.copy(), "main", "workspace", resampling=Resampling(2000))
    assert result.warnings == []
    assert result.n_questions == 10
    assert result.flipped == []
    assert set(result.metrics) >= {"mrr", "ndcg@10", *(f"recall@{k}" for k in KS), *(f"hit@{k}" for k in KS)}
    for name, m in result.metrics.items():
        assert m["delta"] == 0.0, name
        assert m["p_value"] == 1.0, name
        assert (m["ci_low"], m["ci_high"]) == (0.0, 0.0), name
        assert (m["wins"], m["ties"], m["losses"]) == (0, 10, 0), name
    assert randomization_p_value(np.zeros(25), permutations=100, seed=0) == 1.0


def test_a_wide_table_is_compared_without_a_pandas_warning():
    """Reviews and judged twins make a per-question table of 100+ columns: checking them one by
    one fragmented it, and compare printed pandas' PerformanceWarning twice (in a user's CI log)."""
    table = per_question([1, 2, 3, 7, 15, np.nan, 1, 4, 30, 2])
    found = table["first_relevant_rank"].to_numpy()
    cutoffs = {f"{m}@{k}": (found <= k).astype(float) for m in ("recall", "hit") for k in range(21, 60)}
    table = pd.concat([table, pd.DataFrame(cutoffs)], axis=1)
    wide = pd.concat([table, pd.DataFrame({f"judged_{c}": table[c] for c in table.columns if c != "qid"})], axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = compare_tables(wide, wide.copy(), "main", "workspace", resampling=Resampling(200))
    assert result.n_questions == 10


def test_planted_large_improvement_is_significant():
    rng = np.random.default_rng(3)
    a_ranks = rng.integers(3, 40, 60).astype(float)
    b_ranks = np.maximum(1.0, a_ranks - rng.integers(2, 30, 60))  # B ranks every gold chunk higher
    result = compare_tables(per_question(a_ranks), per_question(b_ranks), resampling=Resampling(10_000, 1))
    mrr = result.metrics["mrr"]
    assert mrr["delta"] > 0.2
    assert mrr["p_value"] < 0.01
    assert 0 < mrr["ci_low"] < mrr["delta"] < mrr["ci_high"]
    assert mrr["losses"] == 0 and mrr["wins"] > 40
    # The smallest p-value 10,000 sign flips (raised to MC_PERMUTATIONS, 12,000) can give is 1/12,001.
    assert mrr["p_value"] >= 1 / 12_001
    assert randomization_p_value(rng.normal(0.3, 0.2, 40), permutations=10_000, seed=0) < 0.01


def test_randomization_test_holds_its_size_under_the_null():
    rng = np.random.default_rng(99)
    p_values = np.array([randomization_p_value(rng.normal(0.0, 1.0, 40), 500, seed) for seed in range(300)])
    assert 0.015 <= np.mean(p_values < 0.05) <= 0.09
    assert np.all((p_values > 0) & (p_values <= 1))


def test_p_value_formula_counts_the_observed_flip():
    # Two questions with differences +1, +1: the 4 sign patterns give means 1, 0, 0, -1, so half
    # of the flips are at least as extreme as the observed mean 1.
    p = randomization_p_value(np.array([1.0, 1.0]), permutations=20_000, seed=0)
    assert p == pytest.approx(0.5, abs=0.02)


def test_min_detectable_delta_formula():
    diffs = np.array([0.0, 1.0, 0.0, -1.0, 1.0, 0.0, 0.0, 1.0])
    assert min_detectable_delta(diffs) == pytest.approx(2.8 * np.std(diffs, ddof=1) / math.sqrt(len(diffs)))
    assert math.isnan(min_detectable_delta(np.zeros(10)))  # nothing varies: no estimate
    assert math.isnan(min_detectable_delta(np.array([1.0])))


# --- pairing, flipped questions --------------------------------------------------------------


def test_unequal_question_sets_warn_and_compare_the_intersection():
    a = per_question([1, 2, 3, 4, 5], qids=["q1", "q2", "q3", "q4", "q5"])
    b = per_question([1, 1, 1, 9], qids=["q2", "q3", "q4", "q6"])
    result = compare_tables(a, b, "A", "B", resampling=Resampling(500))
    assert result.n_questions == 3  # q2, q3, q4
    assert len(result.warnings) == 1
    assert (
        "differ" in result.warnings[0] and "2 only in A" in result.warnings[0] and "1 only in B" in result.warnings[0]
    )
    mrr = result.metrics["mrr"]
    assert mrr["a"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert mrr["b"] == pytest.approx(1.0)
    assert (mrr["wins"], mrr["ties"], mrr["losses"]) == (3, 0, 0)
    with pytest.raises(InputError, match="no question"):
        compare_tables(a, per_question([1], qids=["other"]))


def test_questions_scorable_under_one_run_only_are_left_out_loudly():
    a = pd.DataFrame(
        {"qid": ["q1", "q2", "q3", "q4"], "reciprocal_rank": [1.0, 0.5, 0.5, 0.0], "n_relevant": [1, 1, 1, 0]}
    )
    # B re-chunked: q2 lost every relevant chunk, so it scores 0 without any retrieval being worse.
    b = pd.DataFrame(
        {"qid": ["q1", "q2", "q3", "q4"], "reciprocal_rank": [1.0, 0.0, 1.0, 0.0], "n_relevant": [2, 0, 1, 0]}
    )
    result = compare.compare_tables(a, b, "A", "B", resampling=Resampling(200))
    assert result.n_questions == 2 and result.n_unscorable_dropped == 2
    assert result.metrics["mrr"]["a"] == 0.75 and result.metrics["mrr"]["b"] == 1.0
    assert any(
        "THE RUNS SCORE DIFFERENT QUESTIONS" in w and "1 questions have a relevant chunk only under A" in w
        for w in result.warnings
    )
    assert "THE RUNS SCORE DIFFERENT QUESTIONS" in compare.format_markdown(result)


def test_adding_a_cutoff_changes_no_other_metrics_figures():
    rng = np.random.default_rng(7)
    a = pd.DataFrame(
        {
            "qid": [f"q{i}" for i in range(60)],
            "reciprocal_rank": rng.random(60),
            "hit@1": rng.integers(0, 2, 60),
            "hit@5": rng.integers(0, 2, 60),
        }
    )
    b = a.assign(reciprocal_rank=rng.random(60), **{"hit@1": rng.integers(0, 2, 60), "hit@5": rng.integers(0, 2, 60)})
    before = compare.compare_tables(a, b, resampling=Resampling(500)).metrics
    after = compare.compare_tables(
        a.assign(**{"hit@3": a["hit@5"]}), b.assign(**{"hit@3": b["hit@1"]}), resampling=Resampling(500)
    ).metrics
    for name in before:
        assert (after[name]["p_value"], after[name]["ci_low"], after[name]["ci_high"]) == (
            before[name]["p_value"],
            before[name]["ci_low"],
            before[name]["ci_high"],
        ), name


def test_the_same_differences_in_the_strict_and_judged_views_give_the_same_figures():
    """Each view drew from a stream seeded by its name too: identical per-question differences gave
    mrr CIs [-0.0541, +0.0335] strict and [-0.0543, +0.0349] judged, p 0.6778 and 0.6744."""
    rng = np.random.default_rng(8)
    a = per_question(rng.integers(1, 30, 80).astype(float))
    b = per_question(rng.integers(1, 30, 80).astype(float))
    judged = {f"judged_{c}": c for c in ("reciprocal_rank", "ndcg@10", "recall@5")}
    a, b = (t.assign(**{j: t[c] for j, c in judged.items()}) for t in (a, b))
    b.loc[0, "judged_ndcg@10"] = 1.0  # one difference apart: the views do not coincide
    comparison = compare.compare_tables(a, b, resampling=Resampling(2000))
    assert comparison.judged and not comparison.views_coincide
    for name in ("mrr", "recall@5"):
        strict, seen = comparison.metrics[name], comparison.judged[name]
        assert (seen["ci_low"], seen["ci_high"], seen["p_value"]) == (
            strict["ci_low"],
            strict["ci_high"],
            strict["p_value"],
        ), name


def test_duplicate_qids_are_an_input_error():
    table = per_question([1, 2], qids=["q1", "q1"])
    with pytest.raises(InputError, match="more than once"):
        compare_tables(table, table)


def test_flipped_questions_worst_first():
    qids = ["steady", "small_loss", "big_loss", "gain", "lost_all"]
    a = per_question([1, 4, 2, 9, 3], qids=qids)
    b = per_question([2, 6, 40, 1, np.nan], qids=qids)
    result = compare_tables(a, b, resampling=Resampling(200))
    assert result.flip_k == 5
    assert [row["qid"] for row in result.flipped] == ["lost_all", "big_loss", "small_loss", "gain"]
    assert [row["change"] for row in result.flipped] == ["lost", "lost", "lost", "gained"]
    assert result.flipped[1]["a_rank"] == 2 and result.flipped[1]["b_rank"] == 40
    assert result.flipped[0]["b_rank"] is None
    assert [row["qid"] for row in compare_tables(a, b, resampling=Resampling(200), k=1).flipped] == ["steady", "gain"]


def test_a_tie_at_the_cut_is_a_flip_shown_at_its_expected_rank():
    """B's relevant chunk tied for rank 1 (expected rank 1.5, hit@1 0.5): printed "lost rank 1 -> 1"."""
    from retrieval_bench.evaluation.compare.report import format_text

    a = per_question([1.0, 3.0], qids=["tied", "other"])
    b = a.copy()
    b.loc[0, ["first_relevant_rank", "hit@1", "reciprocal_rank"]] = [1.5, 0.5, 0.75]
    result = compare_tables(a, b, resampling=Resampling(200), k=1)
    assert [(row["qid"], row["change"], row["a_rank"], row["b_rank"]) for row in result.flipped] == [
        ("tied", "lost", 1.0, 1.5)
    ]
    assert "rank 1 -> 1.5" in format_text(result)


def test_choose_flip_k():
    assert choose_flip_k(["hit@1", "hit@3", "hit@5", "hit@10"]) == 5
    assert choose_flip_k(["hit@10", "hit@20", "hit@7"]) == 7
    assert choose_flip_k(["hit@1", "hit@3"]) == 3
    assert choose_flip_k(["recall@5"]) is None
    assert choose_flip_k(["hit@1", "hit@10"], k=1) == 1
    with pytest.raises(InputError, match="hit@4"):
        choose_flip_k(["hit@1", "hit@10"], k=4)


def test_question_text_and_gold_first_line_are_attached():
    flipped = [{"qid": "q1"}, {"qid": "q2"}, {"qid": "unknown"}]
    golden = [
        {"qid": "q1", "question": "What is WAL?", "gold_chunk_id": "wal.md:0-10"},
        {"qid": "q2", "question": "Why?"},
    ]
    compare.attach_question_text(flipped, golden, {"q1": "\n  Write-ahead log\nsecond line"})
    assert flipped[0] == {
        "qid": "q1",
        "question": "What is WAL?",
        "gold_chunk_id": "wal.md:0-10",
        "gold_first_line": "Write-ahead log",
    }
    assert flipped[1] == {"qid": "q2", "question": "Why?"}
    assert flipped[2] == {"qid": "unknown"}


def test_reports_render():
    a = per_question([1, 2, 8, np.nan, 3, 1])
    b = per_question([1, 9, 2, 4, 3, 2])
    result = compare_tables(a, b, "main", "workspace", resampling=Resampling(500))
    text = compare.format_text(result)
    assert "p" in text.split("\n")[6].split() and "2.8 x sd(paired differences) / sqrt(n)" in text
    assert "recall@20" in text and "Flipped questions" in text
    markdown = compare.format_markdown(result)
    assert "| metric |" in markdown and "\n|---|" in markdown
    data = json.loads(compare.format_json(result))
    assert data["n_questions"] == 6 and data["flip_k"] == 5
    assert {"a", "b", "delta", "ci_low", "ci_high", "p_value", "wins", "ties", "losses"} <= set(data["metrics"]["mrr"])


# --- revisions, experiments, the workspace ---------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with per_question.csv committed on main, changed in an experiment ref."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "metrics" / "panel" / "default").mkdir(parents=True)
    per_question([1, 2, 3, 4]).to_csv(repo / "metrics" / "panel" / "default" / "per_question.csv", index=False)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "baseline", cwd=repo)
    per_question([1, 1, 1, 1]).to_csv(repo / "metrics" / "panel" / "default" / "per_question.csv", index=False)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "experiment", cwd=repo)
    experiment = git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    git("update-ref", "refs/exps/ab/cdef0123456789abcdef0123456789abcdef01/bold-lark", experiment, cwd=repo)
    git("reset", "-q", "--hard", "HEAD~1", cwd=repo)
    per_question([2, 2, 2, 2]).to_csv(
        repo / "metrics" / "panel" / "default" / "per_question.csv", index=False
    )  # uncommitted
    return repo


def run_compare(repo: Path, monkeypatch, capsys, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    compare.add_arguments(parser)
    args = parser.parse_args(list(argv))
    monkeypatch.chdir(repo)
    code = args.run(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_compares_revisions_experiments_and_the_workspace(repo, monkeypatch, capsys):
    code, out, _ = run_compare(repo, monkeypatch, capsys, "main", "bold-lark", "--json", "--resamples", "500")
    data = json.loads(out)
    assert code == 0 and data["a"] == "main" and data["b"] == "bold-lark"
    assert data["metrics"]["mrr"]["b"] == 1.0 and data["b_commit"] != data["a_commit"]
    # Defaults: A = main, B = the working tree.
    _, out, _ = run_compare(repo, monkeypatch, capsys, "--json", "--resamples", "500")
    data = json.loads(out)
    assert data["b"] == "workspace" and data["b_commit"] is None
    assert data["metrics"]["mrr"]["b"] == 0.5
    with pytest.raises(InputError, match="not a git revision or DVC experiment"):
        run_compare(repo, monkeypatch, capsys, "main", "no-such-thing")


def test_a_revision_from_before_the_panel_held_every_system_is_compared_by_its_single_run(
    tmp_path, monkeypatch, capsys
):
    """main holds metrics/per_question.csv (the single system's, as releases before the default
    panel system wrote it); the workspace the default system's. `compare main workspace` pairs
    them; another system has no such fallback."""
    git("init", "-q", "-b", "main", cwd=tmp_path)
    (tmp_path / "metrics").mkdir()
    per_question([1, 2, 3, 4]).to_csv(tmp_path / "metrics" / "per_question.csv", index=False)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "single system", cwd=tmp_path)
    (tmp_path / "metrics" / "panel" / "default").mkdir(parents=True)
    per_question([1, 1, 1, 1]).to_csv(tmp_path / "metrics" / "panel" / "default" / "per_question.csv", index=False)
    code, out, _ = run_compare(tmp_path, monkeypatch, capsys, "main", "workspace", "--json", "--resamples", "200")
    data = json.loads(out)
    assert code == 0 and data["metrics"]["mrr"]["a"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert data["metrics"]["mrr"]["b"] == 1.0
    with pytest.raises(InputError, match="main: no metrics/panel/bm25/per_question.csv committed there"):
        run_compare(tmp_path, monkeypatch, capsys, "main", "workspace", "--system", "bm25")


def test_missing_per_question_is_an_input_error(tmp_path, monkeypatch, capsys):
    git("init", "-q", "-b", "main", cwd=tmp_path)
    (tmp_path / "README").write_text("x")
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "empty", cwd=tmp_path)
    with pytest.raises(InputError, match="no metrics/panel/default/per_question.csv"):
        run_compare(tmp_path, monkeypatch, capsys, "main", "HEAD")
    with pytest.raises(InputError, match="not found in the workspace"):
        run_compare(tmp_path, monkeypatch, capsys, "workspace", "main")


# --- end to end --------------------------------------------------------------------------------


@pytest.mark.pipeline
def test_a_per_question_table_that_is_not_utf8_is_an_input_error(tmp_path):
    (tmp_path / "metrics" / "panel" / "default").mkdir(parents=True)
    (tmp_path / "metrics" / "panel" / "default" / "per_question.csv").write_bytes(b"qid,reciprocal_rank\n\xe91,0.5\n")
    with pytest.raises(
        InputError, match=r"^workspace:metrics/panel/default/per_question.csv: not UTF-8 text \(byte 20\)"
    ):
        compare.read_run("workspace", tmp_path)


def test_compare_two_commits_end_to_end(reproduced, monkeypatch, capsys):
    git("add", "-A", cwd=reproduced)
    git("commit", "-qm", "dense run", cwd=reproduced)
    set_params(reproduced, **{"retrieval.method": "bm25"})
    dvc("repro", cwd=reproduced)
    git("add", "-A", cwd=reproduced)
    git("commit", "-qm", "bm25 run", cwd=reproduced)

    (reproduced / "data" / "goldenset.jsonl").unlink()  # question texts must come from the compared revisions
    cli = [sys.executable, "-m", "retrieval_bench.cli", "compare", "HEAD~1", "HEAD"]
    data = json.loads(run([*cli, "--json"], cwd=reproduced).stdout)
    assert data["a"] == "HEAD~1" and data["b"] == "HEAD"
    assert data["n_questions"] > 10 and data["warnings"] == []
    assert {"mrr", "ndcg@10", "recall@1", "recall@5", "recall@20"} <= set(data["metrics"])
    for name, m in data["metrics"].items():
        assert {"a", "b", "delta", "ci_low", "ci_high", "p_value", "wins", "ties", "losses"} <= set(m), name
        assert m["delta"] == pytest.approx(m["b"] - m["a"], abs=1e-9)
        assert 0 < m["p_value"] <= 1
        assert m["ci_low"] <= m["delta"] <= m["ci_high"]
        assert m["wins"] + m["ties"] + m["losses"] == data["n_questions"]
    assert data["flip_k"] == 5
    assert set(data["min_detectable_delta"]) == set(data["metrics"])
    for row in data["flipped"]:
        assert row["change"] in ("lost", "gained") and row["question"] and row["gold_first_line"]
    assert data["flipped"]

    # The other formats in-process (the subprocess above checked the wiring).
    from retrieval_bench.cli import main

    monkeypatch.chdir(reproduced)
    assert main(["compare", "HEAD~1", "HEAD", "--md"]) == 0
    markdown = capsys.readouterr().out
    assert "| metric" in markdown and "|---" in markdown

    assert main(["compare", "HEAD~1", "HEAD"]) == 0
    plain = capsys.readouterr().out
    assert "p-value" in plain and "randomization" in plain
    assert "mrr" in plain and "sqrt(n)" in plain

    assert main(["compare", "HEAD", "HEAD", "--json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert all(m["delta"] == 0 and m["p_value"] == 1 for m in same["metrics"].values())

    assert main(["compare", "HEAD~1", "HEAD", "--level", "0.9"]) == 0
    assert "90% CI" in capsys.readouterr().out
    assert main(["compare", "HEAD~1", "HEAD", "--level", "1.5"]) != 0
    assert "--level must be a confidence level between 0 and 1" in capsys.readouterr().err


def test_text_and_markdown_list_the_worst_losses_and_largest_gains():
    flipped = [{"qid": f"l{i}", "change": "lost"} for i in range(5)] + [
        {"qid": f"g{i}", "change": "gained"} for i in range(4)
    ]
    shown, left_out = compare_report.shown_flips(flipped, 2)
    assert [row["qid"] for row in shown] == ["l0", "l1", "g2", "g3"] and left_out == 5
    assert compare_report.shown_flips(flipped, 10) == (flipped, 0)


# --- strict and judged side by side ------------------------------------------------------------


def with_judged(table: pd.DataFrame, judged_first_ranks) -> pd.DataFrame:
    """`table` with the judged view's columns, from each question's first relevant rank there."""
    judged = per_question(judged_first_ranks, table["qid"].tolist()).drop(columns="qid")
    return pd.concat([table, judged.add_prefix("judged_")], axis=1)


def test_strict_and_judged_deltas_are_shown_side_by_side_and_disagreements_marked():
    # B returns, for 30 questions, a copy of the gold chunk at rank 1 and the gold itself far down:
    # strict counts a miss, judged a hit. A ranks the gold second everywhere.
    n = 40
    a = with_judged(per_question([2] * n), [2] * n)
    b = with_judged(per_question([1] * 10 + [50] * 30), [1] * n)
    result = compare_tables(a, b, "main", "workspace", resampling=Resampling(2000))
    assert set(result.judged) == set(result.metrics)
    assert result.metrics["hit@1"]["delta"] == pytest.approx(0.25) and result.judged["hit@1"]["delta"] == pytest.approx(
        1.0
    )
    assert (
        result.metrics["mrr"]["delta"] < 0 < result.judged["mrr"]["delta"]
    )  # the better retriever loses the strict view
    text = compare.format_text(result)
    side = text[text.index("side by side") :]
    assert "strict delta" in side and "judged delta" in side
    mrr_line = next(line for line in side.splitlines() if line.startswith("mrr "))
    assert mrr_line.split()[3].startswith("-") and mrr_line.split()[7].startswith("+") and "views disagree" in mrr_line
    markdown = compare.format_markdown(result)
    assert "| metric | strict A | strict B | strict delta | p | judged A |" in markdown and "views disagree" in markdown
    data = json.loads(compare.format_json(result))
    assert data["judged_metrics"]["mrr"]["delta"] == pytest.approx(result.judged["mrr"]["delta"])


def test_judged_views_resting_on_different_pools_are_warned_of():
    """The pool is per question, whichever system is scored: A judged with the judge off (or with its
    own pool) and B with another read as "views disagree" for one and the same retriever."""
    n = 20
    a = with_judged(per_question([2] * n), [2] * n).assign(n_pooled=0)
    b = with_judged(per_question([2] * n), [1] * n).assign(n_pooled=3)
    result = compare_tables(a, b, "main", "workspace", resampling=Resampling(500))
    said = [w for w in result.warnings if "the judged views rest on different pools" in w]
    assert said and "0 pooled pairs in A, 60 in B" in said[0]
    same = compare_tables(a.assign(n_pooled=3), b, resampling=Resampling(500))
    assert not [w for w in same.warnings if "different pools" in w]


def test_runs_without_the_judged_view_report_as_before():
    a, b = per_question([1, 2, 3, 4]), with_judged(per_question([1, 1, 1, 1]), [1, 1, 1, 1])
    result = compare_tables(a, b, resampling=Resampling(200))
    assert result.judged == {} and "side by side" not in compare.format_text(result)


# --- the verdict line, one table when the views coincide, segments ------------------------------


def test_the_report_begins_with_one_verdict_line():
    rng = np.random.default_rng(4)
    a = per_question(rng.integers(2, 6, 80).astype(float))
    b = per_question(np.ones(80))  # B puts every gold chunk first
    result = compare_tables(a, b, "main", "workspace", resampling=Resampling(1000))
    first = compare.format_text(result).split("\n")[0]
    m = result.metrics["mrr"]
    assert first.startswith(
        f"B is better on mrr ({m['delta']:+.4f}, 95% CI [{m['ci_low']:+.4f}, {m['ci_high']:+.4f}], p="
    )
    assert first.endswith(
        f"segments not compared (per_question.csv without segment columns); smallest detectable change {m['min_detectable_delta']:.2g}"
    )
    assert compare.format_text(compare_tables(b, a, resampling=Resampling(200))).startswith("B is worse on mrr (")
    same = compare.format_text(compare_tables(a, a.copy(), resampling=Resampling(200))).split("\n")[0]
    assert same.startswith("No significant difference on mrr (+0.0000,") and same.endswith(
        "smallest detectable change n/a"
    )
    assert (
        f"**{first}**" in compare.format_markdown(result)
        and json.loads(compare.format_json(result))["verdict"] == first
    )


def test_the_verdict_and_the_stars_follow_the_ci_level():
    """--level 0.90: a delta with p 0.065, whose 90% CI excludes 0, is significant (p < 0.10), in
    the verdict, the star and the footnote alike; at 0.95 the same delta is not."""
    rng = np.random.default_rng(0)
    a = rng.integers(1, 4, 40).astype(float)
    b = a.copy()
    b[rng.choice(40, 6, replace=False)] = 1
    loose = compare_tables(per_question(a), per_question(b), resampling=Resampling(2000, level=0.9))
    m = loose.metrics["mrr"]
    assert 0.05 < m["p_value"] < 0.1 and m["ci_low"] > 0
    text = compare.format_text(loose)
    assert text.startswith("B is better on mrr (") and "90% CI" in text.split("\n")[0]
    assert f"{m['p_value']:.4f}*" in text and "* p < 0.1, 1 - the CI's level" in text
    strict = compare.format_text(
        compare_tables(per_question(a), per_question(b), resampling=Resampling(2000, level=0.95))
    )
    # 5 questions differ: the exact sign-flip test's smallest p is 2 / 2^5 = 0.0625, it cannot reach 0.05
    assert strict.startswith(
        "Too few questions to decide on mrr: 5 differ, and the paired test needs 6 to reach p < 0.05 ("
    )
    assert "* p < 0.05, 1 - the CI's level" in strict
    assert f"{m['p_value']:.4f}*" not in strict


def test_a_verdict_whose_interval_still_includes_zero_says_it_is_borderline():
    """ "B is worse on mrr (-0.1697, 95% CI [-0.3592, +0.0145], p=0.047)" called B worse under an
    interval that includes 0, without a word."""
    from retrieval_bench.evaluation.compare.outcome import Comparison, verdict_line

    m = {"delta": -0.1697, "ci_low": -0.3592, "ci_high": 0.0145, "p_value": 0.047, "wins": 2, "losses": 9}
    line = verdict_line(Comparison("A", "B", 15, {"mrr": {**m, "min_detectable_delta": 0.3}}, None, [], segments=None))
    assert line.startswith(
        "B is worse on mrr (borderline: the permutation test reaches the bar, the bootstrap CI still includes 0)"
    )


def test_judge_off_prints_one_table_and_no_legend():
    """With the judge off the judged columns equal the strict ones: one table, no "views disagree"."""
    a = with_judged(per_question([2, 3, 1, 4, 2, 5]), [2, 3, 1, 4, 2, 5])
    b = with_judged(per_question([1, 3, 1, 2, 2, 1]), [1, 3, 1, 2, 2, 1])
    result = compare_tables(a, b, resampling=Resampling(200))
    text, markdown = compare.format_text(result), compare.format_markdown(result)
    assert (
        result.views_coincide
        and text.count("metric ") == 1
        and "views disagree" not in text
        and "side by side" not in text
    )
    assert "one table" in text and "views disagree" not in markdown and markdown.count("| metric |") == 1


def test_coinciding_views_report_the_strict_figures_for_the_judged_view():
    """Identical data in both views gives identical figures, not a second resampling whose
    p-values and intervals differ by their seed."""
    a = with_judged(per_question([2, 3, 1, 4, 2, 5, 3, 2]), [2, 3, 1, 4, 2, 5, 3, 2])
    b = with_judged(per_question([1, 3, 1, 2, 2, 1, 1, 2]), [1, 3, 1, 2, 2, 1, 1, 2])
    result = compare_tables(a, b, resampling=Resampling(200))
    assert result.views_coincide and set(result.judged) == set(result.metrics)
    for name, strict in result.metrics.items():
        assert result.judged[name] == {**strict, "column": "judged_" + strict["column"]}


def test_a_judged_column_only_one_run_carries_is_left_out():
    a = with_judged(per_question([2, 3, 1, 4]), [2, 3, 1, 4])
    b = with_judged(per_question([1, 3, 1, 2]), [1, 3, 1, 2]).drop(columns=["judged_hit@1", "judged_recall@1"])
    result = compare_tables(a, b, resampling=Resampling(200))
    assert result.views_coincide and "hit@1" not in result.judged and "mrr" in result.judged


def test_views_that_differ_without_a_disagreement_carry_no_legend():
    a = with_judged(per_question([2] * 30), [2] * 30)
    b = with_judged(per_question([2] * 30), [2] * 29 + [1])  # judged: one question better; no verdict changes
    text = compare.format_text(compare_tables(a, b, resampling=Resampling(200)))
    assert "side by side" in text and "views disagree" not in text


def test_a_regressed_segment_is_named_in_the_verdict():
    """B is better overall but loses every question of one document: that segment is reported,
    with Benjamini-Hochberg over every segment tested; the others are not."""
    n = 60
    a = per_question([3.0] * n)
    b = per_question([1.0] * 40 + [20.0] * 20)
    for table in (a, b):
        table["question_set"] = "hand-written"
        table["document"] = ["good.md"] * 40 + ["bad.md"] * 20
        table["folder"] = "."
        table["length_bucket"] = ["short (<= 8 words)", "medium (9-15 words)"] * 30
    result = compare_tables(a, b, resampling=Resampling(2000))
    regressed = result.segments["regressed"]
    assert [(r["segment"], r["value"]) for r in regressed] == [("document", "bad.md")]
    assert regressed[0]["delta"] == pytest.approx(1 / 20 - 1 / 3) and regressed[0]["p_bh"] < 0.05
    assert (
        result.segments["tests"] == 2 + 2 and "Benjamini-Hochberg" in result.segments["correction"]
    )  # documents, lengths
    assert "; 1 segment regressed: document=bad.md (-0.283); " in compare.format_text(result).split("\n")[0]


def test_compare_and_the_leaderboard_find_the_same_segment_regressions_leaving_out_missing_values():
    """A question without a value in one run is left out of its segment's test (not a tie, not a
    NaN p-value), by compare and by the leaderboard alike."""
    n = 60
    a = per_question([3.0] * n)
    b = per_question([1.0] * 40 + [20.0] * 20)
    b.loc[[40, 41], "reciprocal_rank"] = np.nan
    for table in (a, b):
        table["question_set"] = "hand-written"
        table["document"] = ["good.md"] * 40 + ["bad.md"] * 20
        table["folder"] = "."
        table["length_bucket"] = ["short (<= 8 words)", "medium (9-15 words)"] * 30
    segments = compare_tables(a, b, resampling=Resampling(2000)).segments
    board = segment_regressions({"A": a.set_index("qid"), "B": b.set_index("qid")}, 2000)
    assert [(r["segment"], r["value"], r["n_questions"]) for r in segments["regressed"]] == [("document", "bad.md", 18)]
    assert segments["regressed"][0]["delta"] == pytest.approx(1 / 20 - 1 / 3)
    assert [{**r, "system": "B"} for r in segments["regressed"]] == board["regressed"]
    assert segments["tests"] == board["tests"] and segments["correction"] == board["correction"]


def test_a_panel_system_is_compared_across_revisions(repo, monkeypatch, capsys):
    panel_table = repo / "metrics" / "panel" / "bm25" / "per_question.csv"
    panel_table.parent.mkdir(parents=True)
    per_question([4, 4, 4, 4]).to_csv(panel_table, index=False)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "panel", cwd=repo)
    per_question([1, 1, 1, 1]).to_csv(panel_table, index=False)
    code, out, _ = run_compare(
        repo, monkeypatch, capsys, "HEAD", "workspace", "--system", "bm25", "--json", "--resamples", "200"
    )
    data = json.loads(out)
    assert code == 0 and data["metrics"]["mrr"]["a"] == 0.25 and data["metrics"]["mrr"]["b"] == 1.0
    with pytest.raises(InputError, match="HEAD: no metrics/panel/hybrid/per_question.csv committed there"):
        run_compare(repo, monkeypatch, capsys, "HEAD", "workspace", "--system", "hybrid")


# --- what compare and `dvc metrics diff` say about duplicates and the judged view ----------------
@pytest.fixture(scope="module")
def copied_gold():
    """Two sample documents plus a third that copies one question's gold chunk (the corpus then
    holds a duplicate pair), their hand-written questions, and a run putting every gold chunk
    first: the duplicate is in the corpus, but no question gains from it."""
    from retrieval_bench.core.run_table import from_records
    from retrieval_bench.corpus.duplicates import find_duplicates
    from retrieval_bench.corpus.load import chunk_documents, read_documents_folder
    from retrieval_bench.goldenset.build import handwritten_rows, read_handwritten

    root = Path(__file__).resolve().parents[2]
    documents = read_documents_folder(root / "data" / "sample" / "sqlite")
    documents = documents[documents["doc_id"].isin(["wal.md", "inmemorydb.md"])].reset_index(drop=True)
    chunks = chunk_documents(documents, 800, 100)
    golden, _ = handwritten_rows(read_handwritten(root / "data" / "handwritten_questions.jsonl"), documents, chunks)
    golden = [row for row in golden if row["kind"] == "single"]  # one evidence span each
    copy = chunks.set_index("chunk_id").loc[golden[0]["gold_chunk_id"], "text"]
    documents = pd.concat([documents, pd.DataFrame({"doc_id": ["copy.md"], "text": [copy]})], ignore_index=True)
    chunks = chunk_documents(documents, 800, 100)
    others = [c for c in chunks["chunk_id"] if not c.startswith("copy.md")]
    records = [(r["qid"], r["gold_chunk_id"], 100.0) for r in golden] + [
        (r["qid"], c, 50.0 - i) for r in golden for i, c in enumerate(o for o in others if o != r["gold_chunk_id"])
    ]
    return golden, chunks, from_records(records, 10), find_duplicates(chunks)


def scored(copied_gold, judge_enabled: bool) -> dict:
    import copy

    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.evaluation.score.judged import JudgedInputs
    from retrieval_bench.evaluation.score.scoring import score_system
    from retrieval_bench.evaluation.score.settings import Scoring

    golden, chunks, run_table, duplicates = copied_gold
    params = copy.deepcopy(DEFAULTS)
    params["judge"]["enabled"] = judge_enabled
    return score_system(
        Scoring.from_params(params),
        golden,
        chunks,
        run_table,
        JudgedInputs(duplicates, [], "pool.jsonl"),
        run_info_path="no-run-info.json",
    )[1]


def test_metrics_json_has_no_judged_twins_while_the_judge_is_off_and_they_repeat_the_metrics(copied_gold):
    """`dvc metrics diff main` listed every judged_<metric> beside its metric with the judge off."""
    summary = scored(copied_gold, judge_enabled=False)
    assert summary["n_duplicate_chunks"] == 1
    assert "mrr" in summary and not [name for name in summary if name.startswith("judged_")]
    with_judge = scored(copied_gold, judge_enabled=True)
    assert with_judge["judged_mrr"] == with_judge["mrr"]  # the judge on: its view is reported, even if equal


def test_coinciding_views_are_not_called_free_of_duplicates_when_the_corpus_has_some(copied_gold):
    """compare said "no duplicate chunks" where the score stage reported n_duplicate_chunks=1: the
    views coincide because no copy of a relevant chunk was retrieved, not because there is none."""
    summary = scored(copied_gold, judge_enabled=True)
    assert summary["n_duplicate_chunks"] == 1 and summary["judged_mrr"] == summary["mrr"]
    a = with_judged(per_question([2, 3, 1, 4]), [2, 3, 1, 4])
    text = compare.format_text(compare_tables(a, a.copy(), resampling=Resampling(200)))
    assert compare_report.VIEWS_COINCIDE in text and "no duplicate chunks" not in text
    assert "no duplicate of a relevant chunk was retrieved" in text


def test_a_ci_that_excludes_0_without_a_significant_p_is_called_borderline():
    """7 questions differ (the test could reach 0.05), 6 one way: the 95% bootstrap CI excludes 0 but
    the exact sign-flip p is 0.094: the verdict says borderline rather than plain no difference."""
    rng = np.random.default_rng(3)
    a = rng.integers(1, 4, 40).astype(float)
    b = a.copy()
    changed = rng.choice(40, 7, replace=False)
    b[changed] = rng.integers(1, 3, 7)
    result = compare_tables(per_question(a), per_question(b), resampling=Resampling(2000))
    m = result.metrics["mrr"]
    assert m["p_value"] >= 0.05 and m["ci_low"] > 0 and m["wins"] + m["losses"] == 7
    line = compare.format_text(result).split("\n")[0]
    assert line.startswith(
        "No significant difference on mrr (borderline: the bootstrap CI excludes 0, the permutation test does not "
    )


def test_a_metric_in_one_run_only_is_named_not_silently_left_out():
    a = per_question(np.array([1.0, 2, 3, 1, 2]))
    b = per_question(np.array([1.0, 1, 1, 2, 2])).drop(columns=["reciprocal_rank"])
    result = compare_tables(a, b, resampling=Resampling(200))
    assert "metrics only in A, not compared: mrr" in result.warnings and "mrr" not in result.metrics
