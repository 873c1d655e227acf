"""What a system costs beside its quality, measured where it runs (this machine's figures, for
the leaderboard's cost columns and Pareto front): the time to search one question and the size
of its index.

search_ms_per_question: the method run again, after the stage's own run (so caches and indexes
are warm), over a sample of questions in one call, three times; the median of the three passes'
milliseconds per question. An index loaded from the disk cache counts (the stage loads it too),
its build does not. Method rerank scores its sample afresh (its cross-encoder is most of its
cost), over 8 questions in one pass, the model's load included. External runs (run-file, python) cost what their system did: None.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from retrieval_bench.retrieval import ann, bm25
from retrieval_bench.retrieval.run import Corpus, Questions, resolve_depth

SAMPLE = 256  # questions per timed pass
RERANK_SAMPLE = 8  # rerank: every pair goes through the cross-encoder (loaded again each pass), in one pass
PASSES = 3
EXTERNAL = {"run-file", "python"}


def _sample(questions: Questions, size: int) -> Questions:
    rows = np.unique(np.linspace(0, len(questions.qids) - 1, min(size, len(questions.qids))).astype(int))
    vectors = None if questions.vectors is None else questions.vectors[rows]
    return Questions([questions.qids[i] for i in rows], [questions.texts[i] for i in rows], vectors)


def search_ms_per_question(settings: dict, questions: Questions, corpus: Corpus, search) -> float | None:
    """The median over PASSES (rerank: one) of the milliseconds per question of `search(settings, questions,
    corpus)` (methods.retrieve) on a sample of the questions; None for an external run."""
    if settings["method"] in EXTERNAL or not questions.qids:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        if settings["method"] == "rerank":  # a cache of its own: every pair is scored, as a new question's would be
            settings = {**settings, "rerank": {**settings["rerank"], "cache": str(Path(scratch) / "scores.jsonl")}}
        rerank = settings["method"] == "rerank"
        sample = _sample(questions, RERANK_SAMPLE if rerank else SAMPLE)
        passes = []
        for _ in range(1 if rerank else PASSES):
            started = time.perf_counter()
            with contextlib.redirect_stderr(io.StringIO()):  # the method's own report lines, once is enough
                search(settings, sample, corpus)
            passes.append((time.perf_counter() - started) / len(sample.qids) * 1000)
    return round(statistics.median(passes), 4)


def index_bytes(settings: dict, corpus: Corpus) -> int | None:
    """The size of what the method searches: the vectors (dense, hybrid, a dense first stage), the
    FAISS index file (ann), the BM25 index folder (bm25, hybrid, a bm25 first stage); None for an
    external run or a vector store's own index."""
    method = settings["method"]
    if method == "rerank":
        method = settings["rerank"]["first_stage"]
    if method in EXTERNAL or method == "store":
        return None
    total = 0
    if method in ("dense", "hybrid"):
        total += int(corpus.vectors.nbytes)
    if method == "ann":
        total += (
            ann.cached_index_path(np.ascontiguousarray(corpus.vectors, dtype=np.float32), settings["ann"])
            .stat()
            .st_size
        )
    if method in ("bm25", "hybrid"):
        entry = bm25.cache_dir() / bm25.index_key(
            corpus.texts, settings["bm25"]["stemmer"], settings["bm25"]["stopwords"]
        )
        total += sum(path.stat().st_size for path in entry.iterdir() if path.is_file())
    return total


def system_costs(settings: dict, corpus: Corpus) -> dict:
    """run_info.json's costs, those a rerun gives again byte for byte: n_chunks, index_bytes, the
    depth resolved (the measured search time goes to a file of its own: paths.search_timing)."""
    return {
        "n_chunks": len(corpus.chunk_ids),
        "index_bytes": index_bytes(settings, corpus),
        "resolved_depth": resolve_depth(settings["depth"], len(corpus.chunk_ids)),
    }
