"""Metric definitions: hand-computed cases, the tie policy, and a randomized cross-check of every
metric against trec_eval (pytrec_eval) to 1e-9."""

import math

import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from conftest import pessimistic_ranks

from retrieval_bench.evaluation.score.metrics import (
    question_metrics,
    rank_histogram,
    summarize,
)
from retrieval_bench.evaluation.score.settings import Scoring

KS = [1, 3, 5, 10, 20]


def assert_matches_trec_eval(row, grades: dict, run_frame, ks: list[int], prefix: str = "") -> None:
    """`row`'s recall, hit, ndcg and map at each k and its reciprocal rank (columns `prefix`+name)
    equal pytrec_eval's for one question "q" with qrels `grades` and the ranking of `run_frame`."""
    cut = {r.chunk_id: r.score for r in run_frame.itertuples()} or {"none": 0.0}
    cutoffs = ",".join(map(str, ks))
    measures = {f"recall.{cutoffs}", f"success.{cutoffs}", f"ndcg_cut.{cutoffs}", f"map_cut.{cutoffs}", "recip_rank"}
    trec = pytrec_eval.RelevanceEvaluator({"q": grades}, measures).evaluate({"q": cut})["q"]
    for k in ks:
        assert row[f"{prefix}recall@{k}"] == pytest.approx(trec[f"recall_{k}"], abs=1e-9)
        assert row[f"{prefix}hit@{k}"] == pytest.approx(trec[f"success_{k}"], abs=1e-9)
        assert row[f"{prefix}ndcg@{k}"] == pytest.approx(trec[f"ndcg_cut_{k}"], abs=1e-9)
        assert row[f"{prefix}map@{k}"] == pytest.approx(trec[f"map_cut_{k}"], abs=1e-9)
    assert row[f"{prefix}reciprocal_rank"] == pytest.approx(trec["recip_rank"], abs=1e-9)


def test_single_gold_chunk_hand_computed():
    row = question_metrics(np.array([3]), np.array([1.0]), KS)
    assert row["first_relevant_rank"] == 3
    assert row["reciprocal_rank"] == pytest.approx(1 / 3)
    assert row["ndcg@10"] == pytest.approx(1 / math.log2(4))  # gain 1 at rank 3, ideal 1 at rank 1
    assert row["map@10"] == pytest.approx(1 / 3)
    assert [row[f"recall@{k}"] for k in KS] == [0, 1, 1, 1, 1]
    assert [row[f"hit@{k}"] for k in KS] == [0, 1, 1, 1, 1]


def test_graded_several_relevant_hand_computed():
    # Grades 1 at rank 2 and 2 at rank 4, a third relevant chunk (grade 1) never retrieved.
    ranks, gains = np.array([2, 4, np.inf]), np.array([1.0, 2.0, 1.0])
    row = question_metrics(ranks, gains, [1, 3, 5])
    assert row["recall@3"] == pytest.approx(1 / 3)
    assert row["recall@5"] == pytest.approx(2 / 3)
    assert row["hit@1"] == 0 and row["hit@3"] == 1
    assert row["reciprocal_rank"] == 0.5
    dcg = 1 / math.log2(3) + 2 / math.log2(5)
    ideal = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert row["ndcg@5"] == pytest.approx(dcg / ideal)
    assert row["map@5"] == pytest.approx((1 / 2 + 2 / 4) / 3)
    # at k = 3 (score.k's cut-offs, not a fixed 10): the grade-2 chunk at rank 4 is beyond the cut
    assert row["ndcg@3"] == pytest.approx((1 / math.log2(3)) / ideal)
    assert row["map@3"] == pytest.approx((1 / 2) / 3)
    assert (row["reciprocal_rank@1"], row["reciprocal_rank@3"]) == (0.0, 0.5)


def test_nothing_relevant_retrieved_scores_zero():
    row = question_metrics(np.array([np.inf]), np.array([1.0]), KS)
    assert math.isnan(row["first_relevant_rank"])
    assert row["reciprocal_rank"] == 0 and row["ndcg@10"] == 0 and row["map@10"] == 0
    assert all(row[f"recall@{k}"] == 0 and row[f"hit@{k}"] == 0 for k in KS)


def test_ties_are_broken_pessimistically():
    scores = np.array([0.9, 0.5, 0.5, 0.5, 0.1])
    # The judged chunk 2 ties with chunks 1 and 3: it ranks after both, at 4, not at 2 or 3.
    assert pessimistic_ranks(scores, np.array([2])).tolist() == [4]
    assert pessimistic_ranks(scores, np.array([0, 4])).tolist() == [1, 5]
    # Every chunk scoring the same (a degenerate retriever) puts the gold chunk last.
    assert pessimistic_ranks(np.zeros(7), np.array([0])).tolist() == [7]
    row = question_metrics(pessimistic_ranks(scores, np.array([2])), np.array([1.0]), [3, 4])
    assert row["hit@3"] == 0 and row["hit@4"] == 1 and row["reciprocal_rank"] == 0.25


def random_case(rng: np.random.Generator):
    """A corpus, a run that returns a random subset in random order (distinct scores), and qrels
    with grades 0-3 and several relevant chunks, some of which the run never returns."""
    n_docs = int(rng.integers(1, 40))
    docs = [f"d{i}" for i in range(n_docs)]
    n_judged = int(rng.integers(1, n_docs + 1))
    judged = rng.choice(n_docs, size=n_judged, replace=False)
    grades = {docs[i]: int(rng.integers(0, 4)) for i in judged}
    if not any(grades.values()):
        grades[docs[judged[0]]] = int(rng.integers(1, 4))
    n_returned = int(rng.integers(0, n_docs + 1))  # 0: nothing retrieved at all
    returned = rng.choice(n_docs, size=n_returned, replace=False)
    scores = rng.permutation(n_returned).astype(float) + rng.random(n_returned) * 0.5  # distinct
    return docs, grades, {docs[i]: float(s) for i, s in zip(returned, scores)}


@pytest.mark.parametrize("seed", range(250))
def test_every_metric_equals_trec_eval(seed):
    rng = np.random.default_rng(seed)
    docs, grades, run = random_case(rng)
    ks = sorted({1, 3, 5, 10, int(rng.integers(1, 60))})  # includes k larger than the corpus
    run_ids = list(run)
    run_scores = np.array([run[d] for d in run_ids])
    relevant = [d for d, g in grades.items() if g > 0]
    ranks = np.array(
        [pessimistic_ranks(run_scores, np.array([run_ids.index(d)]))[0] if d in run else np.inf for d in relevant],
        dtype=float,
    )
    gains = np.array([grades[d] for d in relevant], dtype=float)
    ours = question_metrics(ranks, gains, ks)

    measures = {
        f"recall.{','.join(map(str, ks))}",
        f"success.{','.join(map(str, ks))}",
        f"ndcg_cut.{','.join(map(str, ks))}",
        f"map_cut.{','.join(map(str, ks))}",
        "recip_rank",
    }
    qrels = {"q": grades}
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate({"q": run or {"none": 0.0}})["q"]

    for k in ks:  # every metric at every cut-off of score.k, as the one metric table makes them
        top_k = dict(sorted(run.items(), key=lambda item: -item[1])[:k]) or {"none": 0.0}
        trec_rr_k = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate({"q": top_k})["q"]["recip_rank"]
        assert ours[f"recall@{k}"] == pytest.approx(trec[f"recall_{k}"], abs=1e-9)
        assert ours[f"hit@{k}"] == pytest.approx(trec[f"success_{k}"], abs=1e-9)
        assert ours[f"ndcg@{k}"] == pytest.approx(trec[f"ndcg_cut_{k}"], abs=1e-9)
        assert ours[f"map@{k}"] == pytest.approx(trec[f"map_cut_{k}"], abs=1e-9)
        assert ours[f"reciprocal_rank@{k}"] == pytest.approx(trec_rr_k, abs=1e-9)
    assert ours["reciprocal_rank"] == pytest.approx(trec["recip_rank"], abs=1e-9)


def test_summary_and_rank_histogram():
    table = pd.DataFrame(
        [
            question_metrics(np.array([1]), np.array([1.0]), [1, 5]),
            question_metrics(np.array([4, 30]), np.array([1.0, 1.0]), [1, 5]),
            question_metrics(np.array([250]), np.array([1.0]), [1, 5]),
            question_metrics(np.array([]), np.array([]), [1, 5]),  # no chunk held enough of the evidence
        ]
    )
    summary = summarize(table, [1, 5], n_chunks=300)
    assert summary["recall@5"] == pytest.approx((1 + 0.5 + 0 + 0) / 4)
    assert summary["hit@5"] == 0.5 and summary["mrr"] == pytest.approx((1 + 1 / 4 + 1 / 250) / 4)
    assert summary["n_questions"] == 4 and summary["n_chunks"] == 300
    assert summary["n_questions_without_relevant_chunk"] == 1
    histogram = rank_histogram(table["first_relevant_rank"]).set_index("first_relevant_rank")["questions"]
    assert histogram.to_dict() == {
        "01": 1,
        "02": 0,
        "03": 0,
        "04-05": 1,
        "06-10": 0,
        "11-20": 0,
        "21-50": 0,
        "51-100": 0,
        ">100": 1,
        "none": 1,
    }
    labels = list(histogram.index)
    assert sorted(labels) == labels  # dvc plots sorts the bars as text: that must be rank order


@pytest.mark.parametrize("seed", range(60))
def test_metrics_on_a_run_equal_trec_eval_on_that_run(seed):
    """A run cut at a depth: relevant chunks beyond it are not retrieved, as trec_eval counts them."""
    from retrieval_bench.core.run_table import from_records
    from retrieval_bench.evaluation.score.scoring import score_run

    rng = np.random.default_rng(1000 + seed)
    docs, grades, run = random_case(rng)
    depth = int(rng.integers(1, len(docs) + 2))
    run_frame = (
        from_records([("q", d, s) for d, s in run.items()], depth) if run else from_records([("q", docs[0], 0.0)], 0)
    )
    chunks = pd.DataFrame({"chunk_id": docs, "doc_id": docs, "start": 0, "end": 10})
    ks = [1, 3, 5, 10]
    ours = score_run([{"qid": "q", "relevant": grades}], chunks, run_frame, Scoring(ks=tuple(ks))).iloc[0]
    assert_matches_trec_eval(ours, grades, run_frame, ks)
    # The documented bound: the full ranking's MRR less at most 1 / (depth + 1); every k <= depth exact.
    full = score_run(
        [{"qid": "q", "relevant": grades}],
        chunks,
        from_records([("q", d, s) for d, s in run.items()]) if run else run_frame,
        Scoring(ks=tuple(ks)),
    ).iloc[0]
    assert (
        full["reciprocal_rank"] - 1 / (depth + 1) - 1e-12 <= ours["reciprocal_rank"] <= full["reciprocal_rank"] + 1e-12
    )
    for k in (k for k in ks if k <= depth):
        assert ours[f"recall@{k}"] == pytest.approx(full[f"recall@{k}"], abs=1e-12)


# --- the judged view ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(60))
def test_judged_view_equals_trec_eval_on_the_labels_plus_the_llm_grades(seed):
    """With chunk labels and no duplicates, every judged_ metric is trec_eval's on the qrels plus
    the pooled grades >= min_grade (gain = grade / 3 x the best label: the label scale here is
    0-3, so gains stay integers); unjudged and low-graded chunks are not relevant."""
    from retrieval_bench.core.run_table import from_records
    from retrieval_bench.evaluation.score.judged import JudgedInputs
    from retrieval_bench.evaluation.score.scoring import score_run_both_views

    rng = np.random.default_rng(5000 + seed)
    docs, grades, run = random_case(rng)
    best = max(grades.values())
    grades[next(d for d, g in grades.items() if g == best)] = 3  # the best label is 3: LLM gains are the grades
    unlabelled = [d for d in docs if d not in grades]  # a labelled chunk (grade 0 too) keeps its label
    pooled = {
        d: int(rng.integers(0, 4)) for d in rng.permutation(unlabelled)[: int(rng.integers(0, len(unlabelled) + 1))]
    }
    depth = int(rng.integers(1, len(docs) + 2))
    run_frame = (
        from_records([("q", d, s) for d, s in run.items()], depth) if run else from_records([("q", docs[0], 0.0)], 0)
    )
    chunks = pd.DataFrame({"chunk_id": docs, "doc_id": docs, "start": 0, "end": 10})
    no_duplicates = pd.DataFrame(columns=["chunk_id", "group", "kind", "similarity"])
    pool = [{"qid": "q", "chunk_id": d, "grade": g} for d, g in pooled.items()]
    ks = [1, 3, 5, 10]
    row = score_run_both_views(
        [{"qid": "q", "relevant": grades}], chunks, run_frame, Scoring(ks=tuple(ks)), JudgedInputs(no_duplicates, pool)
    ).iloc[0]
    augmented = {**grades, **{d: g for d, g in pooled.items() if g >= 2}}
    assert_matches_trec_eval(row, augmented, run_frame, ks, prefix="judged_")
    assert row["n_judge_relevant"] == sum(g >= 2 for g in pooled.values())
    assert row["n_pooled"] == len(pooled) and row["n_pooled_relevant"] == row["n_judge_relevant"]


def test_without_duplicates_or_judgements_the_judged_view_is_the_strict_one():
    from retrieval_bench.core.run_table import from_records
    from retrieval_bench.evaluation.score.judged import JudgedInputs, judged_summary
    from retrieval_bench.evaluation.score.scoring import score_run, score_run_both_views

    rng = np.random.default_rng(7)
    chunks = pd.DataFrame(
        {
            "chunk_id": [f"doc:{i * 50}-{i * 50 + 80}" for i in range(30)],
            "doc_id": "doc",
            "start": [i * 50 for i in range(30)],
            "end": [i * 50 + 80 for i in range(30)],
        }
    )
    golden = [
        {"qid": f"q{i}", "doc_id": "doc", "start": int(s), "end": int(s + rng.integers(20, 200))}
        for i, s in enumerate(rng.integers(0, 1300, 12))
    ]
    run = from_records(
        [(row["qid"], c, float(rng.integers(0, 5))) for row in golden for c in chunks["chunk_id"]], 15
    )  # ties
    empty = pd.DataFrame(columns=["chunk_id", "group", "kind", "similarity"])
    for ties in ("expected", "pessimistic", "optimistic"):
        both = score_run_both_views(golden, chunks, run, Scoring(ks=tuple(KS), ties=ties), JudgedInputs(empty))
        strict = score_run(golden, chunks, run, Scoring(ks=tuple(KS), ties=ties))
        pd.testing.assert_frame_equal(both[strict.columns], strict)  # the strict columns, unchanged and first
        assert list(both.columns[: len(strict.columns)]) == list(strict.columns)
        for column in [c for c in both.columns if c.startswith("judged_") and c != "judged_n_relevant"]:
            np.testing.assert_array_equal(both[column].to_numpy(), both[column.removeprefix("judged_")].to_numpy())
    summary = {**summarize(both, KS, len(chunks)), **judged_summary(both, KS, empty)}
    assert list(summary)[: len(summarize(both, KS, len(chunks)))] == list(summarize(strict, KS, len(chunks)))
    assert all(summary[f"judged_{name}"] == summary[name] for name in ("mrr", "ndcg@10", "recall@5", "hit@1", "map@10"))
    assert (
        summary["judge_pooled"] == 0
        and "judge_relevant_share" not in summary  # no null in a declared metric
        and summary["n_questions_gaining_duplicate"] == 0
    )


def test_a_golden_set_without_one_relevant_chunk_scores_zero_rather_than_failing():
    """Only grade-0 labels (or only unanswerable questions): the judged chunks' join had nothing to
    join on and raised "merge on float64 and str columns"."""
    from retrieval_bench import api

    scores = api.score({"q1": {"a": 0}, "q2": {"b": 0}}, {"q1": {"a": 1.0, "b": 0.5}, "q2": {"b": 1.0}})
    assert scores.metrics["mrr"] == 0.0 and scores.metrics["n_questions_without_relevant_chunk"] == 2
