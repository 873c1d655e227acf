"""The dense score as docs/explanation/ties.md defines it, computed apart from retrieval.flat: the
float64 products of the float32 components, added by a fixed tree (while more than one term is
left, the last floor(w/2) terms are added onto the first floor(w/2)), rounded once to float32. The
terms are a Python list of whole columns (one per dimension), every pair summed alike."""

from __future__ import annotations

import numpy as np


def reference_scores(questions: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    q = np.asarray(questions, dtype=np.float32).astype(np.float64)
    c = np.asarray(chunks, dtype=np.float32).astype(np.float64)
    terms = [np.outer(q[:, dim], c[:, dim]) for dim in range(q.shape[1])]
    while len(terms) > 1:
        half = len(terms) // 2
        terms = [terms[i] + terms[len(terms) - half + i] for i in range(half)] + terms[half : len(terms) - half]
    return terms[0].astype(np.float32)
