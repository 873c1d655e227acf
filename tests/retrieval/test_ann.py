"""The ann method (FAISS HNSW, IVF-Flat, IVF-PQ): indexes built once and cached by content, searched
with their query-time parameters, and the run's recall against exact search (ann_recall@k); the
blocked exact top-k it is measured against, on ties across blocks."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import dvc, git, set_params

from retrieval_bench.core import locking
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS, load_all_params
from retrieval_bench.evaluation.score.scoring import ann_recall_metrics
from retrieval_bench.retrieval import ann, flat
from retrieval_bench.retrieval.methods import needs_vectors, retrieve, run_info
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.run_info import recall_curve
from retrieval_bench.retrieval.settings import RetrievalSettings

pytest.importorskip("faiss")


def unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    corpus = Corpus([f"c{i}" for i in range(2000)], [""] * 2000, unit(rng.normal(size=(2000, 32))))
    questions = Questions([f"q{i}" for i in range(40)], [""] * 40, unit(rng.normal(size=(40, 32))))
    return questions, corpus


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "ann"


def files(folder) -> dict[str, tuple[int, int]]:
    """name -> (inode, mtime_ns) of each index in `folder` (not the locks beside them): a rewrite
    (even by an atomic rename of the same bytes) changes the inode, an in-place write the time."""
    return {path.name: (path.stat().st_ino, path.stat().st_mtime_ns) for path in sorted(folder.glob("*.faiss"))}


def settings(depth=20, method="ann", **ann_changes):
    return RetrievalSettings.from_params(
        {
            **DEFAULTS["retrieval"],
            "method": method,
            "depth": depth,
            "ann": {**DEFAULTS["retrieval"]["ann"], "nlist": 16, "nprobe": 4, "pq_m": 8, **ann_changes},
        }
    )


@pytest.mark.parametrize("depth", [1, 7, 64, 130])
@pytest.mark.parametrize("block", [8, 5, 4096])
def test_exact_top_k_with_many_ties_equals_a_full_sort(monkeypatch, depth, block):
    rng = np.random.default_rng(depth)
    # Small whole numbers: every product is exact in any order of sums, and ties are everywhere.
    q = rng.integers(0, 3, size=(23, 4)).astype(np.float32)
    c = rng.integers(0, 3, size=(700, 4)).astype(np.float32)
    full = q @ c.T
    monkeypatch.setattr(flat, "SEARCH_BLOCK", block)
    indices, scores = flat.top_k(q, c, depth)
    expected = np.lexsort((np.tile(np.arange(700), (23, 1)), -full), axis=1)[:, :depth]
    assert (indices == expected).all()
    assert (scores == np.take_along_axis(full, expected, 1)).all()


def test_recall_curve_by_hand():
    # Exact search's scores of chunks 0..3 (q1) and 4..7 (q2); what the approximate run found, by
    # the exact score of each chunk it put at each rank (chunk 9 scores 0.1; NaN: an empty rank).
    exact = np.array([[0.9, 0.8, 0.7, 0.6], [0.9, 0.8, 0.7, 0.6]])
    found = np.array([[0.8, 0.9, 0.1, 0.7], [0.9, np.nan, np.nan, np.nan]])
    # q1: k=1 {1}/{0} 0, k=2 {1,0} 1, k=3 {1,0,9}/{0,1,2} 2/3, k=4 {1,0,9,2}/{0..3} 3/4
    # q2: k=1 1, k=2 1/2, k=3 1/3, k=4 1/4
    assert recall_curve(found, exact) == pytest.approx([0.5, 0.75, 0.5, 0.5])
    # ties at the cut: chunks scoring the k-th best are in the exact top k, whichever exact search listed
    tied = np.array([[0.5, 0.5, 0.5, 0.2]])
    assert recall_curve(np.array([[0.5, 0.5, 0.2, 0.5]]), tied) == pytest.approx([1.0, 1.0, 2 / 3, 1.0])


def test_an_exhaustive_search_that_orders_ties_otherwise_has_recall_one():
    """Twenty chunks stored twice: exact search lists the first copy of each tie, a run the second
    (as a store ordering ties by id does). ann_recall@1 was 0 though both searches were exact."""
    from retrieval_bench.retrieval.run import Corpus, Questions
    from retrieval_bench.retrieval.run_info import recall_against_exact

    rng = np.random.default_rng(4)
    base = rng.normal(size=(20, 16)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    ids = [f"z{i}" for i in range(20)] + [f"a{i}" for i in range(20)]
    corpus = Corpus(ids, [""] * 40, np.vstack([base, base]))
    questions = Questions(["q0", "q1"], ["", ""], base[[3, 11]] + 0.01)
    scores = questions.vectors @ corpus.vectors.T
    rows = []
    for i, qid in enumerate(questions.qids):
        ranked = sorted(range(40), key=lambda chunk: (-scores[i, chunk], ids[chunk]))[:6]  # ties by id: a* first
        rows += [(qid, ids[chunk], rank, float(scores[i, chunk])) for rank, chunk in enumerate(ranked, 1)]
    run = pd.DataFrame(rows, columns=["qid", "chunk_id", "rank", "score"])
    assert recall_against_exact(questions, corpus, run, 6) == {str(k): 1.0 for k in range(1, 7)}


@pytest.mark.parametrize("index", ["hnsw", "ivf-flat", "ivf-pq"])
def test_each_index_is_built_once_and_searched_with_its_query_parameters(data, cache, index, tmp_path, builds):
    questions, corpus = data
    first = retrieve(settings(index=index), questions, corpus)
    assert list(first.columns) == ["qid", "chunk_id", "rank", "score"] and first.groupby("qid").size().max() == 20
    built = files(cache)
    assert len(built) == 1 and next(iter(built)).startswith(index) and builds == [index]
    again = retrieve(settings(index=index), questions, corpus)
    assert again.equals(first)  # deterministic, from the cached index
    assert files(cache) == built and builds == [index]  # read, not rebuilt nor rewritten
    # A query-time parameter reuses the index; a build parameter builds another one.
    query_change = {"hnsw": {"ef_search": 400}, "ivf-flat": {"nprobe": 16}, "ivf-pq": {"nprobe": 16}}[index]
    wider = retrieve(settings(index=index, **query_change), questions, corpus)
    assert files(cache) == built and builds == [index]
    build_change = {"hnsw": {"hnsw_m": 8}, "ivf-flat": {"nlist": 8, "nprobe": 4}, "ivf-pq": {"pq_bits": 6}}[index]
    retrieve(settings(index=index, **build_change), questions, corpus)
    after = files(cache)
    assert len(after) == 2 and builds == [index, index] and built.items() <= after.items()  # the first one untouched
    # Recall against exact search, every k up to the depth; searching wider never loses much.
    narrow_info = run_info(settings(index=index), questions, corpus, first)
    wide_info = run_info(settings(index=index, **query_change), questions, corpus, wider)
    assert narrow_info["method"] == "ann" and list(narrow_info["ann_recall"]) == [str(k) for k in range(1, 21)]
    assert all(0 <= value <= 1 for value in narrow_info["ann_recall"].values())
    if index != "ivf-pq":  # compressed vectors: recall stays below 1 whatever the probes
        assert wide_info["ann_recall"]["10"] >= 0.95
    assert wide_info["ann_recall"]["10"] >= narrow_info["ann_recall"]["10"] - 0.05
    path = tmp_path / "run_info.json"
    path.write_text(json.dumps(wide_info))
    assert ann_recall_metrics(path, [20, 1, 50]) == {
        "ann_recall@1": wide_info["ann_recall"]["1"],
        "ann_recall@20": wide_info["ann_recall"]["20"],
    }
    assert ann_recall_metrics(tmp_path / "absent.json", [1]) == {}


def test_exhaustive_hnsw_equals_exact_dense(data):
    questions, corpus = data
    approximate = retrieve(settings(ef_search=2000), questions, corpus)
    exact = retrieve(settings(method="dense"), questions, corpus)
    assert (approximate["chunk_id"] == exact["chunk_id"]).all()
    np.testing.assert_allclose(approximate["score"], exact["score"], rtol=1e-5)
    info = run_info(settings(ef_search=2000), questions, corpus, approximate)
    assert set(info["ann_recall"].values()) == {1.0}
    dense_info = run_info(settings(method="dense"), questions, corpus, exact)
    assert {key: dense_info[key] for key in ("method", "depth")} == {"method": "dense", "depth": 20}
    assert "ann_recall" not in dense_info  # exact search reports no recall against itself
    assert dense_info["index_bytes"] == corpus.vectors.nbytes and dense_info["n_chunks"] == len(corpus.chunk_ids)
    assert needs_vectors(settings())


def test_a_damaged_cached_index_is_rebuilt(data, cache):
    questions, corpus = data
    first = retrieve(settings(), questions, corpus)
    path = next(cache.glob("*.faiss"))
    path.write_bytes(b"not an index")
    assert retrieve(settings(), questions, corpus).equals(first)
    assert path.stat().st_size > 1000


def test_bad_ann_params_are_one_line_naming_the_key(data, tmp_path):
    questions, corpus = data
    with pytest.raises(InputError, match=r"retrieval.ann.nlist 4000 is more than the 2000 chunks"):
        retrieve(settings(index="ivf-flat", nlist=4000, nprobe=4), questions, corpus)
    with pytest.raises(InputError, match=r"retrieval.ann.pq_m 7 must divide the vector dimension 32"):
        retrieve(settings(index="ivf-pq", pq_m=7), questions, corpus)
    params = tmp_path / "params.yaml"
    for body, message in (
        ("  ann: {index: flat}\n", "retrieval.ann.index must be one of hnsw, ivf-flat, ivf-pq, got 'flat'"),
        ("  ann: {nlist: 8, nprobe: 16}\n", r"retrieval.ann.nprobe \(16\) cannot exceed retrieval.ann.nlist \(8\)"),
        ("  ann: {ef_search: 0}\n", "retrieval.ann.ef_search must be between 1 and 32768, got 0"),
        ("  ann: {pq_bits: 20}\n", "retrieval.ann.pq_bits must be between 1 and 16, got 20"),
        ("  ann: {size: 3}\n", "unknown key params.retrieval.ann.size"),
    ):
        params.write_text("retrieval:\n  method: ann\n" + body)
        with pytest.raises(InputError, match=message):
            load_all_params(params)


@pytest.mark.pipeline
def test_ef_search_change_reruns_retrieve_and_reuses_the_index(reproduced, cache):
    set_params(reproduced, **{"retrieval.method": "ann"})
    dvc("repro", "retrieve", cwd=reproduced)
    info = json.loads((reproduced / "data" / "panel" / "default" / "run_info.json").read_text())
    assert info["method"] == "ann" and info["index"] == "hnsw" and 0.9 <= info["ann_recall"]["10"] <= 1
    git("add", "-A", cwd=reproduced)
    git("commit", "-qm", "hnsw", cwd=reproduced)
    built = files(cache)
    assert len(built) == 1
    set_params(reproduced, **{"retrieval.ann.ef_search": 8})
    output = dvc("repro", "retrieve", cwd=reproduced).stdout
    assert {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")} == {
        "check_params",
        "retrieve",
    }
    assert (
        json.loads((reproduced / "data" / "panel" / "default" / "run_info.json").read_text())["ann_recall"]["10"]
        <= info["ann_recall"]["10"]
    )
    assert files(cache) == built  # searched with the new ef_search, not rebuilt: the same file, same inode and time
    dvc("repro", cwd=reproduced)
    metrics = json.loads((reproduced / "metrics" / "panel" / "default" / "metrics.json").read_text())
    curve = json.loads((reproduced / "data" / "panel" / "default" / "run_info.json").read_text())["ann_recall"]
    assert {key: value for key, value in metrics.items() if key.startswith("ann_recall@")} == {
        f"ann_recall@{k}": curve[str(k)] for k in (1, 3, 5, 10, 20)
    }  # score.k of the sample params


def test_hnsw_builds_are_deterministic(data, tmp_path):
    faiss = pytest.importorskip("faiss")
    _, corpus = data
    one, _, _ = ann.load_or_build(corpus.vectors, settings().ann, tmp_path / "one")
    two, _, _ = ann.load_or_build(corpus.vectors, settings().ann, tmp_path / "two")
    assert (
        faiss.serialize_index(one) == faiss.serialize_index(two)
    ).all()  # one build thread: the same graph every time


def test_readers_of_a_cached_index_share_its_lock_and_a_build_holds_it_alone(data, cache, monkeypatch, builds):
    """Two runs reading one cached index never wait for each other, even with
    RETRIEVAL_BENCH_LOCK_WAIT=0; a run finding the index being built (its lock held alone) says so
    in one line and exits rather than wait."""
    questions, corpus = data
    first = retrieve(settings(), questions, corpus)
    lock = cache / f".{next(cache.glob('*.faiss')).name}.lock"
    monkeypatch.setenv("RETRIEVAL_BENCH_LOCK_WAIT", "0")
    with locking.shared(lock):  # another run reading the index
        assert retrieve(settings(), questions, corpus).equals(first)
    with locking.exclusive(lock), pytest.raises(InputError, match="building the ANN index") as refused:
        retrieve(settings(), questions, corpus)
    assert "\n" not in str(refused.value) and builds == ["hnsw"]


def test_a_killed_index_write_leaves_nothing_a_rerun_does_not_remove(data, cache):
    """Temporary files of index writes that died (SIGKILL mid-write) are deleted by the next build
    or load, this index's and another's; a live writer's (its lock held) is kept."""
    questions, corpus = data
    first = retrieve(settings(), questions, corpus)
    index = next(cache.glob("*.faiss"))
    own = cache / f".{index.name}.k1ll3d.tmp"
    other = cache / ".ivf-flat-0123456789abcdef.faiss.d34d.tmp"
    live = cache / ".hnsw-fedcba9876543210.faiss.l1ve.tmp"
    for leftover in (own, other, live):
        leftover.write_bytes(b"half an index")
    with locking.exclusive(cache / f".{live.name.split('.faiss.')[0][1:]}.faiss.lock"):  # that writer is alive
        assert retrieve(settings(), questions, corpus).equals(first)
    assert not own.exists() and not other.exists() and live.exists()
    assert retrieve(settings(), questions, corpus).equals(first)  # its writer is gone now
    assert sorted(p.name for p in cache.iterdir() if p.suffix == ".tmp") == []
