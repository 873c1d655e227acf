"""Exact inner-product top-k on FAISS's flat kernels: its BLAS products (the same sums, bit for bit,
as `q @ c.T`) with a top-k fused into the scan, so exact search costs little more than the products;
FAISS's arbitrary order among equal scores is replaced by the contract's (chunk index)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from retrieval_bench.io import InputError

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


def top_k(questions: np.ndarray, chunks: np.ndarray, depth: int, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """The `depth` best chunk indices and scores per question (best first; equal scores by chunk
    index). FAISS is asked for one more: where that one ties with the depth-th, FAISS may have cut
    the tie group anywhere, so that question is ranked from its whole row of scores."""
    faiss = import_faiss()
    questions = np.ascontiguousarray(questions, dtype=np.float32)
    chunks = np.ascontiguousarray(chunks, dtype=np.float32)
    depth = min(depth, len(chunks))
    fetch = min(depth + 1, len(chunks))
    indices = np.empty((len(questions), depth), dtype=np.int64)
    scores = np.empty((len(questions), depth), dtype=np.float32)
    block = max(1, min(SEARCH_BLOCK, BLOCK_ENTRIES // fetch))
    for q0 in range(0, len(questions), block):
        rows = slice(q0, min(q0 + block, len(questions)))
        block_i, block_s = _in_contract_order(*_knn(faiss, questions[rows], chunks, fetch))
        if fetch > depth:
            for row in np.flatnonzero(block_s[:, depth] == block_s[:, depth - 1]).tolist():
                full = row_scores(questions, chunks, q0 + row)
                order = np.lexsort((np.arange(len(chunks)), -full))[:fetch]
                block_i[row], block_s[row] = order, full[order]
        indices[rows], scores[rows] = block_i[:, :depth], block_s[:, :depth]
        if progress is not None:
            progress.update(rows.stop - q0)
    return indices, scores
