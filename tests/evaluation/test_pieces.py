"""Multi-evidence and unanswerable questions: complete@k, evidence_recall@k and last_piece_rank
against a hand computation (every order of the tied groups enumerated), pieces judged on chunk
tables where two pieces share a chunk and one piece is split over two chunks, and the abstention
figures against plain pair counts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from retrieval_bench.core.relevance import Judgement, judge
from retrieval_bench.evaluation.score.abstention import (
    abstention_auc,
    abstention_summary,
    abstention_warning,
    average_ranks,
    contradiction_warning,
    false_hit_rate,
    hit_threshold,
    top_scores,
)
from retrieval_bench.evaluation.score.metrics import score_question, summarize
from retrieval_bench.retrieval.rank import judged_positions

KS = [1, 2, 3, 5]


def orders(scores: np.ndarray):
    """Every ranking (chunk -> 1-based rank) sorting by score, tied chunks in every order."""
    levels = sorted(set(scores.tolist()), reverse=True)
    groups = [[i for i in range(len(scores)) if scores[i] == level] for level in levels]
    for parts in itertools.product(*(itertools.permutations(group) for group in groups)):
        rank = {}
        for position, chunk in enumerate(c for part in parts for c in part):
            rank[chunk] = position + 1
        yield rank


def by_hand(rank: dict[int, int], pieces: list[list[int]], k: int) -> tuple[float, float]:
    """(complete@k, evidence_recall@k) of one ranking: piece by piece, is a chunk of it in the top k."""
    found = [any(rank[chunk] <= k for chunk in piece) for piece in pieces]
    return (1.0 if all(found) else 0.0), sum(found) / len(found)


def last_by_hand(rank: dict[int, int], pieces: list[list[int]]) -> float:
    firsts = [min(rank[chunk] for chunk in piece) if piece else math.inf for piece in pieces]
    return max(firsts)


def random_pieces_case(rng: np.random.Generator, n_retrieved: int):
    """Chunks 0..n-1 with few score levels (many ties), some retrieved; 2-3 pieces over them, a
    chunk possibly in two pieces, a piece possibly over two chunks."""
    n = int(rng.integers(3, 8))
    scores = rng.integers(0, 3, size=n).astype(float)
    pieces = [
        sorted(rng.choice(n, size=int(rng.integers(1, 3)), replace=False).tolist())
        for _ in range(int(rng.integers(2, 4)))
    ]
    judged = sorted({c for piece in pieces for c in piece})
    judgement = Judgement(np.array(judged), np.ones(len(judged)), pieces=tuple(np.array(piece) for piece in pieces))
    retrieved = scores.copy()
    dropped = rng.choice(n, size=n - n_retrieved, replace=False) if n_retrieved < n else []
    retrieved[dropped] = -np.inf  # not in the run
    return scores, retrieved, judgement, pieces


@pytest.mark.parametrize("seed", range(80))
def test_expected_piece_metrics_equal_the_mean_over_every_order(seed):
    rng = np.random.default_rng(seed)
    scores, _, judgement, pieces = random_pieces_case(rng, n_retrieved=10**6)
    ours = score_question(judgement, judged_positions(scores, judgement.indices), KS, "expected")
    rankings = list(orders(scores))
    for k in KS:
        hand = np.mean([by_hand(rank, pieces, k) for rank in rankings], axis=0)
        assert ours[f"complete@{k}"] == pytest.approx(hand[0], abs=1e-12)
        assert ours[f"evidence_recall@{k}"] == pytest.approx(hand[1], abs=1e-12)
    assert ours["last_piece_rank"] == pytest.approx(np.mean([last_by_hand(r, pieces) for r in rankings]), abs=1e-9)


@pytest.mark.parametrize("policy", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("seed", range(40))
def test_concrete_piece_metrics_equal_the_hand_count_on_the_order_they_stand_for(seed, policy):
    rng = np.random.default_rng(500 + seed)
    scores = rng.permutation(8).astype(float)  # no ties: the policies agree with the one order
    pieces = [sorted(rng.choice(8, size=int(rng.integers(1, 3)), replace=False).tolist()) for _ in range(3)]
    judged = sorted({c for piece in pieces for c in piece})
    judgement = Judgement(np.array(judged), np.ones(len(judged)), pieces=tuple(np.array(p) for p in pieces))
    ours = score_question(judgement, judged_positions(scores, judgement.indices), KS, policy)
    (rank,) = list(orders(scores))
    for k in KS:
        assert (ours[f"complete@{k}"], ours[f"evidence_recall@{k}"]) == by_hand(rank, pieces, k)
    assert ours["last_piece_rank"] == last_by_hand(rank, pieces)


@pytest.mark.parametrize("ties", ["expected", "pessimistic", "optimistic"])
@pytest.mark.parametrize("seed", range(30))
def test_a_piece_never_retrieved_leaves_the_question_incomplete(seed, ties):
    rng = np.random.default_rng(900 + seed)
    scores = rng.integers(0, 3, size=6).astype(float)
    judgement = Judgement(np.array([0, 1, 2]), np.ones(3), pieces=(np.array([0, 1]), np.array([2])))
    positions = judged_positions(scores, judgement.indices)
    positions.better[2] = np.inf  # chunk 2 (the second piece's only chunk) is not in the run
    ours = score_question(judgement, positions, KS, ties)
    assert all(ours[f"complete@{k}"] == 0.0 for k in KS)
    assert all(ours[f"evidence_recall@{k}"] <= 0.5 for k in KS)
    assert math.isnan(ours["last_piece_rank"])


@pytest.mark.parametrize("ties", ["expected", "pessimistic", "optimistic"])
@pytest.mark.parametrize("seed", range(30))
def test_complete_and_evidence_recall_equal_hit_for_single_evidence_questions(seed, ties):
    rng = np.random.default_rng(1300 + seed)
    n = int(rng.integers(2, 9))
    scores = rng.integers(0, 4, size=n).astype(float)
    judged = rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)
    gains = rng.choice([0.0, 0.5, 1.0], size=len(judged))
    gains[0] = 1.0
    judgement = Judgement(judged, gains)
    row = score_question(judgement, judged_positions(scores, judgement.indices), KS, ties)
    for k in KS:
        assert row[f"complete@{k}"] == pytest.approx(row[f"hit@{k}"], abs=1e-12)
        assert row[f"evidence_recall@{k}"] == pytest.approx(row[f"hit@{k}"], abs=1e-12)


CHUNKS = pd.DataFrame(
    {
        "chunk_id": ["a0", "a1", "a2", "b0", "b1"],
        "doc_id": ["a", "a", "a", "b", "b"],
        "start": [0, 100, 200, 0, 100],
        "end": [100, 200, 300, 100, 200],
    }
)


def test_two_pieces_in_one_chunk_and_a_piece_split_over_two_chunks():
    row = {
        "qid": "m",
        "question": "q",
        "kind": "multi",
        "evidence_spans": [
            {"doc_id": "a", "start": 10, "end": 40},  # in a0
            {"doc_id": "a", "start": 60, "end": 90},  # in a0 too: two pieces in one chunk
            {"doc_id": "b", "start": 80, "end": 120},  # half in b0, half in b1: either chunk answers it
        ],
        "doc_id": "a",
        "start": 10,
        "end": 40,
    }
    (judgement,) = judge([row], CHUNKS, 0.5)
    chunk_ids = CHUNKS["chunk_id"].to_numpy()
    assert [chunk_ids[p].tolist() for p in judgement.pieces] == [["a0"], ["a0"], ["b0", "b1"]]
    assert dict(zip(chunk_ids[judgement.indices].tolist(), judgement.gains.tolist())) == {
        "a0": 2.0,
        "b0": 0.5,
        "b1": 0.5,
    }
    # the run ranks b1 first, then a2, a0, b0: a0 answers the first two pieces at rank 3
    scores = np.array([0.7, 0.1, 0.8, 0.6, 0.9])
    row = score_question(judgement, judged_positions(scores, judgement.indices), KS, "pessimistic")
    assert [row[f"complete@{k}"] for k in KS] == [0.0, 0.0, 1.0, 1.0]
    assert [row[f"evidence_recall@{k}"] for k in KS] == pytest.approx([1 / 3, 1 / 3, 1.0, 1.0])
    assert row["last_piece_rank"] == 3.0 and row["first_relevant_rank"] == 1.0


def test_an_unanswerable_question_has_no_ranking_metric_and_stays_out_of_the_means():
    golden = [
        {"qid": "u", "question": "q", "kind": "unanswerable", "doc_id": None, "start": None, "end": None},
        {"qid": "s", "question": "q2", "doc_id": "a", "start": 110, "end": 190},
    ]
    unanswerable, single = judge(golden, CHUNKS, 0.5)
    assert not unanswerable.answerable and len(unanswerable.indices) == 0
    scores = np.array([0.9, 0.5, 0.1, 0.2, 0.3])
    rows = [score_question(j, judged_positions(scores, j.indices), KS, "expected") for j in (unanswerable, single)]
    assert all(
        math.isnan(value)
        for name, value in rows[0].items()
        if name not in ("n_relevant", "n_relevant_tied", "tie_group_size")
    )
    table = pd.DataFrame(rows).assign(kind=["unanswerable", "single"])
    summary = summarize(table, KS, len(CHUNKS))
    assert summary["mrr"] == rows[1]["reciprocal_rank"] and summary["n_questions_without_relevant_chunk"] == 0


# Abstention, against plain pair counts and a threshold found by trying every score
def auc_by_pairs(answerable, unanswerable) -> float:
    low = -math.inf
    answerable = [low if math.isnan(a) else a for a in answerable]
    unanswerable = [low if math.isnan(u) else u for u in unanswerable]
    wins = sum((a > u) + 0.5 * (a == u) for a in answerable for u in unanswerable)
    return wins / (len(answerable) * len(unanswerable))


def threshold_by_trying(scores, hits, keep=0.95) -> float:
    candidates = sorted({-math.inf if math.isnan(s) else s for s in scores}, reverse=True)
    total = sum(hits)
    for t in candidates:  # the highest score keeping enough of the hits
        kept = sum(h for s, h in zip(scores, hits) if (-math.inf if math.isnan(s) else s) >= t)
        if kept >= keep * total - 1e-12:
            return t
    raise AssertionError("unreachable: the lowest score keeps every hit")


def test_average_ranks_share_the_mean_rank_of_equal_values_as_scipy_does():
    from scipy.stats import rankdata

    rng = np.random.default_rng(45)
    for _ in range(500):
        values = rng.integers(0, 6, rng.integers(1, 40)).astype(float)
        values[rng.random(len(values)) < 0.2] = -np.inf  # a missing top-1 score ranks lowest
        np.testing.assert_array_equal(average_ranks(values), rankdata(values))
    np.testing.assert_array_equal(average_ranks(np.array([0.3, 0.1, 0.3, 0.2])), [3.5, 1.0, 3.5, 2.0])


@pytest.mark.parametrize("seed", range(60))
def test_abstention_auc_and_false_hit_rate_against_pair_counts(seed):
    rng = np.random.default_rng(2000 + seed)
    n_a, n_u = int(rng.integers(1, 30)), int(rng.integers(1, 15))
    answerable = rng.integers(0, 6, size=n_a).astype(float)  # few levels: ties across the two sides
    unanswerable = rng.integers(0, 5, size=n_u).astype(float)
    answerable[rng.random(n_a) < 0.1] = np.nan  # nothing retrieved
    unanswerable[rng.random(n_u) < 0.1] = np.nan
    hits = rng.choice([0.0, 0.5, 1.0], size=n_a)
    assert abstention_auc(answerable, unanswerable) == pytest.approx(auc_by_pairs(answerable, unanswerable), abs=1e-12)
    if hits.sum() == 0:
        assert math.isnan(hit_threshold(answerable, hits))
        return
    threshold = hit_threshold(answerable, hits)
    assert threshold == threshold_by_trying(answerable.tolist(), hits.tolist())
    expected = sum((-math.inf if math.isnan(u) else u) >= threshold for u in unanswerable) / n_u
    assert false_hit_rate(unanswerable, threshold) == pytest.approx(expected)


def test_abstention_summary_reads_the_per_question_table():
    run = pd.DataFrame(
        {"qid": ["a", "a", "b", "u", "v"], "chunk_id": ["x", "y", "x", "x", "y"], "score": [0.9, 0.95, 0.4, 0.5, 0.2]}
    )
    table = pd.DataFrame(
        {
            "qid": ["a", "b", "u", "v", "w"],
            "kind": ["single", "multi", "unanswerable", "unanswerable", "unanswerable"],
            "n_relevant": [1, 2, 0, 0, 0],
            "hit@1": [1.0, 1.0, np.nan, np.nan, np.nan],
        }
    ).assign(top_score=lambda t: top_scores(run, t["qid"].tolist()))
    assert table["top_score"].tolist()[:4] == [0.95, 0.4, 0.5, 0.2] and math.isnan(table["top_score"].iloc[4])
    summary = abstention_summary(table)
    # pairs (a, b) x (u, v, w): a beats all 3, b beats v and w (nothing retrieved for w) -> 5 / 6
    assert summary["abstention_auc"] == pytest.approx(5 / 6)
    # keeping 95% of the 2 hits keeps both: threshold 0.4, u (0.5) is a false hit
    assert summary["abstention_threshold"] == 0.4 and summary["false_hit_rate"] == pytest.approx(1 / 3)
    assert summary["n_unanswerable"] == 3
    assert abstention_summary(table[table["kind"] != "unanswerable"]) == {}
    assert abstention_warning(table) is None
    without_hit1 = table.drop(columns="hit@1")  # score.k without 1: no figures, and a line saying why
    assert abstention_summary(without_hit1) == {}
    assert abstention_warning(without_hit1) == (
        "no abstention figures for the unanswerable questions: they need hit@1, add 1 to score.k"
    )


def test_an_unanswerable_question_a_judged_chunk_answers_leaves_the_abstention_figures():
    """With the judge on (or a reviewer's grades), an unanswerable question with a relevant judged
    chunk is counted, named and left out: the figures equal those of the table without it."""
    table = pd.DataFrame(
        {
            "qid": ["a", "b", "u", "v", "w"],
            "kind": ["single", "single", "unanswerable", "unanswerable", "unanswerable"],
            "n_relevant": [1, 1, 0, 0, 0],
            "hit@1": [1.0, 0.0, np.nan, np.nan, np.nan],
            "top_score": [0.9, 0.3, 0.8, 0.2, 0.1],
            "judged_n_relevant": [1, 2, 1, 0, 0],  # u: the judge graded a pooled chunk as answering it
        }
    )
    summary = abstention_summary(table)
    assert summary["n_unanswerable_contradicted"] == 1 and summary["n_unanswerable"] == 2
    without_u = abstention_summary(table[table["qid"] != "u"])
    assert {k: v for k, v in summary.items() if k != "n_unanswerable_contradicted"} == without_u
    assert summary["abstention_auc"] == pytest.approx(auc_by_pairs(np.array([0.9, 0.3]), np.array([0.2, 0.1])))
    assert contradiction_warning(table) == (
        "1 unanswerable question(s) have a pooled chunk graded as answering them (u): "
        "left out of the abstention figures; fix or drop them in the golden set"
    )
    assert contradiction_warning(table.assign(judged_n_relevant=0)) is None
    assert "n_unanswerable_contradicted" not in abstention_summary(table.drop(columns="judged_n_relevant"))


def test_a_piece_no_chunk_of_the_chunking_holds_makes_the_question_unscorable_there():
    """As a single question whose evidence no chunk holds: left out of the comparison (no relevant
    chunk), not scored 0 on complete@k in this chunking alone."""
    from retrieval_bench.core.relevance import _pieces_judgement

    chunks = pd.DataFrame({"chunk_id": ["a:0-10", "a:10-20"], "doc_id": ["a", "a"], "start": [0, 10], "end": [10, 20]})
    by_doc = {"a": np.array([0, 1])}
    starts, ends = chunks["start"].to_numpy(), chunks["end"].to_numpy()
    reachable = [{"doc_id": "a", "start": 0, "end": 8}, {"doc_id": "a", "start": 11, "end": 19}]
    judged = _pieces_judgement(reachable, by_doc, starts, ends, 0.5)
    assert judged.indices.tolist() == [0, 1] and len(judged.pieces) == 2
    missing = [*reachable[:1], {"doc_id": "b", "start": 0, "end": 5}]  # a document this chunking lacks
    assert len(_pieces_judgement(missing, by_doc, starts, ends, 0.5).indices) == 0
