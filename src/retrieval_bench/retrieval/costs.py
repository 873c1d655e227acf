"""What a system costs beside its quality (this machine's figures, for the leaderboard's cost
columns and Pareto front): the search of one question, timed by the leaderboard stage with every
other system's (core.timing: interleaved and repeated), and the size of its index.

search_task: the method run over a sample of questions in one call. An index loaded from the disk
cache counts (a stage loads it too), its build does not (the untimed warm-up builds it). Method
rerank scores its sample afresh on every call (a cache file of its own each time: its
cross-encoder is most of its cost), over RERANK_SAMPLE questions. External runs (run-file,
python) cost what their system did: no task.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import replace
from itertools import count
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_bench.retrieval import ann, bm25
from retrieval_bench.retrieval.run import Corpus, Questions, resolve_depth
from retrieval_bench.retrieval.settings import RetrievalSettings

SAMPLE = 256  # questions per timed call
RERANK_SAMPLE = 8  # rerank: every pair goes through the cross-encoder
EXTERNAL = {"run-file", "python"}
Search = Callable[[RetrievalSettings, Questions, Corpus], pd.DataFrame]  # methods.retrieve, timed


def _sample(questions: Questions, size: int) -> Questions:
    rows = np.unique(np.linspace(0, len(questions.qids) - 1, min(size, len(questions.qids))).astype(int))
    vectors = None if questions.vectors is None else questions.vectors[rows]
    return Questions([questions.qids[i] for i in rows], [questions.texts[i] for i in rows], vectors)


def search_task(
    settings: RetrievalSettings, questions: Questions, corpus: Corpus, search: Search, scratch: Path
) -> Callable[[], int] | None:
    """A call that runs `search(settings, sample, corpus)` (methods.retrieve) on a sample of the
    questions and returns the sample's size (core.timing.interleaved's unit); None for an external
    run or no questions. `scratch`: a folder for rerank's fresh score caches."""
    if settings.method in EXTERNAL or not questions.qids:
        return None
    rerank = settings.method == "rerank"
    sample = _sample(questions, RERANK_SAMPLE if rerank else SAMPLE)
    calls = count()

    def run() -> int:
        timed = settings
        if rerank:  # a cache of its own per call: every pair is scored, as a new question's would be
            cache = str(scratch / f"rerank-{next(calls)}.jsonl")
            timed = replace(settings, rerank=replace(settings.rerank, cache=cache))
        with contextlib.redirect_stderr(io.StringIO()):  # the method's own report lines
            search(timed, sample, corpus)
        return len(sample.qids)

    return run


def index_bytes(settings: RetrievalSettings, corpus: Corpus) -> int | None:
    """The size of what the method searches: the vectors (dense, hybrid, a dense first stage), the
    FAISS index file (ann), the BM25 index folder (bm25, hybrid, a bm25 first stage); None for an
    external run or a vector store's own index."""
    method = settings.method
    if method == "rerank":
        method = settings.rerank.first_stage
    if method in EXTERNAL or method == "store":
        return None
    total = 0
    if method in ("dense", "hybrid"):
        total += int(corpus.dense_vectors.nbytes)
    if method == "ann":
        vectors = np.ascontiguousarray(corpus.vectors, dtype=np.float32)
        total += ann.cached_index_path(vectors, settings.ann).stat().st_size
    if method in ("bm25", "hybrid"):
        entry = bm25.cache_dir() / bm25.index_key(corpus.texts, settings.bm25)
        if entry.is_dir():  # none where no chunk holds a word to index (bm25.NoIndexedWord)
            total += sum(path.stat().st_size for path in entry.iterdir() if path.is_file())
    return total


def system_costs(settings: RetrievalSettings, corpus: Corpus) -> dict:
    """run_info.json's costs, those a rerun gives again byte for byte: n_chunks, index_bytes, the
    depth resolved (the search time is measured by the leaderboard stage: search_task)."""
    return {
        "n_chunks": len(corpus.chunk_ids),
        "index_bytes": index_bytes(settings, corpus),
        "resolved_depth": resolve_depth(settings.depth, len(corpus.chunk_ids)),
    }
