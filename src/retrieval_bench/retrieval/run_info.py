"""What a method reports beside its run (data/panel/<system>/run_info.json): for `ann` and `store`, the recall of
its run against exact dense search over the same vectors at every k up to the depth, which the
score stage adds to metrics.json as `ann_recall@k` for each score.k.

ann_recall@k = mean over questions of |approximate top-k ∩ exact top-k| / k.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from retrieval_bench.retrieval import dense
from retrieval_bench.retrieval.run import Corpus, Questions

MAX_CURVE = 1000  # ks stored in run_info.json (1..min(depth, MAX_CURVE))


def recall_curve(approximate: np.ndarray, exact: np.ndarray) -> list[float]:
    """recall@k for k = 1..depth: approximate and exact are (questions x depth) chunk indices,
    best first; -1 marks a slot the approximate search left empty."""
    n_questions, depth = exact.shape
    if n_questions == 0 or depth == 0:
        return []
    approximate = approximate[:, :depth]
    # Where each approximate hit stands in its question's exact list (depth when absent): a hit at
    # position i standing at exact position p is in both top-k lists iff max(i, p) < k.
    order = np.argsort(exact, axis=1)
    sorted_exact = np.take_along_axis(exact, order, 1)
    offsets = np.arange(n_questions)[:, None] * (int(max(exact.max(), approximate.max())) + 2)
    flat_exact = (sorted_exact + offsets).ravel()
    wanted = (approximate + offsets).ravel()
    at = np.minimum(np.searchsorted(flat_exact, wanted), flat_exact.size - 1)
    found = (flat_exact[at] == wanted) & (approximate.ravel() >= 0)
    exact_position = np.where(found, order.ravel()[at], depth).reshape(approximate.shape)
    both = np.maximum(np.arange(approximate.shape[1])[None, :], exact_position)
    counts = np.bincount(both[both < depth], minlength=depth).cumsum()
    return [float(counts[k - 1] / (k * n_questions)) for k in range(1, depth + 1)]


def recall_against_exact(questions: Questions, corpus: Corpus, run: pd.DataFrame, depth: int) -> dict[str, float]:
    """The run's recall against exact dense search over the corpus vectors, {"k": recall@k} for
    k = 1..min(depth, MAX_CURVE): the `ann_recall` of data/panel/<system>/run_info.json."""
    depth = min(depth, MAX_CURVE)  # no deeper than the curve kept: with depth `all`, not the whole corpus
    exact, _ = dense.top(questions, corpus, depth)
    approximate = np.full(exact.shape, -1, dtype=np.int64)
    position = pd.Series(np.arange(len(corpus.chunk_ids)), index=corpus.chunk_ids)
    question = pd.Series(np.arange(len(questions.qids)), index=questions.qids)
    rows, ranks = question[run["qid"]].to_numpy(), run["rank"].to_numpy() - 1
    inside = ranks < depth
    approximate[rows[inside], ranks[inside]] = position[run["chunk_id"]].to_numpy()[inside]
    curve = recall_curve(approximate, exact)
    return {str(k): value for k, value in enumerate(curve, 1)}
