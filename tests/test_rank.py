"""Retrieval methods and the run contract on small hand-checked examples: exact dense top-k in
blocks, BM25 through bm25s' retrieval, fusion, runs from files and from Python code, and where
judged chunks stand in a run or a full ranking."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_bench.io import InputError
from retrieval_bench.params import DEFAULTS
from retrieval_bench.retrieval import run as runs
from retrieval_bench.retrieval.bm25 import bm25_scores
from retrieval_bench.retrieval.hybrid import fuse
from retrieval_bench.retrieval.methods import retrieve
from retrieval_bench.retrieval.rank import judged_ranks, pessimistic_ranks
from retrieval_bench.retrieval.run import Corpus, Questions

CHUNKS = ["apples and pears", "write ahead logging in sqlite", "vacuum rebuilds the file", "sqlite logs every write"]
QUESTIONS = ["how does sqlite logging work", "the of and"]  # the second has only stop words


def settings(method, **changes):
    return {**DEFAULTS["retrieval"], "method": method, **changes}


def unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_blocked_top_k_equals_a_full_sort_whatever_the_block_sizes(monkeypatch):
    rng = np.random.default_rng(0)
    q, c = unit(rng.normal(size=(37, 8))), unit(rng.normal(size=(1000, 8)))
    c[500] = c[10]  # an exact tie: broken by chunk index
    full = q @ c.T
    expected = np.lexsort((np.tile(np.arange(1000), (37, 1)), -full), axis=1)[:, :25]
    monkeypatch.setattr(runs, "QUESTION_BLOCK", 8)
    monkeypatch.setattr(runs, "CHUNK_BLOCK", 64)
    indices, scores = runs.top_k_blocked(lambda r, k: q[r] @ c[k].T, 37, 1000, 25)
    assert (indices == expected).all()
    np.testing.assert_allclose(scores, np.take_along_axis(full, expected, 1), rtol=1e-6)


def test_dense_bm25_and_hybrid_runs():
    questions = Questions(["q1", "q2"], QUESTIONS, unit([[0.0, 1.0], [1.0, 0.0]]))
    corpus = Corpus(["a", "b", "c", "d"], CHUNKS, unit([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [0.8, 0.6]]))
    dense = retrieve(settings("dense", depth=3), questions, corpus)
    assert list(dense.columns) == ["qid", "chunk_id", "rank", "score"]
    assert dense[dense.qid == "q1"]["chunk_id"].tolist() == ["c", "b", "d"]
    assert dense[dense.qid == "q1"]["rank"].tolist() == [1, 2, 3]
    bm25 = retrieve(settings("bm25", depth="all"), questions, corpus)
    # Only chunks sharing a word are retrieved; stemming matches "logging", "logs" and "log".
    assert set(bm25[bm25.qid == "q1"]["chunk_id"]) == {"b", "d"} and "q2" not in set(bm25.qid)
    unstemmed = retrieve(settings("bm25", bm25={"stemmer": "none", "stopwords": "none"}), questions, corpus)
    assert "d" in set(unstemmed[unstemmed.qid == "q1"]["chunk_id"])  # "sqlite" still matches
    hybrid = retrieve(settings("hybrid", depth=4), questions, corpus)
    assert hybrid[hybrid.qid == "q1"]["chunk_id"].iloc[0] == "b"  # second by dense, first by BM25


def test_rrf_fusion_is_symmetric_and_ties_share_the_worst_rank():
    a = runs.from_records([("q", "x", 2.0), ("q", "y", 1.0), ("q", "z", 1.0)])
    b = runs.from_records([("q", "y", 5.0), ("q", "x", 4.0)])
    fused = fuse({"dense": a, "bm25": b}, {"dense": 1.0, "bm25": 1.0}, "rrf", 60, 10).set_index("chunk_id")["score"]
    assert fused["x"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["y"] == pytest.approx(1 / 63 + 1 / 61)  # y ties z at ranks 2-3 in a: both take rank 3
    assert fused["z"] == pytest.approx(1 / 63)
    mirror = fuse({"dense": a.iloc[:2], "bm25": b}, {"dense": 1.0, "bm25": 1.0}, "rrf", 60, 10).set_index("chunk_id")["score"]
    assert mirror["x"] == mirror["y"]  # ranks 1 and 2 against 2 and 1: exactly equal
    weighted = fuse({"dense": a, "bm25": b}, {"dense": 1.0, "bm25": 2.0}, "weighted", 60, 10).set_index("chunk_id")["score"]
    assert weighted.to_dict() == pytest.approx({"x": 1.0, "y": 2.0, "z": 0.0})


def test_run_files_trec_and_jsonl(tmp_path):
    trec = tmp_path / "engine.trec"
    trec.write_text("q1 Q0 b 1 0.9 engine\nq1 Q0 a 2 0.5 engine\nq2 Q0 c 1 0.7 engine\n")
    run = runs.read_run_file(trec, depth=1)
    assert run[["qid", "chunk_id", "rank"]].values.tolist() == [["q1", "b", 1], ["q2", "c", 1]]
    runs.write_trec(run, tmp_path / "back.trec", "ours")
    assert runs.read_run_file(tmp_path / "back.trec").equals(run)
    jsonl = tmp_path / "engine.jsonl"
    jsonl.write_text('{"qid": "q1", "chunk_id": "a", "score": 1}\n{"qid": "q1", "chunk_id": "b"}\n')
    with pytest.raises(InputError, match="engine.jsonl:2: expected a JSON object with qid, chunk_id and a numeric score"):
        runs.read_run_file(jsonl)
    (tmp_path / "bad.trec").write_text("q1 b 0.9\n")
    with pytest.raises(InputError, match="bad.trec:1: expected a TREC run line"):
        runs.read_run_file(tmp_path / "bad.trec")
    with pytest.raises(InputError, match="1 chunk ids are not in the chunk table, e.g. zz"):
        runs.check_run(runs.from_records([("q1", "zz", 1.0)]), ["q1"], {"a"}, "x.trec")


def test_positions_in_a_run_count_only_retrieved_chunks():
    run = runs.from_records([("q1", "a", 0.9), ("q1", "b", 0.5), ("q1", "c", 0.5)])
    placed = runs.positions(run, ["q1", "q2"], [["c", "zz"], ["a"]])
    assert placed[0].better.tolist() == [1, math.inf] and placed[0].tied.tolist() == [2, 1]
    assert placed[1].better.tolist() == [math.inf]  # a question the run does not list


def test_pessimistic_ranks_and_judged_ranks_in_a_full_ranking():
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1])
    assert pessimistic_ranks(scores, np.array([0])).tolist() == [4]
    assert pessimistic_ranks(scores, np.array([1, 4])).tolist() == [1, 5]
    matrix = np.array([[0.1, 0.9, 0.5], [0.7, 0.7, 0.2]])
    placed = list(judged_ranks(lambda rows: matrix[rows], 2, [np.array([2]), np.array([0])]))
    assert [p.better.tolist() for p in placed] == [[1], [0]] and [p.tied.tolist() for p in placed] == [[1], [2]]


def test_bm25_scores_rank_the_chunk_sharing_a_rare_word_first():
    chunks = ["The database stores each table in a B-tree.", "The zeppelin checkpoint copies pages back.", "Indexes make queries faster."]
    batch = bm25_scores(chunks, ["When does a zeppelin happen?", "how are indexes used", "the of and"])(slice(0, 3))
    assert int(np.argmax(batch[0])) == 1 and int(np.argmax(batch[1])) == 2 and batch[2].tolist() == [0.0, 0.0, 0.0]


def test_python_method_calls_the_users_code(tmp_path, monkeypatch):
    (tmp_path / "my_engine.py").write_text(
        "def search(questions, depth):\n"
        "    return {q['qid']: [('b', 2.0), ('a', 1.0)][:depth] for q in questions}\n"
    )
    monkeypatch.chdir(tmp_path)
    questions, corpus = Questions(["q1"], ["x"]), Corpus(["a", "b"], ["", ""])
    run = retrieve(settings("python", python="my_engine:search", depth=1), questions, corpus)
    assert run[["chunk_id", "rank"]].values.tolist() == [["b", 1]]
    with pytest.raises(InputError, match="retrieval.python nowhere:search: cannot import it"):
        retrieve(settings("python", python="nowhere:search"), questions, corpus)
    assert isinstance(run, pd.DataFrame)
