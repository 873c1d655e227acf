"""BM25 over the chunks (the bm25s library): lowercased, English stop words removed and Snowball
English stemming (PyStemmer) by default (retrieval.bm25: stemmer english | none, stopwords
en | none), bm25s's default Lucene variant with k1=1.5, b=0.75."""
from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache

import bm25s
import numpy as np
import Stemmer

# bm25s' numba backend retrieves ~30x faster than its numpy one at 200,000 chunks (the same
# scores; equal scores may come out in another order, which score.ties makes irrelevant), but
# compiling it costs ~10 s per process: it pays from this corpus size on.
NUMBA_FROM_CHUNKS = 100_000


def backend_for(n_chunks: int) -> str:
    return "numba" if n_chunks >= NUMBA_FROM_CHUNKS else "numpy"


@lru_cache(maxsize=None)
def _stemmer(name: str):
    return None if name == "none" else Stemmer.Stemmer(name)


def tokenize(texts: list[str], stemmer: str = "english", stopwords: str = "en") -> list[list[str]]:
    return bm25s.tokenize(
        texts, lower=True, stopwords=None if stopwords == "none" else stopwords, stemmer=_stemmer(stemmer),
        return_ids=False, show_progress=False,
    )


def bm25_scores(
    chunk_texts: list[str], questions: list[str], stemmer: str = "english", stopwords: str = "en"
) -> Callable[[slice], np.ndarray]:
    """BM25 score of a batch of questions against every chunk."""
    index = bm25s.BM25()
    index.index(tokenize(chunk_texts, stemmer, stopwords), show_progress=False)
    question_tokens = tokenize(questions, stemmer, stopwords)

    def scores(rows: slice) -> np.ndarray:
        # A question with no indexable word (only stop words) matches nothing: all zeros.
        return np.stack(
            [index.get_scores(tokens) if tokens else np.zeros(len(chunk_texts)) for tokens in question_tokens[rows]]
        ).astype(np.float32)

    return scores


def numba_threads() -> int:
    """The cores this process may use (its CPU affinity, where the OS has one), at most the threads
    numba was started with (NUMBA_NUM_THREADS: numba refuses more)."""
    import numba

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, numba.config.NUMBA_NUM_THREADS))


def top(questions, corpus, settings: dict, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sparse top-k through bm25s' own retrieval (no dense score row per question): per question
    the `depth` best chunk indices and scores, best first (equal scores by chunk index), and which
    were retrieved, plus the whole tie group straddling the cut (run.whole_ties: bm25s' choice
    among equal scores never decides what is in). A chunk that shares no word with the question
    is not retrieved, as in Lucene, so no zero-score chunk enters a run for its position in the
    corpus."""
    from retrieval_bench.retrieval.run import whole_ties

    options = settings["bm25"]
    backend = backend_for(len(corpus.texts))
    index = bm25s.BM25(backend=backend)
    index.index(tokenize(corpus.texts, **options), show_progress=False)
    tokens = tokenize(questions.texts, **options)
    k = min(depth + 1, len(corpus.texts))  # one more: does a tie group straddle the cut?
    indices = np.zeros((len(tokens), k), dtype=np.int64)
    scores = np.zeros((len(tokens), k), dtype=np.float32)
    asking = [i for i, words in enumerate(tokens) if words]  # only stop words: nothing is retrieved
    if asking:
        threads = numba_threads() if backend == "numba" else 1  # numpy's threads only contend for the GIL
        found, found_scores = index.retrieve([tokens[i] for i in asking], k=k, show_progress=False, n_threads=threads)
        order = np.lexsort((found, -found_scores), axis=1)  # best first, equal scores by chunk index
        indices[asking], scores[asking] = np.take_along_axis(found, order, 1), np.take_along_axis(found_scores, order, 1)
    return whole_ties(indices, scores, scores > 0, depth, lambda row: index.get_scores(tokens[row]))


def retrieve(questions, corpus, settings: dict, depth: int, progress=None):
    from retrieval_bench.retrieval.run import from_top

    indices, scores, retrieved = top(questions, corpus, settings, depth)
    if progress is not None:
        progress.update(len(questions.qids))
    return from_top(questions.qids, corpus.chunk_ids, indices, scores, keep=retrieved)
