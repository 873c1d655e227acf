"""What a retrieval stage reads: the golden set's questions and the corpus's chunks, with their
vectors when the method searches vectors (checked to be the current data's)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from retrieval_bench import paths
from retrieval_bench.io import InputError, read_jsonl
from retrieval_bench.retrieval.methods import needs_vectors
from retrieval_bench.retrieval.run import Corpus, Questions


def load_vectors(vectors: str, ids: str, expected_ids: list[str]) -> np.ndarray:
    with open(ids, encoding="utf-8") as handle:
        if json.load(handle) != expected_ids:
            raise InputError(f"{vectors}: embeddings of other ids than the current data; rerun the embed stages")
    return np.load(vectors, mmap_mode="r")  # read as searched: the store method uses the corpus only for run_info


def questions_and_corpus(settings: dict) -> tuple[Questions, Corpus]:
    """The golden set's questions and the chunks, with vectors when `settings` (a retrieval
    section) needs them."""
    chunks = pd.read_parquet(paths.CHUNKS, columns=["chunk_id", "text"])
    golden = read_jsonl(paths.GOLDENSET)
    questions = Questions([row["qid"] for row in golden], [row["question"] for row in golden])
    corpus = Corpus(chunks["chunk_id"].tolist(), chunks["text"].tolist())
    if needs_vectors(settings):
        questions = Questions(questions.qids, questions.texts, load_vectors(paths.QUESTION_VECTORS, paths.QUESTION_IDS, questions.qids))
        corpus = Corpus(corpus.chunk_ids, corpus.texts, load_vectors(paths.CORPUS_VECTORS, paths.CORPUS_IDS, corpus.chunk_ids))
    return questions, corpus
