"""score.ties: `expected` equals the mean over every order of each tied group (brute force), the
concrete policies equal trec_eval on the order they stand for, and hybrid's mirror ties are
scored the same whichever chunk came first."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import pytrec_eval

from retrieval_bench.core import run_table as run_contract
from retrieval_bench.core.relevance import Judgement
from retrieval_bench.core.run_table import Positions
from retrieval_bench.evaluation.score.metrics import (
    AT_CUTOFF,
    concrete_ranks,
    expected_metrics,
    question_metrics,
    score_question,
    span_recall,
)
from retrieval_bench.retrieval import run as runs
from retrieval_bench.retrieval.hybrid import Top, fuse
from retrieval_bench.retrieval.rank import judged_positions

KS = [1, 2, 3, 5]
CUT = ("recall", "hit", "reciprocal_rank", "ndcg", "map", "complete", "evidence_recall")  # every column at a cut-off


def test_these_tests_cover_every_metric_of_the_table():
    assert [metric.column for metric in AT_CUTOFF] == list(CUT)


METRICS = ["reciprocal_rank", "first_relevant_rank", "last_piece_rank"] + [f"{name}@{k}" for name in CUT for k in KS]


def all_orders(scores: np.ndarray):
    """Every ranking of the chunks that sorts by score, tied chunks in every order."""
    levels = sorted(set(scores.tolist()), reverse=True)
    groups = [list(np.flatnonzero(scores == level)) for level in levels]
    for parts in itertools.product(*(itertools.permutations(group) for group in groups)):
        order = [chunk for part in parts for chunk in part]
        ranks = np.empty(len(scores))
        ranks[order] = np.arange(1, len(scores) + 1)
        yield ranks


def brute_force(scores, judgement: Judgement, ks) -> dict[str, float]:
    rows = []
    relevant = judgement.gains > 0
    for ranks in all_orders(scores):
        judged_ranks = ranks[judgement.indices]
        recall = span_recall(judgement, judged_ranks, ks) if judgement.span is not None else None
        rows.append(question_metrics(judged_ranks[relevant], judgement.gains[relevant], ks, recall))
    return {name: float(np.mean([row[name] for row in rows])) for name in rows[0]}


def random_tied_case(rng: np.random.Generator, span: bool):
    n = int(rng.integers(2, 8))
    scores = rng.integers(0, 3, size=n).astype(float)  # few levels: many ties
    judged = rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)
    if span:
        starts = rng.integers(0, 50, size=len(judged))
        ends = starts + rng.integers(5, 40, size=len(judged))
        gains = rng.choice([0.0, 0.3, 0.6, 1.0], size=len(judged))
        judgement = Judgement(judged, gains, (10, 60), starts, ends)
    else:
        gains = rng.integers(0, 4, size=len(judged)).astype(float)
        judgement = Judgement(judged, gains)
    if not (judgement.gains > 0).any():
        judgement.gains[0] = 1.0
    return scores, judgement


@pytest.mark.parametrize("span", [False, True])
@pytest.mark.parametrize("seed", range(60))
def test_expected_equals_the_mean_over_every_order(seed, span):
    rng = np.random.default_rng(seed)
    scores, judgement = random_tied_case(rng, span)
    ours = score_question(judgement, judged_positions(scores, judgement.indices), KS, "expected")
    truth = brute_force(scores, judgement, KS)
    for name in METRICS:
        assert ours[name] == pytest.approx(truth[name], abs=1e-12), name


@pytest.mark.parametrize("policy", ["pessimistic", "optimistic"])
@pytest.mark.parametrize("seed", range(40))
def test_concrete_policies_equal_trec_eval_on_the_order_they_stand_for(seed, policy):
    rng = np.random.default_rng(100 + seed)
    scores, judgement = random_tied_case(rng, span=False)
    ours = score_question(judgement, judged_positions(scores, judgement.indices), KS, policy)
    # The order the policy stands for: by score, judged chunks last (first) in their tie.
    ranks = concrete_ranks(judged_positions(scores, judgement.indices), judgement.gains, policy)
    rank_of = dict(zip(judgement.indices.tolist(), ranks.tolist()))
    others = sorted((c for c in range(len(scores)) if c not in rank_of), key=lambda c: -scores[c])
    free = iter(sorted(set(range(1, len(scores) + 1)) - set(rank_of.values())))
    rank_of.update({c: next(free) for c in others})
    run = {f"d{c}": float(len(scores) - rank) for c, rank in rank_of.items()}  # distinct scores in that order
    qrels = {"q": {f"d{c}": int(g) for c, g in zip(judgement.indices, judgement.gains)}}
    cutoffs = ",".join(map(str, KS))
    measures = {"recip_rank", f"ndcg_cut.{cutoffs}", f"map_cut.{cutoffs}", f"recall.{cutoffs}", f"success.{cutoffs}"}
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate({"q": run})["q"]
    assert ours["reciprocal_rank"] == pytest.approx(trec["recip_rank"], abs=1e-9)
    for k in KS:
        assert ours[f"recall@{k}"] == pytest.approx(trec[f"recall_{k}"], abs=1e-9)
        assert ours[f"hit@{k}"] == pytest.approx(trec[f"success_{k}"], abs=1e-9)
        assert ours[f"ndcg@{k}"] == pytest.approx(trec[f"ndcg_cut_{k}"], abs=1e-9)
        assert ours[f"map@{k}"] == pytest.approx(trec[f"map_cut_{k}"], abs=1e-9)


def test_policies_bracket_expected_and_agree_without_ties():
    scores = np.array([0.9, 0.5, 0.5, 0.5, 0.1])
    judgement = Judgement(np.array([2]), np.array([1.0]))
    positions = judged_positions(scores, judgement.indices)
    assert positions.better.tolist() == [1] and positions.tied.tolist() == [3]
    rows = {
        policy: score_question(judgement, positions, [1, 2, 3, 4], policy)
        for policy in ("pessimistic", "expected", "optimistic")
    }
    assert rows["pessimistic"]["first_relevant_rank"] == 4 and rows["optimistic"]["first_relevant_rank"] == 2
    assert rows["expected"]["first_relevant_rank"] == 3
    assert rows["expected"]["reciprocal_rank"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert rows["expected"]["hit@2"] == pytest.approx(1 / 3) and rows["expected"]["hit@3"] == pytest.approx(2 / 3)
    assert rows["expected"]["tie_group_size"] == 3 and rows["expected"]["n_relevant_tied"] == 1
    distinct = np.array([0.9, 0.7, 0.5, 0.3])
    same = [
        score_question(judgement, judged_positions(distinct, judgement.indices), [1, 3], p)
        for p in ("pessimistic", "expected", "optimistic")
    ]
    assert same[0] == same[1] == same[2]


def test_a_question_whose_relevant_chunk_is_not_in_the_run():
    positions = Positions(np.array([math.inf]), np.array([1]))
    row = score_question(Judgement(np.array([0]), np.array([1.0])), positions, [1, 5], "expected")
    assert math.isnan(row["first_relevant_rank"]) and row["reciprocal_rank"] == 0 and row["recall@5"] == 0


def test_hybrid_mirror_ties_do_not_depend_on_who_came_first():
    # Dense ranks the gold chunk 1st and another 2nd, BM25 the other way round: RRF ties them.
    dense = Top(np.array([[0, 1, 2]]), np.array([[0.9, 0.8, 0.1]]), np.ones((1, 3), dtype=bool))  # a, b, c
    bm25 = Top(np.array([[1, 0, 2]]), np.array([[3.0, 2.0, 0.0]]), np.array([[True, True, False]]))  # b, a
    fused_top = fuse([dense, bm25], [1.0, 1.0], "rrf", 60, 3, 10)
    fused = runs.from_top(["q"], ["a", "b", "c"], fused_top.indices, fused_top.scores, keep=fused_top.kept)
    for gold in ("a", "b"):
        judgement = Judgement(np.array([0]), np.array([1.0]))
        row = score_question(judgement, run_contract.positions(fused, ["q"], [[gold]])[0], [1], "expected")
        assert row["reciprocal_rank"] == pytest.approx(0.75) and row["hit@1"] == pytest.approx(0.5)


@pytest.mark.parametrize("span", [False, True])
@pytest.mark.parametrize("seed", range(80))
def test_a_run_cut_at_depth_scores_every_k_up_to_depth_as_the_full_ranking(seed, span):
    """Observed: a tie group straddling retrieval.depth was cut by chunk id, so the same run gave
    recall@10 0.4714 at depth all and 0.4771 at depth 10. The run keeps the whole group."""
    rng = np.random.default_rng(1000 + seed)
    scores, judgement = random_tied_case(rng, span)
    chunk_ids = [f"c{i}" for i in range(len(scores))]
    depth = int(rng.integers(1, len(scores) + 1))
    run = run_contract.from_records([("q", chunk_ids[i], float(s)) for i, s in enumerate(scores)], depth)
    placed = run_contract.positions(run, ["q"], [[chunk_ids[i] for i in judgement.indices]])[0]
    ks = list(range(1, depth + 1))
    cut = score_question(judgement, placed, ks, "expected")
    full = score_question(judgement, judged_positions(scores, judgement.indices), ks, "expected")
    truth = brute_force(scores, judgement, ks)  # the mean over every order of the full ranking
    names = [f"{name}@{k}" for name in CUT for k in ks]  # ks: 1..depth
    for name in names:
        assert cut[name] == pytest.approx(full[name], abs=1e-12) and cut[name] == pytest.approx(
            truth[name], abs=1e-12
        ), name


@pytest.mark.parametrize("seed", range(6))
def test_hybrid_candidates_keep_the_dense_tie_group_at_the_fusion_cut(seed):
    """Review: hybrid cut its dense candidates at fusion_depth by chunk position, so when dense
    scores tied across that cut, the fused run changed with the order of the corpus."""
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.retrieval import hybrid
    from retrieval_bench.retrieval.run import Corpus, Questions
    from retrieval_bench.retrieval.settings import RetrievalSettings

    rng = np.random.default_rng(seed)
    # 30 chunks, 4 distinct vectors of halves and quarters: dot products are exact in float32 whatever
    # the summation order, so the dense scores of equal vectors tie exactly
    base = rng.integers(0, 3, size=(4, 8)).astype(np.float32) / 2
    vectors = base[rng.integers(0, 4, size=30)]
    texts = [f"chunk {i} words {' '.join(rng.choice(['alpha', 'beta', 'gamma', 'delta'], size=3))}" for i in range(30)]
    chunk_ids = [f"c{i:02d}" for i in range(30)]
    question_vectors = rng.integers(0, 3, size=(3, 8)).astype(np.float32) / 4
    questions = Questions(["q0", "q1", "q2"], ["alpha beta", "gamma", "delta alpha"], question_vectors)
    settings = RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": "hybrid", "fusion_depth": 5})
    order = rng.permutation(30)
    shuffled = Corpus([chunk_ids[i] for i in order], [texts[i] for i in order], vectors[order])
    runs_ = [
        hybrid.retrieve(questions, corpus, settings, depth=5)
        for corpus in (Corpus(chunk_ids, texts, vectors), shuffled)
    ]
    as_sets = [set(zip(r["qid"], r["chunk_id"], r["score"].round(12))) for r in runs_]
    assert as_sets[0] == as_sets[1]


def test_expected_metrics_never_exceed_one_by_rounding():
    """Seven relevant chunks tied at the top: the expected DCG sums to the ideal one, which in
    floating point came out 1.0000000000000002 (the leaderboard then refused the table)."""
    for n, gain in ((7, 1.0), (7, 2.0), (3, 3.0)):
        row = expected_metrics(Positions(np.zeros(n), np.full(n, n, dtype=np.int64)), np.full(n, gain), [1, 5, 10])
        assert row["ndcg@10"] == 1.0 and all(v <= 1.0 for k, v in row.items() if k != "first_relevant_rank")


def test_span_recall_under_a_concrete_policy_does_not_follow_the_chunk_tables_order():
    """Evidence [0, 100); X [60, 200) and Y [90, 300) tied at the top, both below min_coverage
    (gain 0), Z [0, 60) after them. Chunks of equal gain stood in the table's order: with Z, X, Y
    both policies gave recall@1 0.4, with Z, Y, X both 0.1, against an expected 0.25."""
    scores = np.array([0.1, 0.5, 0.5])  # Z, X, Y
    for order in ([0, 1, 2], [0, 2, 1]):
        spans = np.array([[0, 60], [60, 200], [90, 300]])[order]
        judgement = Judgement(np.arange(3), np.zeros(3), span=(0, 100), starts=spans[:, 0], ends=spans[:, 1])
        positions = judged_positions(scores[order], judgement.indices)
        recall = {
            p: score_question(judgement, positions, [1], p)["recall@1"]
            for p in ("pessimistic", "expected", "optimistic")
        }
        assert recall == pytest.approx({"pessimistic": 0.1, "expected": 0.25, "optimistic": 0.4}), order
