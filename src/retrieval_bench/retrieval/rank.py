"""Where judged chunks stand in a full ranking of the corpus, from whole rows of scores (the echo
gauge; the pipeline scores runs: retrieval_bench.retrieval.run)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from retrieval_bench.core.run_table import Positions

QUERY_BATCH = 256  # questions scored at once: bounds memory at QUERY_BATCH x n_chunks floats


def judged_positions(scores: np.ndarray, judged: np.ndarray) -> Positions:
    """Where chunks `judged` stand in one question's `scores`: how many other chunks score higher,
    and how many score the same (the chunk itself included)."""
    if len(judged) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Positions(empty.astype(np.float64), empty)
    judged_scores = scores[judged][:, None]
    better = (scores[None, :] > judged_scores).sum(axis=1)
    tied = (scores[None, :] == judged_scores).sum(axis=1)
    return Positions(better.astype(np.float64), tied.astype(np.int64))


def judged_ranks(
    score_batch: Callable[[slice], np.ndarray], n_questions: int, judged: list[np.ndarray], progress=None
) -> Iterator[Positions]:
    """For each question in order, the positions of its judged chunk indices."""
    for batch_start in range(0, n_questions, QUERY_BATCH):
        rows = slice(batch_start, min(batch_start + QUERY_BATCH, n_questions))
        scores = score_batch(rows)
        for offset, question in enumerate(range(rows.start, rows.stop)):
            yield judged_positions(scores[offset], judged[question])
        if progress is not None:
            progress.update(rows.stop - rows.start)
