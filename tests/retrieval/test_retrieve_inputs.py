"""What the retrieve stage reads (retrieval.inputs): the chunk texts only when a method asks for
them (a dense search of 400k chunks never holds them), the saved vectors checked in blocks, and what
a panel system's kept run is keyed on (retrieve_inputs): what its method reads, so a change there
computes it again and nothing else does."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params_panel import method_settings
from retrieval_bench.core.params_schema import DEFAULTS
from retrieval_bench.embedding import saved_vectors
from retrieval_bench.embedding.embed import save_embeddings
from retrieval_bench.retrieval import methods
from retrieval_bench.retrieval.inputs import questions_and_corpus, reading_order, retrieve_inputs
from retrieval_bench.retrieval.run import Corpus
from retrieval_bench.retrieval.settings import RetrievalSettings

TEXTS = [
    "the alpha beta",
    "beta gamma running",
    "gamma delta runs",
    "delta alpha of the",
    "epsilon",
]  # stop words, stems


def _settings(method: str) -> RetrievalSettings:
    return RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": method, "depth": 2})


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A chunking, a golden set and both embedders' vectors under tmp_path (the working folder)."""
    monkeypatch.chdir(tmp_path)
    ids = [f"c{i}" for i in range(len(TEXTS))]
    chunks = tmp_path / paths.CHUNKS
    chunks.parent.mkdir(parents=True)
    pd.DataFrame({"chunk_id": ids, "doc_id": "d", "text": TEXTS}).to_parquet(chunks, index=False)
    (tmp_path / "data" / "goldenset.jsonl").write_text(
        "".join(json.dumps({"qid": f"q{i}", "question": TEXTS[i]}) + "\n" for i in range(3))
    )
    rng = np.random.default_rng(0)
    for (vectors, id_path, _), names in (
        (paths.corpus_vectors(paths.DEFAULT, paths.DEFAULT), ids),
        (paths.question_vectors(paths.DEFAULT), ["q0", "q1", "q2"]),
    ):
        (tmp_path / vectors).parent.mkdir(parents=True, exist_ok=True)
        matrix = rng.normal(size=(len(names), 8)).astype(np.float32)
        save_embeddings(matrix / np.linalg.norm(matrix, axis=1, keepdims=True), names, vectors, id_path)
    return tmp_path


def test_a_dense_search_and_its_costs_never_read_the_texts(project):
    questions, corpus = questions_and_corpus(_settings("dense"))
    assert corpus.chunk_ids == ["c0", "c1", "c2", "c3", "c4"] and not corpus.texts_read
    run = methods.retrieve(_settings("dense"), questions, corpus)
    methods.run_info(_settings("dense"), questions, corpus, run)
    assert not corpus.texts_read


def test_a_method_that_asks_for_the_texts_gets_them(project):
    questions, corpus = questions_and_corpus(_settings("bm25"))
    assert corpus.vectors is None and not corpus.texts_read
    assert corpus.texts == TEXTS and corpus.texts_read
    assert methods.retrieve(_settings("bm25"), questions, corpus)["chunk_id"].tolist()[:1] == ["c0"]


def test_a_chunk_table_without_texts_is_refused_before_any_search(project):
    pd.DataFrame({"chunk_id": ["c0"]}).to_parquet(project / paths.CHUNKS, index=False)
    with pytest.raises(InputError, match="no column 'text'"):
        questions_and_corpus(_settings("dense"))


def test_texts_given_as_a_list_are_the_corpus_texts_and_it_is_read_only():
    corpus = Corpus(["a"], ["text"])
    assert corpus.texts == ["text"] and corpus.texts_read and corpus.vectors is None
    with pytest.raises(AttributeError):
        corpus.chunk_ids = ["b"]


def test_a_non_finite_vector_is_found_in_a_later_block(project, monkeypatch):
    monkeypatch.setattr(saved_vectors, "CHECK_ROWS", 2)
    vectors, id_path, _ = paths.corpus_vectors(paths.DEFAULT, paths.DEFAULT)
    matrix = np.load(vectors)
    matrix[3, 5] = np.inf
    np.save(vectors, matrix)
    with pytest.raises(InputError, match=r"the vector of 'c3' \(row 3\) is not finite"):
        questions_and_corpus(_settings("dense"))


def test_a_corpus_is_pickled_with_its_texts(project):
    import pickle

    _, corpus = questions_and_corpus(_settings("dense"))
    copy = pickle.loads(pickle.dumps(corpus))
    assert copy.texts_read and copy.texts == TEXTS and copy.chunk_ids == corpus.chunk_ids
    assert np.array_equal(copy.vectors, corpus.vectors)


def system(**keys: object) -> dict:
    return {"chunking": "c400", "embedder": "seq64", "method": "dense", "trec_export": None, **keys}


def test_every_system_is_keyed_on_its_questions_chunks_and_vectors_and_its_settings():
    files, settings = retrieve_inputs(system(), "mine")
    assert files[:2] == [paths.GOLDENSET, paths.chunks_of("c400")]
    assert set(files[2:]) == {*paths.corpus_vectors("c400", "seq64")[:2], *paths.question_vectors("seq64")[:2]}
    assert settings == {"system": "mine", **system()}


def test_what_a_method_reads_besides_is_in_its_key_alone():
    def extra(**keys: object) -> set[str]:
        return set(retrieve_inputs(system(**keys), "mine")[0]) - set(retrieve_inputs(system(), "mine")[0])

    assert extra(method="store") == {paths.STORE_STAMP}  # a rebuilt store, not any system's
    assert extra(method="run-file", run_file="runs/other.trec") == {"runs/other.trec"}
    assert extra(method="python", python="mine.retrievers:search") == {paths.EXTERNAL_RUNS, "mine", "mine.py"}
    assert extra(method="bm25") == set() and extra(method="hybrid") == set()


def test_systems_on_the_same_inputs_read_them_once_and_one_corpus_is_held(project, monkeypatch):
    from retrieval_bench.retrieval import inputs

    reads = []
    monkeypatch.setattr(inputs, "questions_and_corpus", lambda *args: reads.append(args[1:]) or object())
    load = inputs.LastInputs()
    first = load(_settings("dense"), "default", "default")
    assert load(_settings("dense"), "default", "default") is first and len(reads) == 1
    load(_settings("bm25"), "default", "default")  # no vectors: another corpus
    load(_settings("dense"), "default", "seq64")
    load(_settings("dense"), "default", "default")  # not kept: read again
    assert reads == [("default", "default")] * 2 + [("default", "seq64"), ("default", "default")]


def test_exporters_run_first_then_systems_by_their_inputs():
    panel = {
        "a": system(chunking="c800", embedder="e1"),
        "b": system(chunking="c400", embedder="e2"),
        "c": system(chunking="c800", embedder="e1", trec_export="runs/c.trec"),
        "d": system(chunking="c400", embedder="e1"),
    }
    assert reading_order(panel, list(panel)) == ["c", "d", "b", "a"]


def test_question_and_corpus_vectors_of_different_widths_are_one_line(project):
    """Vectors of two models (a question file left from another embedder) are refused naming both
    files, not a FAISS AssertionError."""
    vectors, id_path, _ = paths.question_vectors(paths.DEFAULT)
    matrix = np.eye(3, 6, dtype=np.float32)
    save_embeddings(matrix, ["q0", "q1", "q2"], vectors, id_path)
    with pytest.raises(InputError, match=r"6-dimensional vectors, .*8-dimensional: not one model's"):
        questions_and_corpus(_settings("dense"))


def test_a_systems_cross_encoder_that_cannot_be_found_is_named_by_the_systems_key(project, monkeypatch):
    """A panel system's rerank.model was reported as retrieval.rerank.model, which the user never set."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    picked = {**DEFAULTS["retrieval"], "method": "rerank", "chunking": "default", "embedder": "default"}
    picked["rerank"] = {**DEFAULTS["retrieval"]["rerank"], "model": "nobody/no-cross-encoder"}
    with pytest.raises(InputError, match=r"^panel\.rr\.rerank\.model 'nobody/no-cross-encoder'"):
        retrieve_inputs(picked, "rr", "panel.rr")


def test_the_retrieve_line_says_the_runs_own_depth_and_warns_below_the_deepest_k():
    """A run file of 5 results per question was logged "depth 100" and scored recall@20 = recall@5
    without a word; an ANN run short of its depth said nothing either."""
    settings = RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": "run-file", "run_file": "r.trec"})
    run = pd.DataFrame({"qid": ["q1"] * 5 + ["q2"] * 3, "chunk_id": list("abcde") + list("abc")})
    assert methods.depth_text(settings, run, 3, 20, 1000) == (
        "run-file, depth 100, 3-5 results per question; warning: 3 of 3 questions hold fewer than score.k 20 "
        "results (recall@20 counts only what the run holds)"
    )
    deep = pd.DataFrame({"qid": ["q1"] * 20, "chunk_id": [f"c{i}" for i in range(20)]})
    assert methods.depth_text(settings, deep, 1, 20, 1000) == "run-file, depth 100, 20 results per question"
    # a corpus of 5 chunks: q1 holds them all, nothing is missing; q2 and a question without results are short
    assert methods.depth_text(settings, run, 3, 20, 5).endswith(
        "warning: 2 of 3 questions hold fewer than score.k 20 results (recall@20 counts only what the run holds)"
    )


# A valid other value for each key of the retrieval section a method may not read.
ALTERED = {
    "rrf_k": 5,
    "weights": {"dense": 0.2, "bm25": 3.0},
    "fusion": "weighted",
    "fusion_depth": 3,
    "bm25": {"stemmer": "none", "stopwords": "none"},
    "run_file": "runs/other.trec",
    "python": "other:search",
    "rerank": {"model": "other", "first_stage": "bm25", "candidates": 3, "batch_size": 1},
    "ann": {**DEFAULTS["retrieval"]["ann"], "ef_search": 2, "hnsw_m": 2, "index": "ivf", "nlist": 2},
    "store": {"address": "lancedb:s?table=t", "search": {"nprobes": 2}, "filter": "x = 1"},
    "device": "auto",
}


@pytest.mark.parametrize(
    "own",
    [
        {"method": "dense"},
        {"method": "bm25"},
        {"method": "hybrid"},
        {"method": "hybrid", "fusion": "weighted"},
        {"method": "ann"},
    ],
    ids=["dense", "bm25", "hybrid-rrf", "hybrid-weighted", "ann"],
)
def test_a_key_its_method_does_not_read_leaves_a_systems_key_and_its_run_alone(project, own):
    """Every system was computed again when any retrieval key changed (retrieval.rrf_k, a bm25
    system): its key held the whole section. A key out of method_settings must not move the run,
    its run_info (index size included) or the key; one in it moves the key."""
    resolved = {**DEFAULTS["retrieval"], "depth": 3, "chunking": "default", "embedder": "default", **own}

    def outputs(picked: dict) -> tuple[pd.DataFrame, dict]:
        settings = RetrievalSettings.from_params(picked)
        questions, corpus = questions_and_corpus(settings)
        run = methods.retrieve(settings, questions, corpus)
        return run, methods.run_info(settings, questions, corpus, run)

    run, info = outputs(resolved)
    key = method_settings(resolved)
    for name, value in ALTERED.items():
        altered = {**resolved, name: value if value != resolved[name] else "rrf"}  # a weighted hybrid's other fusion
        if name in key:  # a key the method reads: the run may move
            continue
        assert method_settings(altered) == key, name
        other_run, other_info = outputs(altered)
        pd.testing.assert_frame_equal(other_run, run, obj=name)
        assert other_info == info, name


def test_a_reranker_is_keyed_on_what_its_first_stage_reads_too():
    rerank = {**DEFAULTS["retrieval"], "method": "rerank", "chunking": "c", "embedder": "e"}
    for first_stage, reads in (("dense", {"device"}), ("bm25", {"bm25"}), ("hybrid", {"bm25", "fusion", "rrf_k"})):
        picked = {**rerank, "rerank": {**rerank["rerank"], "first_stage": first_stage}}
        assert reads <= set(method_settings(picked)) and {"ann", "store", "run_file"}.isdisjoint(
            method_settings(picked)
        )
