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
