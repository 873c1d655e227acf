"""Exact dense retrieval: cosine similarity of unit vectors, every chunk scored (FAISS's flat
kernels, in blocks of questions, so memory stays bounded at a million chunks)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from retrieval_bench.retrieval import flat
from retrieval_bench.retrieval.run import Corpus, Questions, from_top, whole_ties


def top(questions: Questions, corpus: Corpus, depth: int, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """The `depth` best chunk indices and cosine scores per question, best first."""
    return flat.top_k(questions.vectors, corpus.vectors, depth, progress)


def top_with_ties(
    questions: Questions, corpus: Corpus, depth: int, progress=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each question's `depth` best chunks and the whole tie group at the cut: (indices, scores,
    kept), as whole_ties gives them, so which tied chunks make the cut never depends on their order."""
    q, c = questions.vectors, corpus.vectors
    indices, scores = flat.search(q, c, depth + 1, progress)
    return whole_ties(
        indices, scores, np.ones(indices.shape, dtype=bool), depth, lambda row: flat.row_scores(q, c, row)
    )


def retrieve(questions: Questions, corpus: Corpus, settings: dict, depth: int, progress=None) -> pd.DataFrame:
    """The run: each question's `depth` best chunks and the whole tie group at the cut."""
    indices, scores, kept = top_with_ties(questions, corpus, depth, progress)
    return from_top(questions.qids, corpus.chunk_ids, indices, scores, keep=kept)
