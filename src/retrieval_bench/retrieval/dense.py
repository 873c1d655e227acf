"""Exact dense retrieval: cosine similarity of unit vectors, every chunk scored (FAISS's flat
kernels, or a torch device's products with `retrieval.device`, in blocks of questions, so memory
stays bounded at a million chunks)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from retrieval_bench.retrieval import flat, torch_flat
from retrieval_bench.retrieval.run import Corpus, Questions, from_top, whole_ties
from retrieval_bench.retrieval.settings import RetrievalSettings


def candidates(corpus: Corpus, device: str | None) -> flat.Candidates | None:
    """Where the candidates are found: a torch device, or None (FAISS on this CPU)."""
    return None if device is None else torch_flat.candidates_on(device, corpus.dense_vectors)


def top(
    questions: Questions, corpus: Corpus, depth: int, progress=None, device: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The `depth` best chunk indices and cosine scores per question, best first. `device`: the
    torch device the candidates are found on (torch_flat.torch_device), None for FAISS."""
    return flat.top_k(questions.dense_vectors, corpus.dense_vectors, depth, progress, candidates(corpus, device))


def top_with_ties(
    questions: Questions, corpus: Corpus, depth: int, progress=None, device: str | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each question's `depth` best chunks and the whole tie group at the cut: (indices, scores,
    kept), as whole_ties gives them, so which tied chunks make the cut never depends on their order."""
    q, c = questions.dense_vectors, corpus.dense_vectors
    indices, scores = flat.search(q, c, depth + 1, progress, candidates(corpus, device))
    return whole_ties(
        indices, scores, np.ones(indices.shape, dtype=bool), depth, lambda row: flat.row_scores(q, c, row)
    )


def device_of(settings: RetrievalSettings) -> str | None:
    """`retrieval.device` as a torch device, or None for FAISS."""
    return torch_flat.torch_device(settings.device, settings.where)


def retrieve(
    questions: Questions, corpus: Corpus, settings: RetrievalSettings, depth: int, progress=None
) -> pd.DataFrame:
    """The run: each question's `depth` best chunks and the whole tie group at the cut."""
    indices, scores, kept = top_with_ties(questions, corpus, depth, progress, device_of(settings))
    return from_top(questions.qids, corpus.chunk_ids, indices, scores, keep=kept)
