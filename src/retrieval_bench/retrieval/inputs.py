"""What a retrieval stage reads: the golden set's questions and the corpus's chunks, with their
vectors when the method searches vectors (checked to be the current data's)."""

from __future__ import annotations

from retrieval_bench import paths
from retrieval_bench.embedding.saved_vectors import load_saved_vectors
from retrieval_bench.io import read_jsonl, read_table
from retrieval_bench.retrieval.methods import needs_vectors
from retrieval_bench.retrieval.run import Corpus, Questions


def questions_and_corpus(settings: dict) -> tuple[Questions, Corpus]:
    """The golden set's questions and the chunks, with vectors when `settings` (a retrieval
    section) needs them."""
    chunks = read_table(paths.CHUNKS, ["chunk_id", "text"])
    golden = read_jsonl(paths.GOLDENSET)
    questions = Questions([row["qid"] for row in golden], [row["question"] for row in golden])
    corpus = Corpus(chunks["chunk_id"].tolist(), chunks["text"].tolist())
    if needs_vectors(settings):
        questions = Questions(
            questions.qids,
            questions.texts,
            load_saved_vectors(paths.QUESTION_VECTORS, paths.QUESTION_IDS, questions.qids),
        )
        corpus = Corpus(
            corpus.chunk_ids, corpus.texts, load_saved_vectors(paths.CORPUS_VECTORS, paths.CORPUS_IDS, corpus.chunk_ids)
        )
    return questions, corpus
