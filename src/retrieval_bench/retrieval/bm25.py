"""BM25 over the chunks (the bm25s library): lowercased, English stop words removed and Snowball
English stemming (PyStemmer) by default (retrieval.bm25: stemmer english | none, stopwords
en | none), bm25s's default Lucene variant with k1=1.5, b=0.75.

The index of a corpus is built once and kept in the user cache (bm25/ under io.cache_root), named
by the digest of the chunk texts, the tokenizer settings and the library versions: a later run on
the same chunks (another method, hybrid, rerank, a rerun) loads it instead of tokenizing and
indexing again. An entry is written whole or not at all, under a lock, with a manifest of its
files' digests; an entry that does not match its manifest is rebuilt, never read."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_bench.core import locking
from retrieval_bench.core.files import cache_root, sha256_file
from retrieval_bench.retrieval.run import Corpus, Questions, from_top, whole_ties
from retrieval_bench.retrieval.settings import Bm25Settings, RetrievalSettings

# bm25s' numba backend retrieves ~30x faster than its numpy one at 200,000 chunks (the same
# scores; equal scores may come out in another order, which score.ties makes irrelevant), but
# compiling it costs 10-20 s on a machine's first search (numba's cache keeps it after that:
# cache_numba_code), which pays from this corpus size on.
NUMBA_FROM_CHUNKS = 100_000
INDEX_FORMAT = 1  # bump when what is cached, or how, changes
MANIFEST = "manifest.json"


@lru_cache(maxsize=None)
def numba_installed() -> bool:
    """numba is optional (the bm25-fast extra): without it bm25s' numpy backend retrieves."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


@lru_cache(maxsize=None)
def _say_numba_missing(n_chunks: int) -> None:
    print(
        f"bm25: numba is not installed: searching {n_chunks:,} chunks with bm25s' numpy backend, about 30x slower "
        "at this size; pip install -e '.[bm25-fast]' for the fast one",
        file=sys.stderr,
    )


def backend_for(n_chunks: int) -> str:
    if n_chunks < NUMBA_FROM_CHUNKS:
        return "numpy"
    if numba_installed():
        return "numba"
    _say_numba_missing(n_chunks)
    return "numpy"


@lru_cache(maxsize=None)
def _stemmer(name: str):
    import Stemmer  # PyStemmer: imported by the methods that tokenize (bm25, hybrid), not by every stage

    return None if name == "none" else Stemmer.Stemmer(name)


def _tokenize(texts: list[str], stemmer: str, stopwords: str, return_ids: bool):
    import bm25s  # with scipy and numba: about 1 CPU-s, only where BM25 runs

    return bm25s.tokenize(
        texts,
        lower=True,
        stopwords=None if stopwords == "none" else stopwords,
        stemmer=_stemmer(stemmer),
        return_ids=return_ids,
        show_progress=False,
    )


def tokenize(texts: list[str], stemmer: str = "english", stopwords: str = "en") -> list[list[str]]:
    return _tokenize(texts, stemmer, stopwords, return_ids=False)


class NoIndexedWord(Exception):
    """No chunk holds a word BM25 indexes (every text stop words, punctuation or symbols):
    bm25s cannot build an index, and no question could match one."""


def bm25_scores(
    chunk_texts: list[str], questions: list[str], stemmer: str = "english", stopwords: str = "en"
) -> Callable[[slice], np.ndarray]:
    """BM25 score of a batch of questions against every chunk."""
    import bm25s

    chunk_tokens = tokenize(chunk_texts, stemmer, stopwords)
    if not any(chunk_tokens):  # NoIndexedWord: every question scores 0 against every chunk
        return lambda rows: np.zeros((len(questions[rows]), len(chunk_texts)), dtype=np.float32)
    index = bm25s.BM25()
    index.index(chunk_tokens, show_progress=False)
    question_tokens = tokenize(questions, stemmer, stopwords)

    def scores(rows: slice) -> np.ndarray:
        # A question with no indexable word (only stop words) matches nothing: all zeros.
        return np.stack(
            [index.get_scores(tokens) if tokens else np.zeros(len(chunk_texts)) for tokens in question_tokens[rows]]
        ).astype(np.float32)

    return scores


def cache_dir() -> Path:
    return cache_root() / "bm25"


def index_key(texts: list[str], options: Bm25Settings) -> str:
    """The cache entry's name: what the index depends on (every text, in order, and its length,
    so no two corpora join into one digest)."""
    digest = hashlib.sha256(
        json.dumps([INDEX_FORMAT, version("bm25s"), version("PyStemmer"), options.stemmer, options.stopwords]).encode()
    )
    for text in texts:
        encoded = text.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()[:32]


def _file_digests(folder: Path) -> dict[str, str]:
    return {
        path.name: sha256_file(path) for path in sorted(folder.iterdir()) if path.name != MANIFEST and path.is_file()
    }


def _intact(folder: Path) -> bool:
    """The entry is whole: its manifest lists exactly its files with their digests."""
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8")) == _file_digests(folder)
    except (OSError, ValueError):
        return False


def load_or_build(texts: list[str], options: Bm25Settings, backend: str, folder: Path | None = None):
    """The BM25 index of `texts` tokenized as `options` say, searching with `backend`: from the
    cache, or built (tokenized to ids) and cached on a miss. Returns (index, built); NoIndexedWord
    when no text holds a word to index."""
    import bm25s

    entry = (folder or cache_dir()) / index_key(texts, options)
    built_here = []

    def build(staging: Path) -> None:
        index = bm25s.BM25(backend=backend)
        tokenized = _tokenize(texts, options.stemmer, options.stopwords, return_ids=True)
        if not tokenized.vocab:
            raise NoIndexedWord
        index.index(tokenized, show_progress=False)
        index.save(staging, show_progress=False)
        (staging / MANIFEST).write_text(json.dumps(_file_digests(staging)), encoding="utf-8")
        built_here.append(index)

    entry.parent.mkdir(parents=True, exist_ok=True)
    built = locking.build_once(
        entry,
        build,
        _intact,
        what=f"building the BM25 index {entry}",
        log=lambda line: print(f"bm25: {line}", file=sys.stderr),
    )
    if built:  # what was just saved, without reading it back
        return built_here[0], True
    return bm25s.BM25.load(entry, backend=backend, load_corpus=False, show_progress=False), False


@lru_cache(maxsize=None)
def cache_numba_code() -> None:
    """bm25s compiles its numba search anew in every process (10-20 s, most of a search of 100,000
    chunks) and leaves numba's cache off: turn it on, so that only a machine's first search
    compiles it (numba keeps the code beside bm25s in __pycache__, or in NUMBA_CACHE_DIR, and
    compiles again when bm25s or numba change). The same machine code: the same scores."""
    from bm25s.numba import retrieve_utils

    try:
        retrieve_utils._retrieve_internal_jitted_serial.enable_caching()
        retrieve_utils._retrieve_internal_jitted_parallel.enable_caching()
    except RuntimeError:  # nowhere numba may write (a read-only install, no user cache): compile as before
        pass


def numba_threads() -> int:
    """The cores this process may use (its CPU affinity, where the OS has one), at most the threads
    numba was started with (NUMBA_NUM_THREADS: numba refuses more)."""
    import numba

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    # numba.config sets its settings from the environment at import: no attribute a type checker sees.
    return max(1, min(cores, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]


def top(
    questions: Questions, corpus: Corpus, options: Bm25Settings, depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sparse top-k through bm25s' own retrieval (no dense score row per question): per question
    the `depth` best chunk indices and scores, best first (equal scores by chunk index), and which
    were retrieved, plus the whole tie group straddling the cut (run.whole_ties: bm25s' choice
    among equal scores never decides what is in). A chunk that shares no word with the question
    is not retrieved, as in Lucene, so no zero-score chunk enters a run for its position in the
    corpus."""
    backend = backend_for(len(corpus.texts))
    try:
        index, _ = load_or_build(corpus.texts, options, backend)
    except NoIndexedWord:
        print(
            f"bm25: warning: no chunk holds a word BM25 indexes (stop words {options.stopwords}, stemmer "
            f"{options.stemmer}: only stop words, punctuation or symbols?): no question retrieves anything",
            file=sys.stderr,
        )
        nothing = np.zeros((len(questions.texts), 0))
        return nothing.astype(np.int64), nothing.astype(np.float32), nothing.astype(bool)
    if backend == "numba":
        cache_numba_code()
    tokens = [index.get_tokens_ids(words) for words in tokenize(questions.texts, options.stemmer, options.stopwords)]
    k = min(depth + 1, len(corpus.texts))  # one more: does a tie group straddle the cut?
    indices = np.zeros((len(tokens), k), dtype=np.int64)
    scores = np.zeros((len(tokens), k), dtype=np.float32)
    asking = [i for i, ids in enumerate(tokens) if ids]  # no indexed word: nothing is retrieved
    if asking:
        threads = numba_threads() if backend == "numba" else 1  # numpy's threads only contend for the GIL
        found, found_scores = index.retrieve([tokens[i] for i in asking], k=k, show_progress=False, n_threads=threads)
        order = np.lexsort((found, -found_scores), axis=1)  # best first, equal scores by chunk index
        indices[asking], scores[asking] = (
            np.take_along_axis(found, order, 1),
            np.take_along_axis(found_scores, order, 1),
        )
    return whole_ties(indices, scores, scores > 0, depth, lambda row: index.get_scores(tokens[row]))


def retrieve(
    questions: Questions, corpus: Corpus, settings: RetrievalSettings, depth: int, progress=None
) -> pd.DataFrame:
    indices, scores, retrieved = top(questions, corpus, settings.bm25, depth)
    if progress is not None:
        progress.update(len(questions.qids))
    return from_top(questions.qids, corpus.chunk_ids, indices, scores, keep=retrieved)
