"""What a method reports beside its run (data/panel/<system>/run_info.json): for `ann` and `store`, the recall of
its run against exact dense search over the same vectors at every k up to the depth, which the
score stage adds to metrics.json as `ann_recall@k` for each score.k.

ann_recall@k = mean over questions of |approximate top-k ∩ exact top-k| / k, where a chunk is in the
exact top k when exact search scores it at least as high as its k-th best (to SCORE_TOLERANCE): a
chunk tied with the k-th is in, whichever of the tied chunks exact search happened to list, so an
exhaustive search that orders ties otherwise still has recall 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from retrieval_bench.retrieval import dense
from retrieval_bench.retrieval.run import Corpus, Questions

SCORE_TOLERANCE = 1e-6  # cosine scores of float32 vectors summed in another order differ by about 1e-7
MAX_CURVE = 1000  # ks stored in run_info.json (1..min(depth, MAX_CURVE))


def recall_curve(found: np.ndarray, exact_scores: np.ndarray) -> list[float]:
    """recall@k for k = 1..depth. `found`: (questions x depth) the exact score of the chunk the
    approximate search put at each rank, best first, NaN where it left the rank empty;
    `exact_scores`: (questions x depth) exact search's best scores, best first."""
    n_questions, depth = exact_scores.shape
    if n_questions == 0 or depth == 0:
        return []
    found = found[:, :depth]
    # How many exact scores beat each found chunk's beyond the tolerance: the found chunk at rank
    # i, beaten by p, is in both top-k lists iff max(i, p) < k. Rows are searched as one sorted
    # array, each offset past the one before (cosines lie in [-1, 1]).
    offsets = 8.0 * np.arange(n_questions)[:, None]
    exact = np.clip(np.nan_to_num(exact_scores, nan=-3.0), -3.0, 3.0)  # a slot exact search left empty: last
    keys = (offsets - exact).ravel()  # ascending within and across rows
    wanted = offsets - (found + SCORE_TOLERANCE)
    beaten = (
        np.searchsorted(keys, wanted.ravel(), side="left").reshape(found.shape)
        - depth * np.arange(n_questions)[:, None]
    )
    beaten = np.where(np.isnan(found), depth, beaten)
    both = np.maximum(np.arange(found.shape[1])[None, :], beaten)
    counts = np.bincount(both[both < depth], minlength=depth).cumsum()
    return [float(counts[k - 1] / (k * n_questions)) for k in range(1, depth + 1)]


def recall_against_exact(questions: Questions, corpus: Corpus, run: pd.DataFrame, depth: int) -> dict[str, float]:
    """The run's recall against exact dense search over the corpus vectors, {"k": recall@k} for
    k = 1..min(depth, MAX_CURVE): the `ann_recall` of data/panel/<system>/run_info.json."""
    depth = min(depth, MAX_CURVE)  # no deeper than the curve kept: with depth `all`, not the whole corpus
    _, exact_scores = dense.top(questions, corpus, depth)
    found = np.full(exact_scores.shape, np.nan)
    position = pd.Series(np.arange(len(corpus.chunk_ids)), index=corpus.chunk_ids)
    question = pd.Series(np.arange(len(questions.qids)), index=questions.qids)
    rows, ranks = question[run["qid"]].to_numpy(), run["rank"].to_numpy() - 1
    inside = ranks < depth
    rows, ranks, chunks = rows[inside], ranks[inside], position[run["chunk_id"]].to_numpy()[inside]
    # each found chunk's exact score, as exact search computes it (float32 inner products)
    q, c = questions.dense_vectors, corpus.dense_vectors
    found[rows, ranks] = np.einsum("ij,ij->i", q[rows], c[chunks], dtype=np.float32)
    curve = recall_curve(found, exact_scores.astype(np.float64))
    return {str(k): value for k, value in enumerate(curve, 1)}
