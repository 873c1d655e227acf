"""The rerank method: a real sentence-transformers CrossEncoder (a tiny BERT built here from the
bundled model's vocabulary, so nothing is downloaded) over a first stage's candidates, and its
score cache: a second run scores no pair, a torn line from a crash is ignored and cut; and the
offline recipe (docs/how-to/offline-reranker.md): a model folder, or a copied Hugging Face cache."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ONLY_DEFAULT, dvc, set_params

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import sha256_file
from retrieval_bench.core.params import DEFAULTS, load_all_params
from retrieval_bench.core.params_sections import RERANK_DEFAULT_MODEL
from retrieval_bench.embedding.model_source import folder_fingerprint
from retrieval_bench.retrieval import rerank
from retrieval_bench.retrieval.methods import needs_vectors, retrieve
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings

CHUNKS = [
    "apples and pears",
    "write ahead logging in sqlite",
    "vacuum rebuilds the file",
    "sqlite logs every write",
    "pears are green",
]
QUESTIONS = ["how does sqlite logging work", "which fruit is green"]


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory) -> str:
    """A one-layer BERT with a single output (a cross-encoder's head), random but seeded, and the
    all-MiniLM-L6-v2 tokenizer, saved as a model folder."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from retrieval_bench.embedding.model_source import bundled_model_path

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(str(bundled_model_path()))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def example():
    questions = Questions(["q1", "q2"], QUESTIONS, unit([[0.0, 1.0], [1.0, 0.0]]))
    corpus = Corpus(
        ["a", "b", "c", "d", "e"], CHUNKS, unit([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [0.8, 0.6], [0.9, 0.1]])
    )
    return questions, corpus


def settings(model, method="rerank", depth=3, **rerank_changes):
    return RetrievalSettings.from_params(
        {
            **DEFAULTS["retrieval"],
            "method": method,
            "depth": depth,
            "rerank": {
                **DEFAULTS["retrieval"]["rerank"],
                "model": model,
                "candidates": 4,
                "batch_size": 3,
                **rerank_changes,
            },
        }
    )


@pytest.fixture
def counted(monkeypatch):
    """Counts the pairs the real CrossEncoder.predict is given."""
    from sentence_transformers import CrossEncoder

    pairs = []
    original = CrossEncoder.predict

    def predict(self, inputs, *args, **kwargs):
        pairs.extend(inputs)
        return original(self, inputs, *args, **kwargs)

    monkeypatch.setattr(CrossEncoder, "predict", predict)
    return pairs


def test_rerank_scores_candidates_with_the_cross_encoder_and_caches_them(
    tiny_cross_encoder, tmp_path, monkeypatch, counted
):
    monkeypatch.chdir(tmp_path)
    questions, corpus = example()
    run = retrieve(settings(tiny_cross_encoder), questions, corpus)
    assert list(run.columns) == ["qid", "chunk_id", "rank", "score"]
    assert run.groupby("qid").size().tolist() == [3, 3]  # 4 candidates, cut to depth 3
    assert run["qid"].tolist() == ["q1"] * 3 + ["q2"] * 3
    assert len(counted) == 8  # 2 questions x 4 candidates
    # The scores are the cross-encoder's raw logits for (question, chunk); the run is in their order.
    model = rerank.load_cross_encoder(tiny_cross_encoder)
    q1 = run[run.qid == "q1"]
    expected = model.predict([(QUESTIONS[0], CHUNKS["abcde".index(c)]) for c in q1["chunk_id"]])
    np.testing.assert_allclose(q1["score"], expected, rtol=1e-5)
    assert q1["score"].is_monotonic_decreasing
    dense_candidates = set(
        retrieve(settings(None, method="dense", depth=4), questions, corpus).query("qid == 'q1'")["chunk_id"]
    )
    assert set(q1["chunk_id"]) <= dense_candidates
    lines = (tmp_path / paths.rerank_cache_of("default")).read_text().splitlines()
    assert len(lines) == 8 and set(json.loads(lines[0])) == {"key", "score"}

    counted.clear()
    again = retrieve(settings(tiny_cross_encoder), questions, corpus)
    assert counted == []  # every pair from the cache
    assert again.equals(run)
    # More candidates: only the new pairs are scored.
    retrieve(settings(tiny_cross_encoder, candidates=5), questions, corpus)
    assert len(counted) == 2
    # BM25 first stage: no vectors needed.
    assert not needs_vectors(settings(tiny_cross_encoder, first_stage="bm25"))
    assert needs_vectors(settings(tiny_cross_encoder, first_stage="hybrid"))
    bm25_first = retrieve(
        settings(tiny_cross_encoder, first_stage="bm25"),
        Questions(questions.qids, QUESTIONS),
        Corpus(corpus.chunk_ids, CHUNKS),
    )
    assert set(bm25_first.query("qid == 'q1'")["chunk_id"]) == {"b", "d"}  # the chunks sharing a word, no other


def test_torn_last_line_is_ignored_and_cut_before_the_next_append(tmp_path):
    path = tmp_path / "cache.jsonl"
    path.write_text('{"key": "a", "score": 1.5}\n{"key": "b", "sco')
    cache = rerank.ScoreCache(path)
    assert cache.scores == {"a": 1.5}
    cache.append({"c": -2.0})
    assert path.read_text() == '{"key": "a", "score": 1.5}\n{"key": "c", "score": -2.0}\n'
    assert rerank.ScoreCache(path).scores == {"a": 1.5, "c": -2.0}
    path.write_text('{"key": "a", "score": 1.5}\nnot json\n{"key": "c", "score": -2.0}\n')
    with pytest.raises(InputError, match=r"cache.jsonl:2: not a rerank cache record"):
        rerank.ScoreCache(path)


def test_score_keys_follow_the_model_files(tiny_cross_encoder, tmp_path):
    identity = folder_fingerprint(tiny_cross_encoder)
    assert rerank.pair_key(identity, "q", "c") != rerank.pair_key(identity, "q", "c ")
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in sorted(__import__("pathlib").Path(tiny_cross_encoder).iterdir()):
        (copy / path.name).write_bytes(path.read_bytes())
    assert folder_fingerprint(str(copy)) == identity  # the same model anywhere: the same scores
    (copy / "config.json").write_text((copy / "config.json").read_text().replace('"hidden_act"', '"hidden_act" ', 1))
    assert folder_fingerprint(str(copy)) != identity


def test_missing_model_is_one_line_naming_the_key(tmp_path, monkeypatch):
    params = tmp_path / "params.yaml"
    params.write_text("retrieval:\n  method: rerank\n")
    with pytest.raises(
        InputError, match=r"retrieval.method rerank needs retrieval.rerank.model.*cross-encoder/ms-marco-MiniLM-L6-v2"
    ):
        load_all_params(params)
    for body, message in (
        ("  rerank: {first_stage: ann}\n", "retrieval.rerank.first_stage must be one of dense, bm25, hybrid"),
        ("  rerank: {candidates: 0}\n", "retrieval.rerank.candidates must be a positive integer"),
        ("  rerank: {model: ''}\n", "retrieval.rerank.model must be a cross-encoder id or local path"),
    ):
        params.write_text("retrieval:\n" + body)
        with pytest.raises(InputError, match=message):
            load_all_params(params)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(
        InputError,
        match=r"retrieval.rerank.model 'nobody/no-such-cross-encoder': not a local path, not in the Hugging Face cache, and HF_HUB_OFFLINE is set",
    ):
        rerank.resolve_model("nobody/no-such-cross-encoder")


def scored_pairs(cache: Path) -> int:
    """The records of a rerank cache."""
    return sum(1 for line in cache.read_text().splitlines() if line.strip())


@pytest.mark.pipeline
def test_rerank_through_dvc_keeps_its_cache(reproduced, tiny_cross_encoder):
    set_params(
        reproduced,
        **{
            "retrieval.method": "rerank",
            "retrieval.rerank.model": tiny_cross_encoder,
            "retrieval.rerank.candidates": 20,
        },
    )
    first = dvc("repro", "retrieve", cwd=reproduced)
    n_questions = len((reproduced / "data" / "goldenset.jsonl").read_text().splitlines())
    assert f"rerank: {20 * n_questions} pairs, {20 * n_questions} scored" in first.stderr + first.stdout
    cache = reproduced / paths.rerank_cache_of("default")
    assert scored_pairs(cache) == 20 * n_questions
    assert "rerank_cache" not in (reproduced / "dvc.lock").read_text()  # no DVC output: DVC run-caches retrieve
    # A new depth re-runs retrieve, which scores nothing: the cache, no DVC output, survived the rerun.
    set_params(reproduced, **{"retrieval.depth": 10, "score.k": [1, 5, 10]})  # no k beyond the depth
    second = dvc("repro", "retrieve", cwd=reproduced)
    assert f"rerank: {20 * n_questions} pairs, 0 scored by the cross-encoder" in second.stderr + second.stdout
    assert scored_pairs(cache) == 20 * n_questions
    info = json.loads((reproduced / "data" / "panel" / "default" / "run_info.json").read_text())
    assert {key: info[key] for key in ("method", "depth")} == {"method": "rerank", "depth": 10}
    # Its size: the first stage's vectors (its search time is the leaderboard stage's to measure)
    assert info["index_bytes"] > 0 and "search_ms_per_question" not in info
    assert scored_pairs(cache) == 20 * n_questions


@pytest.mark.pipeline
def test_a_rerank_panel_system_keeps_its_own_cache(reproduced, tiny_cross_encoder):
    """Observed: a panel system with method rerank appended to data/rerank_cache.jsonl, an output
    of the retrieve stage, so DVC saw retrieve's output changed behind its back. Each system's cache
    is its own and no DVC output (.dvc/tmp/retrieval-bench/rerank/<system>.jsonl)."""
    set_params(
        reproduced,
        panel={
            **ONLY_DEFAULT,
            "rr": {
                "chunking": "default",
                "embedder": "default",
                "method": "rerank",
                "rerank": {"model": tiny_cross_encoder, "candidates": 20},
            },
        },
    )
    dvc("repro", cwd=reproduced)
    n_questions = len((reproduced / "data" / "goldenset.jsonl").read_text().splitlines())
    own = reproduced / paths.rerank_cache_of("rr")
    assert scored_pairs(own) == 20 * n_questions
    assert not (reproduced / paths.rerank_cache_of("default")).exists()  # retrieve's (dense): no score
    status = json.loads(dvc("status", "--json", cwd=reproduced).stdout or "{}")
    assert status == {}, status  # nothing changed behind DVC's back


def copy_into_hf_cache(model_folder: str, hf_home: Path, repo_id: str) -> None:
    """What `hf download <repo_id>` leaves under $HF_HOME/hub, as copied to an offline machine
    (docs/how-to/offline-reranker.md): the files in blobs/ by sha256, a snapshot folder of
    relative links to them, and refs/main naming the snapshot."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / ("ab" * 20)
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for path in sorted(Path(model_folder).iterdir()):
        blob = repo / "blobs" / sha256_file(path)
        shutil.copyfile(path, blob)
        (snapshot / path.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot.name)


@pytest.mark.pipeline
def test_the_offline_recipe_reranks_with_a_cross_encoder_from_a_copied_hf_cache(
    reproduced, tiny_cross_encoder, tmp_path, monkeypatch
):
    dense = pd.read_parquet(reproduced / "data" / "panel" / "default" / "run.parquet")
    copy_into_hf_cache(tiny_cross_encoder, tmp_path / "hf", RERANK_DEFAULT_MODEL)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    set_params(
        reproduced,
        **{
            "retrieval.method": "rerank",
            "retrieval.rerank.model": RERANK_DEFAULT_MODEL,
            "retrieval.rerank.candidates": 10,
            "retrieval.depth": 10,
            "score.k": [1, 5, 10],
        },
    )
    result = dvc("repro", "retrieve", cwd=reproduced)
    n_questions = dense["qid"].nunique()
    assert (
        f"rerank: {10 * n_questions} pairs, {10 * n_questions} scored by the cross-encoder"
        in result.stderr + result.stdout
    )
    before = dense[dense["rank"] <= 10].groupby("qid")["chunk_id"].agg(list)
    after = (
        pd.read_parquet(reproduced / "data" / "panel" / "default" / "run.parquet").groupby("qid")["chunk_id"].agg(list)
    )
    assert (before.map(sorted) == after.map(sorted)).all()  # the dense top 10 of every question ...
    assert (before != after).sum() > n_questions // 2  # ... in the cross-encoder's order


def test_an_embedding_model_or_a_head_of_two_outputs_is_refused_as_a_cross_encoder(tmp_path):
    """all-MiniLM-L6-v2 (a bi-encoder) as rerank.model loaded with a random new head: random scores,
    other ones after each cache clear; a head of 2 outputs failed on the first batch (TypeError)."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from retrieval_bench.embedding.model_source import bundled_model_path
    from retrieval_bench.retrieval.rerank import check_cross_encoder

    with pytest.raises(
        InputError, match=r"^panel\.rr\.rerank\.model '.*': not a cross-encoder \(its config.json names BertModel"
    ):
        check_cross_encoder(str(bundled_model_path()), "panel.rr.rerank.model")
    two = tmp_path / "two-outputs"
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, num_labels=2
    )
    BertForSequenceClassification(config).save_pretrained(two)
    AutoTokenizer.from_pretrained(str(bundled_model_path())).save_pretrained(two)
    with pytest.raises(InputError, match=r"a cross-encoder of 2 outputs \(num_labels\); reranking needs one"):
        check_cross_encoder(str(two))


def test_the_cross_encoder_is_checked_on_every_run_cached_scores_or_not(tmp_path, monkeypatch):
    """Checked only where a pair had to be scored, a bi-encoder's random scores already cached
    stayed on the leaderboard: the check runs before the first stage, whatever the cache holds."""
    from retrieval_bench.embedding.model_source import bundled_model_path
    from retrieval_bench.retrieval import rerank

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rerank, "load_cross_encoder", lambda *args: pytest.fail("loaded: no pair was cached"))
    monkeypatch.setattr(rerank, "FIRST_STAGES", {})  # not reached
    with pytest.raises(InputError, match=r"^retrieval\.rerank\.model '.*': not a cross-encoder"):
        retrieve(settings(str(bundled_model_path())), *example())
