"""retrieval_bench.retrieval.rank (dense scores, tied and pessimistic ranks, reciprocal rank fusion) and
retrieval_bench.retrieval.bm25 (BM25) on small hand-checked examples."""
from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.params import DEFAULTS
from retrieval_bench.retrieval.bm25 import bm25_scores
from retrieval_bench.retrieval.rank import (
    dense_scores,
    judged_ranks,
    method_scores,
    pessimistic_ranks,
    rrf_scores,
    tied_ranks,
)


def fixed(matrix: list[list[float]]):
    """A retrieval method with fixed scores: question rows x chunk columns."""
    scores = np.asarray(matrix, dtype=np.float64)
    return lambda rows: scores[rows]


def test_tied_ranks_best_first_and_ties_share_the_worst_rank():
    scores = np.array([[0.2, 0.9, 0.5, 0.1], [0.5, 0.9, 0.5, 0.1], [0.0, 0.0, 0.0, 1.0]])
    assert tied_ranks(scores).tolist() == [[3, 1, 2, 4], [3, 1, 3, 4], [4, 4, 4, 1]]


def test_rrf_does_not_depend_on_chunk_order():
    # BM25 gives many chunks exactly 0: their fused order must come from the other method alone.
    dense = np.array([[0.1, 0.4, 0.3, 0.2]])
    bm25 = np.array([[0.0, 0.0, 0.0, 2.0]])
    order = np.array([3, 2, 1, 0])
    fused = rrf_scores([(fixed(dense), 1.0), (fixed(bm25), 1.0)], rrf_k=60)(slice(0, 1))[0]
    reordered = rrf_scores([(fixed(dense[:, order]), 1.0), (fixed(bm25[:, order]), 1.0)], rrf_k=60)(slice(0, 1))[0]
    np.testing.assert_allclose(reordered, fused[order])
    assert np.argsort(-fused).tolist() == [3, 1, 2, 0]


def test_rrf_on_a_hand_computed_example():
    # Two methods, two questions, 4 chunks; rrf_k = 60, weights 1.0 (first) and 0.5 (second).
    first = fixed([[0.9, 0.1, 0.5, 0.3], [4.0, 3.0, 2.0, 1.0]])
    second = fixed([[0.2, 0.7, 0.9, 0.4], [0.8, 0.6, 0.4, 0.2]])
    # Question 0: ranks under first  = [1, 4, 2, 3], under second = [4, 2, 1, 3], so
    #   chunk 0: 1/61 + 0.5/64 = 0.016393443 + 0.0078125   = 0.0242059426
    #   chunk 1: 1/64 + 0.5/62 = 0.015625    + 0.008064516 = 0.0236895161
    #   chunk 2: 1/62 + 0.5/61 = 0.016129032 + 0.008196721 = 0.0243257536
    #   chunk 3: 1/63 + 0.5/63 = 0.015873016 + 0.007936508 = 0.0238095238
    # Question 1: both methods rank the chunks 1, 2, 3, 4, so chunk i scores 1.5 / (61 + i).
    expected = np.array([
        [0.0242059426, 0.0236895161, 0.0243257536, 0.0238095238],
        [0.0245901639, 0.0241935484, 0.0238095238, 0.0234375000],
    ])
    fused = rrf_scores([(first, 1.0), (second, 0.5)], rrf_k=60)
    np.testing.assert_allclose(fused(slice(0, 2)), expected, atol=1e-9)
    np.testing.assert_allclose(fused(slice(1, 2)), expected[1:], atol=1e-9)
    # Fused order of question 0: chunk 2, chunk 0, chunk 3, chunk 1 (neither method's own order).
    assert np.argsort(-fused(slice(0, 1))[0]).tolist() == [2, 0, 3, 1]
    assert tied_ranks(fused(slice(0, 2))).tolist() == [[2, 4, 1, 3], [1, 2, 3, 4]]


def test_rrf_with_equal_weights_ties_symmetric_disagreements():
    fused = rrf_scores([(fixed([[2.0, 1.0]]), 1.0), (fixed([[1.0, 2.0]]), 1.0)], rrf_k=60)
    assert fused(slice(0, 1)).tolist() == [[1 / 61 + 1 / 62, 1 / 62 + 1 / 61]]


def test_pessimistic_ranks_put_a_tied_judged_chunk_after_the_others():
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1])
    # Chunk 0 ties with chunks 2 and 3 below chunk 1: it ranks after all three, at 4.
    assert pessimistic_ranks(scores, np.array([0])).tolist() == [4]
    assert pessimistic_ranks(scores, np.array([3])).tolist() == [4]
    assert pessimistic_ranks(scores, np.array([1, 4])).tolist() == [1, 5]
    empty = pessimistic_ranks(scores, np.array([], dtype=np.int64))
    assert empty.shape == (0,) and empty.dtype == np.int64
    # Without ties it agrees with the ordinal ranks.
    distinct = np.array([0.3, 0.9, 0.1, 0.5])
    assert pessimistic_ranks(distinct, np.arange(4)).tolist() == tied_ranks(distinct[None, :])[0].tolist()


def test_dense_scores_are_cosine_similarities_of_unit_vectors():
    questions = np.array([[1.0, 0.0], [0.6, 0.8]])
    chunks = np.array([[1.0, 0.0], [0.0, 1.0], [np.sqrt(0.5), np.sqrt(0.5)]])
    scores = dense_scores(questions, chunks)
    np.testing.assert_allclose(
        scores(slice(0, 2)), [[1.0, 0.0, np.sqrt(0.5)], [0.6, 0.8, 1.4 * np.sqrt(0.5)]], atol=1e-12
    )
    np.testing.assert_allclose(scores(slice(1, 2)), [[0.6, 0.8, 1.4 * np.sqrt(0.5)]], atol=1e-12)


def test_judged_ranks_per_question_in_order():
    score_batch = fixed([[0.1, 0.9, 0.5], [0.7, 0.7, 0.2], [0.3, 0.2, 0.1]])
    positions = list(judged_ranks(score_batch, 3, [np.array([2]), np.array([0]), np.array([], dtype=np.int64)]))
    assert [p.better.tolist() for p in positions] == [[1], [0], []]
    assert [p.tied.tolist() for p in positions] == [[1], [2], []]  # question 2: chunk 0 ties chunk 1


def test_bm25_ranks_the_chunk_sharing_a_rare_word_first():
    chunks = [
        "The database stores each table in a B-tree on disk.",
        "A transaction is committed when the journal is deleted.",
        "The zeppelin checkpoint copies pages from the log back into the database.",
        "Indexes make queries on a table faster.",
        "The database file can be copied while no transaction is open.",
    ]
    scores = bm25_scores(chunks, ["When does a zeppelin happen to the database?", "how are indexes used"])
    batch = scores(slice(0, 2))
    assert batch.shape == (2, len(chunks))
    assert int(np.argmax(batch[0])) == 2
    assert batch[0][2] > batch[0][[0, 1, 3, 4]].max()
    assert int(np.argmax(batch[1])) == 3  # stemming: "indexes" matches "Indexes"
    np.testing.assert_allclose(scores(slice(1, 2))[0], batch[1])


def test_bm25_question_without_known_words_scores_zero():
    scores = bm25_scores(["alpha beta", "gamma delta"], ["the of and"])  # stop words only
    assert scores(slice(0, 1)).tolist() == [[0.0, 0.0]]


def test_method_scores_dispatch_dense_bm25_and_hybrid():
    chunks = ["apples and pears", "write ahead logging in sqlite", "vacuum rebuilds the file"]
    questions = ["how does sqlite logging work"]
    question_vectors = np.array([[0.0, 1.0]])
    chunk_vectors = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    def settings(method, **changes):
        return {**DEFAULTS["retrieval"], "method": method, **changes}

    dense = method_scores(settings("dense"), question_vectors, chunk_vectors, chunks, questions)(slice(0, 1))[0]
    np.testing.assert_allclose(dense, [0.0, 0.8, 1.0])
    bm25 = method_scores(settings("bm25"), None, None, chunks, questions)(slice(0, 1))[0]
    assert int(np.argmax(bm25)) == 1 and bm25[0] == bm25[2] == 0
    unstemmed = method_scores(settings("bm25", bm25={"stemmer": "none", "stopwords": "none"}), None, None,
                              ["sqlite logs writes", "the logging of sqlite"], ["logging"])(slice(0, 1))[0]
    assert unstemmed[0] == 0 < unstemmed[1]  # without stemming "logs" no longer matches "logging"
    hybrid = method_scores(settings("hybrid", rrf_k=60, weights={"dense": 1.0, "bm25": 2.0}),
                           question_vectors, chunk_vectors, chunks, questions)(slice(0, 1))[0]
    # dense ranks [3, 2, 1]; bm25 ranks [3, 1, 3] (ties share the worst rank)
    np.testing.assert_allclose(hybrid, [1 / 63 + 2 / 63, 1 / 62 + 2 / 61, 1 / 61 + 2 / 63])
    with pytest.raises(ValueError, match="unknown retrieval method"):
        method_scores(settings("magic"), None, None, chunks, questions)
