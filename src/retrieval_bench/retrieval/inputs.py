"""What a retrieval stage reads: the golden set's questions and one chunking's chunks, with the
vectors of one embedder when the method searches vectors (checked to be the current data's)."""

from __future__ import annotations

from retrieval_bench import paths
from retrieval_bench.embedding.saved_vectors import load_saved_vectors
from retrieval_bench.io import read_jsonl, read_table
from retrieval_bench.retrieval.methods import needs_vectors
from retrieval_bench.retrieval.run import Corpus, Questions


def questions_and_corpus(
    settings: dict, chunking: str = paths.DEFAULT, embedder: str = paths.DEFAULT
) -> tuple[Questions, Corpus]:
    """The golden set's questions and the chunks of `chunking`, with `embedder`'s vectors when
    `settings` (a retrieval section) needs them."""
    chunks = read_table(paths.chunks_of(chunking), ["chunk_id", "text"])
    golden = read_jsonl(paths.GOLDENSET)
    questions = Questions([row["qid"] for row in golden], [row["question"] for row in golden])
    corpus = Corpus(chunks["chunk_id"].tolist(), chunks["text"].tolist())
    if needs_vectors(settings):
        question_vectors, question_ids, _ = paths.question_vectors(embedder)
        corpus_vectors, corpus_ids, _ = paths.corpus_vectors(chunking, embedder)
        questions = Questions(
            questions.qids, questions.texts, load_saved_vectors(question_vectors, question_ids, questions.qids)
        )
        corpus = Corpus(
            corpus.chunk_ids, corpus.texts, load_saved_vectors(corpus_vectors, corpus_ids, corpus.chunk_ids)
        )
    return questions, corpus
