"""BM25 over the chunks (the bm25s library): lowercased, English stop words removed and Snowball
English stemming (PyStemmer) by default (retrieval.bm25: stemmer english | none, stopwords
en | none), bm25s's default Lucene variant with k1=1.5, b=0.75."""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import bm25s
import numpy as np
import Stemmer


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


def retrieve(questions, corpus, settings: dict, depth: int, progress=None):
    """Sparse top-k through bm25s' own retrieval (no dense score row per question). A chunk that
    shares no word with the question is not retrieved, as in Lucene, so no zero-score chunk
    enters a run for its position in the corpus."""
    from retrieval_bench.retrieval.run import from_top

    options = settings["bm25"]
    index = bm25s.BM25()
    index.index(tokenize(corpus.texts, **options), show_progress=False)
    tokens = tokenize(questions.texts, **options)
    k = min(depth, len(corpus.texts))
    indices = np.zeros((len(tokens), k), dtype=np.int64)
    scores = np.zeros((len(tokens), k), dtype=np.float32)
    asking = [i for i, words in enumerate(tokens) if words]  # only stop words: nothing is retrieved
    if asking:
        found, found_scores = index.retrieve([tokens[i] for i in asking], k=k, show_progress=False, n_threads=1)
        indices[asking], scores[asking] = found, found_scores
    if progress is not None:
        progress.update(len(tokens))
    return from_top(questions.qids, corpus.chunk_ids, indices, scores, keep=scores > 0)
