"""What a retrieval stage reads: the golden set's questions and one chunking's chunks, with the
vectors of one embedder when the method searches vectors (checked to be the current data's).

The chunk texts are read only when a method asks for them (run.Corpus): a dense search of 400k
chunks holds their ids and vectors, not 300 MB of text twice over (Arrow's and Python's)."""

from __future__ import annotations

from typing import Any

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.files import read_jsonl, read_table
from retrieval_bench.core.params_panel import external_inputs, method_settings, searches_vectors
from retrieval_bench.embedding.saved_vectors import load_saved_vectors
from retrieval_bench.retrieval.methods import needs_vectors
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings


def questions_and_corpus(
    settings: RetrievalSettings, chunking: str = paths.DEFAULT, embedder: str = paths.DEFAULT
) -> tuple[Questions, Corpus]:
    """The golden set's questions and the chunks of `chunking` (their texts read on first use),
    with `embedder`'s vectors when the method of `settings` searches vectors."""
    chunks_path = paths.chunks_of(chunking)
    chunk_ids = read_table(chunks_path, ["chunk_id"])["chunk_id"].tolist()
    check_has_texts(chunks_path)  # now, not when a method first asks for them
    golden = read_jsonl(paths.GOLDENSET)
    questions = Questions([row["qid"] for row in golden], [row["question"] for row in golden])

    def read_texts() -> list[str]:
        texts = read_table(chunks_path, ["text"])["text"].tolist()
        if len(texts) != len(chunk_ids):  # the file was replaced since: not the chunks being searched
            raise InputError(
                f"{chunks_path}: {len(texts)} texts for {len(chunk_ids)} chunk ids: changed while retrieve ran; rerun it"
            )
        return texts

    corpus = Corpus(chunk_ids, read_texts)
    if needs_vectors(settings):
        question_vectors, question_ids, _ = paths.question_vectors(embedder)
        corpus_vectors, corpus_ids, _ = paths.corpus_vectors(chunking, embedder)
        asked = load_saved_vectors(question_vectors, question_ids, questions.qids)
        searched = load_saved_vectors(corpus_vectors, corpus_ids, chunk_ids)
        if asked.shape[1] != searched.shape[1]:  # one embedder's two files: else FAISS asserts
            raise InputError(
                f"{question_vectors} holds {asked.shape[1]}-dimensional vectors, {corpus_vectors} "
                f"{searched.shape[1]}-dimensional: not one model's; rerun the embed stages (`dvc repro`)"
            )
        questions = Questions(questions.qids, questions.texts, asked)
        corpus = Corpus(chunk_ids, read_texts, searched)
    return questions, corpus


class LastInputs:
    """questions_and_corpus for the systems of one stage run, the last chunking and embedder's kept:
    systems on the same ones, one after the other (retrieve orders them so), read the golden set,
    the chunk ids and the vectors (and check them) once, not once each. One corpus held at a time,
    as when each system had a process of its own."""

    def __init__(self) -> None:
        self._key: tuple[str, str | None] | None = None
        self._last: tuple[Questions, Corpus] | None = None

    def __call__(self, settings: RetrievalSettings, chunking: str, embedder: str) -> tuple[Questions, Corpus]:
        key = (chunking, embedder if needs_vectors(settings) else None)
        if key != self._key or self._last is None:
            self._key, self._last = None, None  # the last corpus freed before the next is read
            self._last, self._key = questions_and_corpus(settings, chunking, embedder), key
        return self._last


def reading_order(panel: dict[str, dict[str, Any]], systems: list[str]) -> list[str]:
    """The order retrieve runs `systems` in: those exporting a TREC run first (a run-file system
    may read one), then by chunking and embedder, so LastInputs reads each pair's once."""
    return sorted(
        systems, key=lambda name: (not panel[name]["trec_export"], panel[name]["chunking"], panel[name]["embedder"])
    )


def retrieve_inputs(picked: dict[str, Any], system: str, where: str = "retrieval") -> tuple[list[str], dict[str, Any]]:
    """What panel system `system` (its resolved settings `picked`) is retrieved from, the key of its
    kept run (core.item_memo): the settings its method reads (method_settings), the golden set, its chunks and vectors, and what its
    method reads besides: the store's stamp, its run file, its Python retriever's module (its
    top-level package or file in the project, and the runs folder), its cross-encoder's files.
    `where`: the params key its messages name (settings_key)."""
    chunking, embedder, method = picked["chunking"], picked["embedder"], picked["method"]
    files = [paths.GOLDENSET, paths.chunks_of(chunking)]
    if searches_vectors(picked):  # a BM25 system's pair may be embedded for no one (embedded_pairs)
        files += [*paths.corpus_vectors(chunking, embedder)[:2], *paths.question_vectors(embedder)[:2]]
    files += external_inputs(picked)  # a run file, a retriever's module: none for the other methods
    settings = {"system": system, **method_settings(picked)}
    if method == "store":  # a server's stamp is new on every run
        files.append(paths.STORE_STAMP)
    elif method == "python":  # a module imported from the project's folder (retrieval.external)
        files.append(paths.EXTERNAL_RUNS)
    elif method == "rerank":  # a model retrained in place: the same name, other scores
        from retrieval_bench.embedding.model_source import model_fingerprint
        from retrieval_bench.retrieval.rerank import resolve_model

        settings["rerank_model_files"] = model_fingerprint(
            resolve_model(picked["rerank"]["model"], f"{where}.rerank.model")
        )
    return files, settings


def check_has_texts(chunks_path: str) -> None:
    """read_table's check of the text column, without reading it."""
    import pyarrow.parquet

    found = pyarrow.parquet.read_schema(chunks_path).names  # readable: read_table has just read it
    if "text" not in found:
        raise InputError(
            f"{chunks_path}: no column 'text' (columns: {quoted(found, 120)}); "
            "a table of another kind: rerun the stage that writes it (`dvc repro`)"
        )
