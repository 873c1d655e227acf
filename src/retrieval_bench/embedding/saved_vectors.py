"""The embed stages' saved vectors (data/embeddings/*.npy and their ids, written by
embed.save_embeddings) as retrieve reads them: checked, so that a truncated, foreign or non-finite
file is one line, not a traceback or a silently wrong search."""

from __future__ import annotations

import json

import numpy as np

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import load_array

CHECK_ROWS = 1 << 14  # rows checked at once for finite values (a 6 MB mask at 384 dimensions)


def load_saved_vectors(vectors: str, ids: str, expected_ids: list[str]) -> np.ndarray:
    """The embed stage's vectors for `expected_ids`, in their order: a 2-D float array, one finite
    row per id, else one line saying to rerun the embed stages."""
    rerun = "rerun the embed stages (dvc repro -f embed_corpus embed_questions)"
    try:
        with open(ids, encoding="utf-8") as handle:
            same = json.load(handle) == expected_ids
    except ValueError as error:  # not JSON, not UTF-8
        raise InputError(f"{ids}: unreadable ({error}); {rerun}") from None
    if not same:
        raise InputError(f"{vectors}: embeddings of other ids than the current data; {rerun}")
    matrix = load_array(vectors, mmap_mode="r")  # read as searched: the store method uses the corpus only for run_info
    if matrix.ndim != 2 or matrix.shape[0] != len(expected_ids) or matrix.shape[1] == 0 or matrix.dtype.kind != "f":
        raise InputError(
            f"{vectors}: a {matrix.dtype} array of shape {matrix.shape}, expected float vectors of shape "
            f"({len(expected_ids)}, dimension) for {ids}; {rerun}"
        )
    for start in range(0, len(matrix), CHECK_ROWS):  # in blocks: no mask of the whole matrix
        finite = np.isfinite(matrix[start : start + CHECK_ROWS]).all(axis=1)
        if not finite.all():
            row = start + int(np.flatnonzero(~finite)[0])
            raise InputError(f"{vectors}: the vector of {expected_ids[row]!r} (row {row}) is not finite; {rerun}")
    return matrix
