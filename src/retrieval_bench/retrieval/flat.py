"""Exact inner-product search on FAISS's flat kernels: its BLAS products (the same sums, bit for bit,
as `q @ c.T`) with a top-k fused into the scan, so exact search costs little more than the products.
FAISS orders equal scores arbitrarily: run.whole_ties and the contract's order (chunk index) fix that."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from retrieval_bench.io import InputError
from retrieval_bench.retrieval.run import whole_ties

SEARCH_BLOCK = 4096  # questions per FAISS call (progress is reported between calls)
BLOCK_ENTRIES = 1 << 26  # at most this many (index, score) results per call (768 MB): a deep run takes fewer questions


def import_faiss():
    try:
        import faiss
    except ImportError:
        raise InputError(
            "dense and ann retrieval need FAISS, a dependency of retrieval-bench: pip install faiss-cpu==1.15.1"
        ) from None
    return faiss


@contextmanager
def _blas_products(faiss) -> Iterator[None]:
    """FAISS computes the products of a few questions with its own SIMD loop, whose sums differ
    in the last bits from BLAS's; always BLAS, so a question's scores never depend on its block."""
    previous = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = 0
    try:
        yield
    finally:
        faiss.cvar.distance_compute_blas_threshold = previous


def _knn(faiss, questions: np.ndarray, chunks: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    with _blas_products(faiss):
        scores, indices = faiss.knn(questions, chunks, k, metric=faiss.METRIC_INNER_PRODUCT)
    return indices, scores


def row_scores(questions: np.ndarray, chunks: np.ndarray, row: int) -> np.ndarray:
    """Question `row`'s score with every chunk, in chunk order, from the same products as top_k's."""
    faiss = import_faiss()
    indices, scores = _knn(faiss, questions[row : row + 1], chunks, len(chunks))
    row_of_scores = np.empty(len(chunks), dtype=np.float32)
    row_of_scores[indices[0]] = scores[0]
    return row_of_scores


def _in_contract_order(indices: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((indices, -scores), axis=1)  # best first, equal scores by chunk index
    return np.take_along_axis(indices, order, 1), np.take_along_axis(scores, order, 1)


def search(questions: np.ndarray, chunks: np.ndarray, k: int, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """Each question's `k` best chunk indices and scores, best first; equal scores in FAISS's
    order (whole_ties and from_top put them in the contract's)."""
    faiss = import_faiss()
    questions = np.ascontiguousarray(questions, dtype=np.float32)
    chunks = np.ascontiguousarray(chunks, dtype=np.float32)
    k = min(k, len(chunks))
    indices = np.empty((len(questions), k), dtype=np.int64)
    scores = np.empty((len(questions), k), dtype=np.float32)
    block = max(1, min(SEARCH_BLOCK, BLOCK_ENTRIES // max(k, 1)))
    for q0 in range(0, len(questions), block):
        rows = slice(q0, min(q0 + block, len(questions)))
        indices[rows], scores[rows] = _knn(faiss, questions[rows], chunks, k)
        if progress is not None:
            progress.update(rows.stop - q0)
    return indices, scores


def top_k(questions: np.ndarray, chunks: np.ndarray, depth: int, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """The `depth` best chunk indices and scores per question, best first, equal scores by chunk
    index: one more than `depth` searched, and a tie group FAISS may have cut ranked from its
    question's whole row (run.whole_ties)."""
    depth = min(depth, len(chunks))
    indices, scores = search(questions, chunks, depth + 1, progress)
    indices, scores, _ = whole_ties(
        indices, scores, np.ones(indices.shape, dtype=bool), depth, lambda row: row_scores(questions, chunks, row)
    )
    return _in_contract_order(indices[:, :depth], scores[:, :depth])
