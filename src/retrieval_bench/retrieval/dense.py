"""Exact dense retrieval: cosine similarity of unit vectors, blocked matrix products and
argpartition, so memory stays bounded at a million chunks."""
from __future__ import annotations

import pandas as pd

from retrieval_bench.retrieval.run import Corpus, Questions, from_top, top_k_blocked


def retrieve(questions: Questions, corpus: Corpus, settings: dict, depth: int, progress=None) -> pd.DataFrame:
    q, c = questions.vectors, corpus.vectors
    indices, scores = top_k_blocked(lambda rows, cols: q[rows] @ c[cols].T, len(questions.qids), len(corpus.chunk_ids), depth, progress)
    return from_top(questions.qids, corpus.chunk_ids, indices, scores)
