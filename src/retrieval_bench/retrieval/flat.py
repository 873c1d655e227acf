"""Exact inner-product search: FAISS's flat kernels (BLAS products with a top-k fused into the scan),
or a torch device's (retrieval.torch_flat), find each question's candidates, and the candidates'
scores are then computed again in a fixed order (`exact_scores`, on the host), so a score never
depends on the question's block, its position in it, the number of threads, the BLAS kernel the
CPU picks or the device. BLAS rounds the same sum differently by the shape and
layout of the call (OpenBLAS on AMD EPYC: one vector gets two scores at two positions), which would
make a question's near-ties, and so its run, depend on the questions scored beside it.

A candidate list is complete when no chunk outside it can reach the `k` best: every BLAS score is
within a proven bound of the exact one (`error_bounds`), so a question whose k-th exact score is
not clear of its last candidate's BLAS score by that bound is scored against the whole corpus.
FAISS orders equal scores arbitrarily: here and in run.whole_ties equal scores go by chunk index."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from retrieval_bench.core.errors import InputError
from retrieval_bench.retrieval.run import whole_ties

SEARCH_BLOCK = 4096  # questions per FAISS call (progress is reported between calls)
BLOCK_ENTRIES = 1 << 26  # at most this many (index, score) results per call (768 MB): a deep run takes fewer questions
EXTRA_CANDIDATES = 8  # searched beyond k, so a near-tie at the cut rarely needs the whole row
EXACT_ENTRIES = 256  # (question, chunk) pairs scored at once by scores_of: 0.75 MiB of float64 at 384 dims, in L2
FLOAT32_UNIT_ROUNDOFF = 2.0**-24
FLOAT64_UNIT_ROUNDOFF = 2.0**-53

# (questions, width) -> each question's `width` best (float32 scores, chunk indices) by float32
# products in any order, best first: FAISS here, a torch device in retrieval.torch_flat.
Candidates = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def import_faiss():
    try:
        import faiss
    except ImportError:
        raise InputError(
            "dense and ann retrieval need FAISS, a dependency of retrieval-bench: pip install faiss-cpu==1.15.1"
        ) from None
    return faiss


def exact_scores(questions: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Scores of question i with each of its chunk vectors `rows[i]` ((m, d) and (m, k, d) float32 ->
    (m, k) float32): the products of float32 components (exact in float64) added in float64 by a
    fixed tree, halving the dimensions (while w > 1 terms are left, the last floor(w/2) are added
    onto the first floor(w/2)), then rounded once to float32. The order is fixed, so the result is the same whatever the
    block, the position, the threads or the CPU."""
    products = np.multiply(rows, questions.astype(np.float64)[:, None, :])
    width = products.shape[-1]
    while width > 1:
        half = width // 2
        products[..., :half] += products[..., width - half : width]
        width -= half
    return products[..., 0].astype(np.float32)


def scores_of(questions: np.ndarray, chunks: np.ndarray, indices: np.ndarray, margins: np.ndarray) -> np.ndarray:
    """exact_scores of each question (row) with its chunk `indices`, in pieces that stay in cache;
    `margins`: the questions' float64 margins (error_bounds). Each score is first summed in float64
    in whatever order BLAS likes: it and the fixed tree's sum are both within gamma_d(float64) |q| |c|
    of the true one (Higham 3.1; products of float32 components are exact in float64), so where
    every value within twice that rounds to one float32, that float32 is exact_scores' value. The
    rare others (about one in 10^5 at unit norm) are summed by the tree itself. 4x faster than the
    tree for all: it was most of what dense search cost beyond FAISS's own."""
    out = np.empty(indices.shape, dtype=np.float32)
    q64 = questions.astype(np.float64)
    width = max(1, min(indices.shape[1], EXACT_ENTRIES))
    rows_at_once = max(1, EXACT_ENTRIES // width)
    for r0 in range(0, len(indices), rows_at_once):
        rows = slice(r0, r0 + rows_at_once)
        for c0 in range(0, indices.shape[1], width):
            piece = indices[rows, c0 : c0 + width]
            vectors = np.take(chunks, piece.ravel(), axis=0, mode="clip").astype(np.float64)
            any_order = np.matmul(vectors.reshape(*piece.shape, -1), q64[rows, :, None])[..., 0]
            low = (any_order - margins[rows, None]).astype(np.float32)
            high = (any_order + margins[rows, None]).astype(np.float32)
            out[rows, c0 : c0 + width] = low
            unsure_row, unsure_col = np.nonzero(low != high)
            if len(unsure_row):
                tree = exact_scores(questions[r0 + unsure_row], chunks[piece[unsure_row, unsure_col]][:, None, :])
                out[r0 + unsure_row, c0 + unsure_col] = tree[:, 0]
    return out


def row_scores(questions: np.ndarray, chunks: np.ndarray, row: int) -> np.ndarray:
    """Question `row`'s exact score with every chunk, in chunk order (the scores search returns)."""
    questions = np.ascontiguousarray(questions[row : row + 1], dtype=np.float32)
    chunks = np.ascontiguousarray(chunks, dtype=np.float32)
    _, margins = error_bounds(questions, chunks)
    return scores_of(questions, chunks, np.arange(len(chunks))[None, :], margins)[0]


def error_bounds(questions: np.ndarray, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per question, (a bound on |BLAS score - exact score| over all chunks, scores_of's float64
    margin). A dot product of length d summed in any order is within gamma_d * sum|q_i c_i| <=
    gamma_d |q| max|c| of the true one (Higham, Accuracy and Stability, 3.1): in float32, plus
    exact_scores' one float32 rounding, doubled; in float64, doubled (the float64 sum and the
    tree's both) and doubled again. The float32 norms are off by a few roundings: far inside."""
    d = questions.shape[1]
    largest_chunk = float(np.sqrt(np.einsum("ij,ij->i", chunks, chunks).max())) if len(chunks) else 0.0
    norms = np.sqrt(np.einsum("ij,ij->i", questions, questions).astype(np.float64)) * largest_chunk
    blas = 2 * (gamma(d, FLOAT32_UNIT_ROUNDOFF) + 2 * FLOAT32_UNIT_ROUNDOFF) * norms
    return blas, 4 * gamma(d, FLOAT64_UNIT_ROUNDOFF) * norms


def gamma(d: int, unit_roundoff: float) -> float:
    """Higham's gamma_d: d * u / (1 - d * u)."""
    return d * unit_roundoff / (1 - d * unit_roundoff)


def best_of_row(row: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best chunk indices and scores of one whole row, best first, equal scores by index."""
    kth_best = np.partition(row, len(row) - k)[len(row) - k]
    candidates = np.flatnonzero(row >= kth_best)
    best = candidates[np.lexsort((candidates, -row[candidates]))[:k]]
    return best, row[best]


def _in_contract_order(indices: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((indices, -scores), axis=1)  # best first, equal scores by chunk index
    return np.take_along_axis(indices, order, 1), np.take_along_axis(scores, order, 1)


def faiss_candidates(chunks: np.ndarray) -> Candidates:
    """Candidates by FAISS's flat kernels on this CPU (BLAS products, a top-k fused into the scan)."""
    faiss = import_faiss()
    return lambda questions, width: faiss.knn(questions, chunks, width, metric=faiss.METRIC_INNER_PRODUCT)


def search(
    questions: np.ndarray, chunks: np.ndarray, k: int, progress=None, candidates: Candidates | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each question's `k` best chunk indices and exact scores, best first, equal scores by chunk
    index; the same for a question whatever other questions are searched with it, and wherever its
    `candidates` are found (default: FAISS on this CPU)."""
    questions = np.ascontiguousarray(questions, dtype=np.float32)
    chunks = np.ascontiguousarray(chunks, dtype=np.float32)
    candidates = candidates or faiss_candidates(chunks)
    k = min(k, len(chunks))
    width = min(k + EXTRA_CANDIDATES, len(chunks))
    bound, margins = error_bounds(questions, chunks)
    indices = np.empty((len(questions), k), dtype=np.int64)
    scores = np.empty((len(questions), k), dtype=np.float32)
    block = max(1, min(SEARCH_BLOCK, BLOCK_ENTRIES // max(width, 1)))
    for q0 in range(0, len(questions), block):
        rows = slice(q0, min(q0 + block, len(questions)))
        blas_scores, found = candidates(questions[rows], width)
        found, exact = _in_contract_order(found, scores_of(questions[rows], chunks, found, margins[rows]))
        if width < len(chunks):
            # A chunk left out scores exactly at most its BLAS score, <= the last candidate's, plus the bound.
            reach = blas_scores[:, -1].astype(np.float64) + bound[rows]
            for offset in np.flatnonzero(reach >= exact[:, k - 1]).tolist():
                found[offset, :k], exact[offset, :k] = best_of_row(row_scores(questions, chunks, q0 + offset), k)
        indices[rows], scores[rows] = found[:, :k], exact[:, :k]
        if progress is not None:
            progress.update(rows.stop - q0)
    return indices, scores


def top_k(
    questions: np.ndarray, chunks: np.ndarray, depth: int, progress=None, candidates: Candidates | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The `depth` best chunk indices and scores per question, best first, equal scores by chunk
    index: one more than `depth` searched, and a tie group at the cut ranked from its question's
    whole row (run.whole_ties)."""
    depth = min(depth, len(chunks))
    indices, scores = search(questions, chunks, depth + 1, progress, candidates)
    indices, scores, _ = whole_ties(
        indices, scores, np.ones(indices.shape, dtype=bool), depth, lambda row: row_scores(questions, chunks, row)
    )
    return _in_contract_order(indices[:, :depth], scores[:, :depth])
