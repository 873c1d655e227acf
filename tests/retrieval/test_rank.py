"""Retrieval methods and the run contract on small hand-checked examples: exact dense top-k in
blocks, BM25 through bm25s' retrieval, fusion, runs from files and from Python code, and where
judged chunks stand in a run or a full ranking."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import pessimistic_ranks

from retrieval_bench.core import run_table as run_contract
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.retrieval import flat
from retrieval_bench.retrieval import run as runs
from retrieval_bench.retrieval.bm25 import bm25_scores
from retrieval_bench.retrieval.hybrid import Top, fuse
from retrieval_bench.retrieval.methods import retrieve
from retrieval_bench.retrieval.rank import judged_ranks
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings
from tests.exact_reference import reference_scores

CHUNKS = ["apples and pears", "write ahead logging in sqlite", "vacuum rebuilds the file", "sqlite logs every write"]
QUESTIONS = ["how does sqlite logging work", "the of and"]  # the second has only stop words


def settings(method, **changes):
    return RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": method, **changes})


def unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_exact_top_k_equals_a_full_sort_whatever_the_question_block(monkeypatch):
    rng = np.random.default_rng(0)
    q, c = unit(rng.normal(size=(37, 8))), unit(rng.normal(size=(1000, 8)))
    c[500] = c[10]  # an exact tie: broken by chunk index
    full = reference_scores(q, c)
    expected = np.lexsort((np.tile(np.arange(1000), (37, 1)), -full), axis=1)[:, :25]
    monkeypatch.setattr(flat, "SEARCH_BLOCK", 8)
    indices, scores = flat.top_k(q, c, 25)
    assert (indices == expected).all()
    assert (scores == np.take_along_axis(full, expected, 1)).all()
    np.testing.assert_allclose(scores, np.take_along_axis(q @ c.T, expected, 1), rtol=1e-6)


def test_a_run_as_deep_as_the_corpus_is_a_full_sort_in_bounded_blocks(monkeypatch):
    rng = np.random.default_rng(3)
    q, c = unit(rng.normal(size=(30, 8))), unit(rng.normal(size=(500, 8)))
    c[400] = c[7]  # a tie
    monkeypatch.setattr(flat, "BLOCK_ENTRIES", 1200)  # two questions' whole rows per FAISS call
    indices, scores = flat.top_k(q, c, 500)
    full = reference_scores(q, c)
    assert (indices == np.lexsort((np.tile(np.arange(500), (30, 1)), -full), axis=1)).all()
    assert (scores == np.take_along_axis(full, indices, 1)).all()


def test_a_questions_scores_never_depend_on_its_block(monkeypatch):
    """BLAS rounds one sum differently by the call's shape and a row's place in it (OpenBLAS on AMD
    EPYC); top_k scores its candidates again in a fixed order, so a question's scores and its order
    of near-ties are the same alone, in any block and beside any other questions."""
    rng = np.random.default_rng(1)
    q, c = unit(rng.normal(size=(40, 384))), unit(rng.normal(size=(3000, 384)))
    c[1500] = c[10]  # one vector at two places: one score
    q[20] = c[10] + np.float32(1e-7) * q[20]
    alone = []
    for block in (1, 7, 4096):
        monkeypatch.setattr(flat, "SEARCH_BLOCK", block)
        alone.append(flat.top_k(q, c, 30))
    reversed_indices, reversed_scores = flat.top_k(q[::-1].copy(), c, 30)
    alone.append((reversed_indices[::-1], reversed_scores[::-1]))  # every question at another position
    full = reference_scores(q, c)
    expected = np.lexsort((np.tile(np.arange(3000), (40, 1)), -full), axis=1)[:, :30]
    for indices, scores in alone:
        assert (indices == expected).all() and (scores == np.take_along_axis(full, expected, 1)).all()
    assert full[20, 10] == full[20, 1500]


def test_a_near_tie_beyond_the_candidates_is_found_in_the_whole_row(monkeypatch):
    """With no extra candidates every question's k-th score is within the BLAS error bound of its
    last candidate (near-ties everywhere): each is scored against the whole corpus, and the result
    is still the full sort of the exact scores."""
    rng = np.random.default_rng(4)
    base = unit(rng.normal(size=(1, 64)))
    c = unit(np.repeat(base, 400, axis=0) + np.float32(1e-6) * rng.normal(size=(400, 64)))
    q = unit(np.repeat(base, 9, axis=0) + np.float32(1e-6) * rng.normal(size=(9, 64)))
    monkeypatch.setattr(flat, "EXTRA_CANDIDATES", 0)
    whole_rows = []
    monkeypatch.setattr(flat, "best_of_row", lambda row, k, real=flat.best_of_row: whole_rows.append(k) or real(row, k))
    indices, scores = flat.search(q, c, 5)
    full = reference_scores(q, c)
    expected = np.lexsort((np.tile(np.arange(400), (9, 1)), -full), axis=1)[:, :5]
    assert len(whole_rows) == 9
    assert (indices == expected).all() and (scores == np.take_along_axis(full, expected, 1)).all()


def test_the_reference_is_the_documented_sum():
    """tests.exact_reference by hand for 5 dimensions: ((p0 + p3) + (p2)) + (p1 + p4), the tree's
    order; and it is not the order of a plain loop, whose sum differs here in the last bit."""
    q = np.array([[1.0, 1.0, 1.0, 1.0, 1.0]], dtype=np.float32)
    c = np.array([[1.0, 2.0**-53, 2.0**-53, -1.0, 0.0]], dtype=np.float32)
    p = [float(a) * float(b) for a, b in zip(q[0], c[0])]
    assert reference_scores(q, c)[0, 0] == np.float32(((p[0] + p[3]) + p[2]) + (p[1] + p[4])) == 2.0**-52
    assert np.float32((((p[0] + p[1]) + p[2]) + p[3]) + p[4]) == 0.0
    assert (flat.row_scores(q, c, 0) == reference_scores(q, c)[0]).all()
    rng = np.random.default_rng(5)
    q, c = unit(rng.normal(size=(3, 384))), unit(rng.normal(size=(4, 384)))
    assert (flat.row_scores(q, c, 1) == reference_scores(q, c)[1]).all()


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


def test_a_corpus_without_one_indexable_word_retrieves_nothing_with_a_warning(tmp_path, monkeypatch, capsys):
    """Stop words, punctuation and emoji only: bm25s cannot build an index (max() of an empty
    vocabulary, a traceback); BM25 retrieves nothing, hybrid keeps the dense run, one line says why."""
    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path))
    texts = ["The and of it is, to be or not to be.", "!!! ??? 🚀🔥 --- ***"]
    questions = Questions(["q1"], ["what is it"], unit([[1.0, 0.0]]))
    corpus = Corpus(["a", "b"], texts, unit([[1.0, 0.0], [0.0, 1.0]]))
    assert retrieve(settings("bm25"), questions, corpus).empty
    assert "no chunk holds a word BM25 indexes" in capsys.readouterr().err
    hybrid = retrieve(settings("hybrid"), questions, corpus)
    assert hybrid["chunk_id"].tolist() == ["a", "b"]  # the dense run's order
    assert (bm25_scores(texts, ["what is it", "sqlite"])(slice(0, 2)) == 0).all()
    assert [p.name for p in tmp_path.joinpath("bm25").iterdir() if p.suffix != ".lock"] == []  # nothing half-built


def fused_scores(tops, weights, fusion, n_chunks=3, depth=10):
    fused = fuse(tops, weights, fusion, 60, n_chunks, depth)
    return {"xyz"[i]: s for i, s, kept in zip(fused.indices[0], fused.scores[0], fused.kept[0]) if kept}


def test_rrf_fusion_is_symmetric_and_ties_share_the_worst_rank():
    a = Top(np.array([[0, 1, 2]]), np.array([[2.0, 1.0, 1.0]]), np.array([[True, True, True]]))  # x, y, z
    b = Top(np.array([[1, 0, 0]]), np.array([[5.0, 4.0, 0.0]]), np.array([[True, True, False]]))  # y, x
    fused = fused_scores([a, b], [1.0, 1.0], "rrf")
    assert fused["x"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["y"] == pytest.approx(1 / 63 + 1 / 61)  # y ties z at ranks 2-3 in a: both take rank 3
    assert fused["z"] == pytest.approx(1 / 63)
    a_top2 = Top(a.indices, a.scores, np.array([[True, True, False]]))
    mirror = fused_scores([a_top2, b], [1.0, 1.0], "rrf")
    assert mirror["x"] == mirror["y"]  # ranks 1 and 2 against 2 and 1: exactly equal
    weighted = fused_scores([a, b], [1.0, 2.0], "weighted")
    assert weighted == pytest.approx({"x": 1.0, "y": 2.0, "z": 0.0})
    # A run of one chunk, or of chunks all scoring alike, puts them at its best (1), not at 0 with
    # the chunks it did not retrieve: weights 0 and 1 give the BM25 run's own order back.
    alone = Top(np.array([[2, 0, 1]]), np.array([[1.5, 0.0, 0.0]]), np.array([[True, False, False]]))
    assert fused_scores([a, alone], [0.0, 1.0], "weighted") == pytest.approx({"x": 0.0, "y": 0.0, "z": 1.0})
    tied = Top(np.array([[2, 1, 0]]), np.array([[0.7, 0.7, 0.0]]), np.array([[True, True, False]]))
    assert fused_scores([a, tied], [0.0, 1.0], "weighted") == pytest.approx({"x": 0.0, "y": 1.0, "z": 1.0})


def reference_fusion(component_runs: dict, weights: dict, fusion: str, rrf_k: float, depth: int) -> pd.DataFrame:
    """Fusion written plainly over run DataFrames (the definition in hybrid.py's docstring)."""
    parts = []
    for name, run in component_runs.items():
        if fusion == "rrf":
            contribution = weights[name] / (rrf_k + run.groupby(["qid", "score"])["rank"].transform("max"))
        else:
            low, high = run.groupby("qid")["score"].transform("min"), run.groupby("qid")["score"].transform("max")
            contribution = weights[name] * ((run["score"] - low) / (high - low)).where(high > low, 1.0)
        parts.append(pd.DataFrame({"qid": run["qid"], "chunk_id": run["chunk_id"], "score": contribution}))
    fused = pd.concat(parts).groupby(["qid", "chunk_id"], sort=False, as_index=False)["score"].sum()
    return run_contract.from_records(fused.itertuples(index=False, name=None), depth)


def as_run(
    indices: np.ndarray, scores: np.ndarray, keep: np.ndarray, qids: list[str], chunk_ids: list[str]
) -> pd.DataFrame:
    return runs.from_top(qids, chunk_ids, indices, scores, keep=keep)


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_array_fusion_equals_the_plain_definition_on_random_tied_runs(fusion):
    rng = np.random.default_rng(7)
    n_questions, n_chunks, width, depth = 40, 60, 25, 10
    chunk_ids = [f"c{i:02d}" for i in range(n_chunks)]
    qids = [f"q{i}" for i in range(n_questions)]
    tops = []
    for _ in range(2):
        indices = np.stack([rng.permutation(n_chunks)[:width] for _ in range(n_questions)])
        scores = -np.sort(-rng.integers(0, 6, size=(n_questions, width)).astype(np.float32), axis=1)  # many ties
        tops.append(Top(indices, scores, scores > 0))
    component_runs = {"dense": as_run(*tops[0], qids, chunk_ids), "bm25": as_run(*tops[1], qids, chunk_ids)}
    expected = reference_fusion(component_runs, {"dense": 1.0, "bm25": 0.5}, fusion, 60, depth)
    got = as_run(*fuse(tops, [1.0, 0.5], fusion, 60, n_chunks, depth), qids, chunk_ids)
    expected = expected.iloc[expected["qid"].map(qids.index).argsort(kind="stable")].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected)


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
@pytest.mark.parametrize(
    "weights", [{"dense": 1.0, "bm25": 0.3}, {"dense": 0.0, "bm25": 1.0}]
)  # the second: ties at the cut
def test_the_hybrid_method_is_the_fusion_of_its_component_runs(fusion, weights):
    """methods.retrieve with method hybrid: the dense and BM25 runs fusion_depth deep, each with its
    own weight, fused and cut to the depth (whole tie groups at the cut), as the plain definition says."""
    rng = np.random.default_rng(11)
    words = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(2, 8)))) for _ in range(80)]
    questions = Questions(
        [f"q{i}" for i in range(20)],
        [" ".join(rng.choice(words, size=3)) for _ in range(20)],
        unit(rng.normal(size=(20, 6))),
    )
    corpus = Corpus([f"c{i:02d}" for i in range(80)], texts, unit(rng.normal(size=(80, 6))))
    fusion_depth, depth = 25, 10
    components = {name: retrieve(settings(name, depth=fusion_depth), questions, corpus) for name in weights}
    expected = reference_fusion(components, weights, fusion, 60, depth)
    got = retrieve(
        settings("hybrid", depth=depth, fusion=fusion, fusion_depth=fusion_depth, weights=weights), questions, corpus
    )
    beyond = got[got["rank"] > depth]
    at_cut = got[got["rank"] == depth].set_index("qid")["score"]
    assert (beyond["score"].to_numpy() == beyond["qid"].map(at_cut).to_numpy()).all()  # only the tie at the cut
    expected = expected.iloc[expected["qid"].map(questions.qids.index).argsort(kind="stable")].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected)


def plain_run(full: np.ndarray, qids: list[str], chunk_ids: list[str], depth: int, retrieved: np.ndarray) -> dict:
    """The run contract in plain numpy: per question, the retrieved chunks scoring at least its
    depth-th best score (the whole tie group at the cut), by score then chunk id."""
    run = {}
    for q, row in enumerate(full):
        inside = np.flatnonzero(retrieved[q])
        if len(inside):
            cut = np.sort(row[inside])[::-1][min(depth, len(inside)) - 1]
            members = [i for i in inside if row[i] >= cut]
            run[qids[q]] = sorted(
                ((chunk_ids[i], round(float(row[i]), 4)) for i in members), key=lambda m: (-m[1], m[0])
            )
    return run


def as_plain(run: pd.DataFrame) -> dict:
    return {qid: list(zip(group["chunk_id"], group["score"].round(4))) for qid, group in run.groupby("qid", sort=False)}


@pytest.mark.parametrize("depth", [1, 3, 7, 12])
def test_bm25_keeps_whole_tie_groups_at_the_cut_not_bm25s_choice(depth):
    """Observed: which of the chunks tied at the cut made the BM25 run was bm25s' choice."""
    from retrieval_bench.retrieval.bm25 import tokenize

    rng = np.random.default_rng(depth)
    words = [f"w{i}" for i in range(12)]
    base = [" ".join(rng.choice(words, size=int(rng.integers(2, 5)))) for _ in range(10)]
    texts = [base[i % 10] for i in rng.permutation(60)]  # every text six times: many tied scores
    asked = [" ".join(rng.choice(words, size=2)) for _ in range(15)]
    questions, corpus = Questions([f"q{i}" for i in range(15)], asked), Corpus([f"c{i:02d}" for i in range(60)], texts)
    full = bm25_scores(texts, asked)(slice(0, 15))
    matched = np.array([[bool(set(q) & set(t)) for t in tokenize(texts)] for q in tokenize(asked)])
    expected = plain_run(full, questions.qids, corpus.chunk_ids, depth, matched & (full > 0))
    assert as_plain(retrieve(settings("bm25", depth=depth), questions, corpus)) == expected
    assert any(len(members) > depth for members in expected.values())  # ties straddle the cut


def test_a_tie_group_past_the_room_a_run_keeps_is_cut_in_chunk_order_with_a_warning(monkeypatch, capsys):
    """20,000 equal BM25 scores at the cut of each of 5,000 questions made a run of 100 million rows
    (18 GB, then a hang in score): a tie group is kept whole up to tie_room(depth) rows beyond the depth."""
    from retrieval_bench.retrieval import run as run_module
    from retrieval_bench.retrieval.bm25 import tokenize

    monkeypatch.setattr(run_module, "MIN_TIE_ROOM", 2)
    texts = ["apple pear"] * 12 + ["apple"] + ["plum"] * 3  # twelve equal scores for "pear apple"
    asked = ["pear apple", "plum"]
    questions, corpus = Questions(["q0", "q1"], asked), Corpus([f"c{i:02d}" for i in range(16)], texts)
    full = bm25_scores(texts, asked)(slice(0, 2))
    matched = np.array([[bool(set(q) & set(t)) for t in tokenize(texts)] for q in tokenize(asked)])
    whole = plain_run(full, questions.qids, corpus.chunk_ids, 3, matched & (full > 0))
    got = as_plain(retrieve(settings("bm25", depth=3), questions, corpus))
    assert len(whole["q0"]) == 12 and got["q0"] == whole["q0"][:6]  # depth 3 and 3 more, in chunk order
    assert got["q1"] == whole["q1"]  # a group within the room: whole
    warning = capsys.readouterr().err
    assert "1 of 2 questions tie at the cut of their 3 best with groups of up to 12 chunks" in warning


@pytest.mark.parametrize("depth", [1, 4, 9])
def test_dense_keeps_whole_tie_groups_at_the_cut(depth):
    rng = np.random.default_rng(depth)
    vectors = rng.integers(0, 3, size=(8, 4)).astype(np.float32)  # small integers: exact, equal dot products
    corpus_vectors = vectors[rng.integers(0, 8, size=50)]  # repeated vectors: tied scores
    question_vectors = rng.integers(0, 3, size=(10, 4)).astype(np.float32)
    questions = Questions([f"q{i}" for i in range(10)], [""] * 10, question_vectors)
    corpus = Corpus([f"c{i:02d}" for i in range(50)], [""] * 50, corpus_vectors)
    full = question_vectors @ corpus_vectors.T
    expected = plain_run(full, questions.qids, corpus.chunk_ids, depth, np.ones(full.shape, dtype=bool))
    assert as_plain(retrieve(settings("dense", depth=depth), questions, corpus)) == expected
    assert any(len(members) > depth for members in expected.values())


def test_run_files_trec_and_jsonl(tmp_path):
    trec = tmp_path / "engine.trec"
    trec.write_text("q1 Q0 b 1 0.9 engine\nq1 Q0 a 2 0.5 engine\nq2 Q0 c 1 0.7 engine\n")
    run = run_contract.read_run_file(trec, depth=1)
    assert run[["qid", "chunk_id", "rank"]].values.tolist() == [["q1", "b", 1], ["q2", "c", 1]]
    run_contract.write_trec(run, tmp_path / "back.trec", "ours")
    assert run_contract.read_run_file(tmp_path / "back.trec").equals(run)
    jsonl = tmp_path / "engine.jsonl"
    jsonl.write_text('{"qid": "q1", "chunk_id": "a", "score": 1}\n{"qid": "q1", "chunk_id": "b"}\n')
    with pytest.raises(
        InputError, match="engine.jsonl:2: expected a JSON object with qid, chunk_id and a numeric score"
    ):
        run_contract.read_run_file(jsonl)
    (tmp_path / "bad.trec").write_text("q1 b 0.9\n")
    with pytest.raises(InputError, match="bad.trec:1: expected a TREC run line"):
        run_contract.read_run_file(tmp_path / "bad.trec")
    with pytest.raises(InputError, match="1 chunk ids are not in the chunk table, e.g. 'zz'"):
        run_contract.check_run(run_contract.from_records([("q1", "zz", 1.0)]), ["q1"], {"a"}, "x.trec")


def test_run_file_scores_and_qids_read_as_trec_eval_reads_them(tmp_path, capsys):
    """A score of 400 digits or 5,000 (OverflowError, ValueError: tracebacks); `1_000` and
    Arabic-Indic digits (float() reads 1000 and 12, trec_eval's atof 1 and 0); a byte-order mark
    inside the file (two files joined by cat): its line's qid became unknown and the result was
    dropped unsaid; a qid of no golden question (left out, said)."""
    for score, message in [
        ("1" + "0" * 400, "score must be a finite number, got 1000000000"),
        ("1" + "0" * 5000, "invalid JSON: Exceeds the limit"),
    ]:
        (tmp_path / "big.jsonl").write_text(f'{{"qid": "q1", "chunk_id": "a", "score": {score}}}\n')
        with pytest.raises(InputError, match=f"big.jsonl:1: .*{message}"):
            run_contract.read_run_file(tmp_path / "big.jsonl")
    for score in ("1_000", "١٢", "0x10", "infx"):
        (tmp_path / "odd.trec").write_text(f"q1 Q0 a 1 {score} x\n")
        with pytest.raises(InputError, match=r"odd.trec:1: score must be a (finite )?number"):
            run_contract.read_run_file(tmp_path / "odd.trec")
    (tmp_path / "ok.trec").write_text("q1 Q0 a 1 -1.5e-3 x\nq1 Q0 b 2 .5 x\nq1 Q0 c 3 +2. x\n")
    assert run_contract.read_run_file(tmp_path / "ok.trec")["score"].tolist() == [2.0, 0.5, -0.0015]
    (tmp_path / "cat.trec").write_bytes("\ufeffq1 Q0 a 1 3.0 x\n\ufeffq3 Q0 b 1 9.0 x\nzz Q0 c 1 1.0 x\n".encode())
    run = run_contract.read_run_file(tmp_path / "cat.trec")
    assert run["qid"].tolist() == ["q1", "q3", "zz"]
    kept = run_contract.check_run(run, ["q1", "q3"], {"a", "b", "c"}, "cat.trec")
    assert kept["qid"].tolist() == ["q1", "q3"]
    assert "warning: cat.trec: 1 results name no question of the golden set (1 qids, e.g. 'zz'): left out" in (
        capsys.readouterr().err
    )


def test_positions_in_a_run_count_only_retrieved_chunks():
    run = run_contract.from_records([("q1", "a", 0.9), ("q1", "b", 0.5), ("q1", "c", 0.5)])
    placed = run_contract.positions(run, ["q1", "q2"], [["c", "zz"], ["a"]])
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
    chunks = [
        "The database stores each table in a B-tree.",
        "The zeppelin checkpoint copies pages back.",
        "Indexes make queries faster.",
    ]
    batch = bm25_scores(chunks, ["When does a zeppelin happen?", "how are indexes used", "the of and"])(slice(0, 3))
    assert int(np.argmax(batch[0])) == 1 and int(np.argmax(batch[1])) == 2 and batch[2].tolist() == [0.0, 0.0, 0.0]


def test_python_method_calls_the_users_code(tmp_path, monkeypatch):
    (tmp_path / "my_engine.py").write_text(
        "def search(questions, depth):\n    return {q['qid']: [('b', 2.0), ('a', 1.0)][:depth] for q in questions}\n"
    )
    monkeypatch.chdir(tmp_path)
    questions, corpus = Questions(["q1"], ["x"]), Corpus(["a", "b"], ["", ""])
    run = retrieve(settings("python", python="my_engine:search", depth=1), questions, corpus)
    assert run[["chunk_id", "rank"]].values.tolist() == [["b", 1]]
    with pytest.raises(InputError, match="retrieval.python nowhere:search: cannot import it"):
        retrieve(settings("python", python="nowhere:search"), questions, corpus)
    assert isinstance(run, pd.DataFrame)


def test_the_numba_backend_of_large_corpora_gives_the_numpy_backends_scores(monkeypatch, tmp_path):
    from retrieval_bench.retrieval import bm25

    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path))
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 30)))) for _ in range(400)]
    asked = [" ".join(rng.choice(words, size=4)) for _ in range(30)] + ["the of and"]
    questions = Questions([f"q{i}" for i in range(len(asked))], asked)
    corpus = Corpus([f"c{i}" for i in range(len(texts))], texts)
    backends = []

    import bm25s  # bm25.py imports it where it builds an index

    class Recorded(bm25s.BM25):  # the backend each index is really built with
        def __init__(self, *args, **kwargs):
            backends.append(kwargs.get("backend"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(bm25s, "BM25", Recorded)
    numpy_run = retrieve(settings("bm25", depth="all"), questions, corpus)
    monkeypatch.setattr(bm25, "NUMBA_FROM_CHUNKS", len(texts))
    numba_run = retrieve(settings("bm25", depth="all"), questions, corpus)
    assert backends == ["numpy", "numba"]  # built and searched, then loaded from the cache for numba
    assert len(numba_run) == len(numpy_run) > 0 and scores_by_pair(numba_run) == scores_by_pair(numpy_run)


def test_numba_threads_are_the_usable_cores_within_numbas_limit(monkeypatch):
    import numba

    from retrieval_bench.retrieval import bm25

    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)
    assert bm25.numba_threads() == 1  # numba refuses more threads than it started with
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 512)
    monkeypatch.delattr(bm25.os, "sched_getaffinity", raising=False)  # macOS has no CPU affinity
    monkeypatch.setattr(bm25.os, "cpu_count", lambda: 3)
    assert bm25.numba_threads() == 3


def scores_by_pair(run: pd.DataFrame) -> dict:
    """Every retrieved (question, chunk) with its score: equal scores may come in another order."""
    return dict(zip(zip(run.qid, run.chunk_id), run.score.round(5)))
