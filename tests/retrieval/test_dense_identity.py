"""Exact dense top-k and the run it makes are those of the plain definition (every score, a full
stable sort by score then chunk index, the whole tie group at the cut), whatever the block sizes,
on data full of exact ties; and from_top ranks as run_contract.ranked does (score, then chunk id as text)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.core.run_table import ranked
from retrieval_bench.retrieval import dense, flat
from retrieval_bench.retrieval import run as runs
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings
from tests.exact_reference import reference_scores


def tied_data(seed: int, n_chunks: int, n_questions: int):
    """Unit vectors with many exact ties: chunks repeat a few vectors, questions too."""
    rng = np.random.default_rng(seed)
    pool = rng.normal(size=(40, 6)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    chunks = pool[rng.integers(0, len(pool), size=n_chunks)]
    chunks[::7] = rng.normal(size=chunks[::7].shape)  # and some of their own
    chunks /= np.linalg.norm(chunks, axis=1, keepdims=True)
    questions = np.concatenate(
        [pool[: n_questions // 2], chunks[rng.integers(0, n_chunks, size=n_questions - n_questions // 2)]]
    )
    return questions, chunks


def plain_run(questions: np.ndarray, chunks: np.ndarray, qids, chunk_ids, depth: int) -> pd.DataFrame:
    rows = []
    for qid, row in zip(qids, reference_scores(questions, chunks)):
        order = np.argsort(-row, kind="stable")  # equal scores by chunk index...
        order = sorted(order, key=lambda i: (-row[i], chunk_ids[i]))  # ...then, in the run, by chunk id
        cut = row[order[depth - 1]]
        kept = [i for rank, i in enumerate(order) if rank < depth or row[i] >= cut]
        rows += [(qid, chunk_ids[i], rank, float(row[i])) for rank, i in enumerate(kept, 1)]
    return pd.DataFrame(rows, columns=["qid", "chunk_id", "rank", "score"])


@pytest.mark.parametrize("block", [4096, 8, 5])
@pytest.mark.parametrize("depth", [1, 10, 150])
def test_dense_runs_are_the_plain_definitions_with_ties(monkeypatch, block, depth):
    monkeypatch.setattr(flat, "SEARCH_BLOCK", block)
    questions, chunks = tied_data(depth, 2_000, 30)
    qids = [f"q{i}" for i in range(len(questions))]
    chunk_ids = [f"c{(i * 7919) % 2_000}" for i in range(len(chunks))]  # text order is not index order
    run = dense.retrieve(
        Questions(qids, [""] * len(qids), questions),
        Corpus(chunk_ids, [""] * len(chunk_ids), chunks),
        RetrievalSettings.from_params(DEFAULTS["retrieval"]),
        depth,
    )
    pd.testing.assert_frame_equal(run, plain_run(questions, chunks, qids, chunk_ids, depth), check_dtype=False)
    full = reference_scores(questions, chunks)
    expected = np.lexsort((np.tile(np.arange(len(chunks)), (len(qids), 1)), -full), axis=1)[:, :depth]
    indices, _ = dense.top(Questions(qids, [], questions), Corpus(chunk_ids, [], chunks), depth)
    assert (indices == expected).all()


def test_from_top_ranks_as_ranked_does():
    rng = np.random.default_rng(2)
    chunk_ids = [f"c{i}" for i in rng.permutation(500)]
    indices = np.array([rng.choice(500, size=30, replace=False) for _ in range(40)])
    scores = rng.integers(0, 5, size=(40, 30)).astype(np.float32)  # ties everywhere
    keep = rng.random((40, 30)) < 0.8
    keep[3] = False  # a question with nothing retrieved
    qids = [f"q{i}" for i in rng.permutation(40)]
    expected = ranked(
        pd.DataFrame(
            {
                "qid": np.repeat(np.asarray(qids, dtype=object), keep.sum(axis=1)),
                "chunk_id": np.asarray(chunk_ids, dtype=object)[indices[keep]],
                "score": scores[keep].astype(np.float64),
            }
        )
    )
    pd.testing.assert_frame_equal(runs.from_top(qids, chunk_ids, indices, scores, keep=keep), expected)
