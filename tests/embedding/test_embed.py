"""Model resolution offline (bundled weights verified by sha256) and embedding shapes."""

import hashlib
import json
import zipfile

import numpy as np
import pytest

from retrieval_bench.core.errors import InputError
from retrieval_bench.embedding import embed, model_source
from retrieval_bench.embedding.embed import EmbedProgress
from retrieval_bench.embedding.settings import EmbedSettings


def test_bundled_model_is_verified_and_embeds(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = model_source.resolve_model("sentence-transformers/all-MiniLM-L6-v2")
    weights = (tmp_path / "models").glob("*/model.safetensors")
    assert str(next(weights).parent) == path
    assert (
        hashlib.sha256((tmp_path / "models" / path.split("/")[-1] / "model.safetensors").read_bytes()).hexdigest()
        == model_source.BUNDLED_SHA256
    )
    model = embed.load_model("sentence-transformers/all-MiniLM-L6-v2", max_seq_length=128)
    assert model.max_seq_length == 128
    vectors = embed.encode(
        model, ["How do I enable WAL mode?", "PRAGMA journal_mode=WAL", "bananas"], 2, progress=False
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2]  # a real model, not noise
    assert model_source.resolve_model(path) == path  # a local path is used as is


def test_tampered_bundled_weights_are_refused(tmp_path, monkeypatch):
    fake_zip = tmp_path / "model.zip"
    with zipfile.ZipFile(fake_zip, "w") as archive:
        archive.writestr("model.safetensors", b"not the real weights")

    class FakeDistribution:
        def locate_file(self, name):
            return fake_zip

    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(model_source.metadata, "distribution", lambda name: FakeDistribution())
    with pytest.raises(InputError, match="model.safetensors has sha256 .* expected 53aa5117"):
        model_source.bundled_model_path()
    assert not list((tmp_path / "cache").glob("models/*/model.safetensors"))


def test_unknown_model_offline_names_the_model(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="embed.model 'nobody/nothing': not a local path"):
        model_source.resolve_model("nobody/nothing")


def test_an_empty_text_list_loads_no_encoder(tmp_path, monkeypatch):
    """No texts: the dimension comes from the model on the CPU, no encoder is loaded (nor an
    export built)."""
    from retrieval_bench.core.params import DEFAULTS

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_encoder(*args, **kwargs):
        raise AssertionError("an encoder was loaded for no texts")

    monkeypatch.setattr(embed, "load_encoder", no_encoder)
    for backend in ("torch", "onnx"):
        vectors, stats = embed.embed_texts(
            [],
            EmbedSettings.from_params({**DEFAULTS["embed"], "backend": backend}),
            "",
            tmp_path / backend,
            progress=EmbedProgress(bar=False),
        )
        assert vectors.shape == (0, 384) and vectors.dtype == np.float32
        assert (stats.texts, stats.embedded, stats.encoder) == (0, 0, None)
    assert embed.embedding_dimension(model_source.resolve_model(DEFAULTS["embed"]["model"])) == 384


def test_a_model_saved_now_declares_its_dimension_and_an_undeclared_one_is_loaded_once(tmp_path, monkeypatch):
    """The installed sentence-transformers writes {"embedding_dimension", "pooling_mode"}: read, no
    model load. A model declaring no single width (two pooling modes) is loaded once, by its encoder."""
    import sentence_transformers

    from retrieval_bench.core.params import DEFAULTS

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    saved = tmp_path / "saved"
    embed.load_model(DEFAULTS["embed"]["model"]).save(str(saved))
    pooling = saved / "1_Pooling" / "config.json"
    assert {"embedding_dimension", "pooling_mode"} <= set(json.loads(pooling.read_text()))
    assert embed._declared_dimension(saved) == 384
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()), "pooling_mode": ["mean", "max"]}))
    assert embed._declared_dimension(saved) is None
    loads = []

    class Counted(sentence_transformers.SentenceTransformer):
        def __init__(self, *args, **kwargs):
            loads.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", Counted)
    settings = EmbedSettings.from_params({**DEFAULTS["embed"], "model": str(saved)})
    vectors, _ = embed.embed_texts(
        ["a text", "another"], settings, "", tmp_path / "cache", progress=EmbedProgress(bar=False)
    )
    assert vectors.shape == (2, 768) and loads == [str(saved)]


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_the_model_is_resolved_once_per_call_and_each_engine_gets_only_what_the_cache_lacks(
    engine, tmp_path, monkeypatch
):
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.embedding import embed_ray

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    resolved, asked = [], []
    resolve = embed.resolve_model

    def counted(model, *args, **kwargs):
        resolved.append(model)
        return resolve(model, *args, **kwargs)

    def batches(items):  # what either engine yields: (keys, vectors), here without a model
        asked.append((engine, sorted(text for _, text in items)))
        yield [key for key, _ in items], np.ones((len(items), 384), np.float32)

    class FakeEncoder:
        description = "fake encoder"

        def batches(self, items, batch_size):
            return batches(items)

    monkeypatch.setattr(embed, "resolve_model", counted)
    monkeypatch.setattr(embed, "load_encoder", lambda *args, **kwargs: FakeEncoder())
    monkeypatch.setattr(embed_ray, "embed_batches", lambda items, *args: batches(items))
    settings = EmbedSettings.from_params({**DEFAULTS["embed"], "engine": engine})
    vectors, stats = embed.embed_texts(
        ["a", "bb", "a"], settings, "", tmp_path / "cache", progress=EmbedProgress(bar=False)
    )
    assert resolved == [settings.model] and asked == [(engine, ["a", "bb"])]  # the engine settings name, each text once
    assert vectors.shape == (3, 384) and (stats.unique, stats.embedded) == (2, 2)
    assert stats.encoder == ("fake encoder" if engine == "local" else embed_ray.describe(settings, 2))
    _, stats = embed.embed_texts(
        ["a", "bb", "ccc"], settings, "", tmp_path / "cache", progress=EmbedProgress(bar=False)
    )
    assert stats.cached == 2 and asked[1:] == [(engine, ["ccc"])]  # only what the cache lacks


def test_a_folder_built_by_racing_processes_is_built_once_and_never_deleted(tmp_path):
    """Eight builders of one folder at once (threads, each with its own lock descriptor, as
    processes would have): one builds it, the others wait and use it; an existing valid folder is
    kept as it is, an invalid one replaced."""
    import threading
    import time

    from retrieval_bench.core.locking import build_once

    target = tmp_path / "models" / "a-model"
    built = []

    def build(staging):
        built.append(staging)
        time.sleep(0.3)  # long enough for the others to find it missing
        (staging / "weights").write_text("w")

    def valid(folder):
        return (folder / "weights").is_file()

    start = threading.Barrier(8)
    results = []

    def racer():
        start.wait()
        results.append(build_once(target, build, valid, what=f"building {target}"))

    threads = [threading.Thread(target=racer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1 and sorted(results) == [False] * 7 + [True]
    inode = target.stat().st_ino
    assert (
        build_once(target, build, valid, what="building") is False and target.stat().st_ino == inode
    )  # kept, not rebuilt
    assert sorted(p.name for p in target.parent.iterdir()) == [".a-model.lock", "a-model"]  # no staging left

    (target / "weights").unlink()  # damaged: replaced whole
    (target / "junk").write_text("j")
    assert build_once(target, build, valid, what="building") is True and sorted(p.name for p in target.iterdir()) == [
        "weights"
    ]
    assert sorted(p.name for p in target.parent.iterdir()) == [".a-model.lock", "a-model"]

    def fails(staging):
        (staging / "weights").write_text("half")
        raise InputError("refused")

    (target / "weights").unlink()
    with pytest.raises(InputError, match="refused"):
        build_once(target, fails, valid, what="building")
    assert sorted(p.name for p in target.parent.iterdir()) == [
        ".a-model.lock",
        "a-model",
    ]  # nothing half-built in place

    killed = target.parent / ".a-model.x1y2z3.tmp"  # the staging folder of a build killed by SIGKILL
    (killed / "half").mkdir(parents=True)
    other = target.parent / ".b-model.k.tmp"  # another target's: not this build's to remove
    other.mkdir()
    assert build_once(target, build, valid, what="building") is True
    assert not killed.exists() and other.exists()


def test_texts_longer_than_the_models_limit_are_counted_and_said_even_from_the_cache(tmp_path, monkeypatch):
    """sentence-transformers embeds a text from its first max_seq_length tokens and drops the rest
    without a word: the embed line says how many texts it cut, counted as transformers' own
    tokenizer counts them (special tokens included), whether the vectors were embedded or cached."""
    from transformers import AutoTokenizer

    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.embedding.token_limit import token_limit

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = model_source.resolve_model("sentence-transformers/all-MiniLM-L6-v2")
    texts = ["WAL mode lets readers run beside one writer.", "checkpoint " * 300, "東京は日本の首都です。" * 30]
    independent = [len(ids) > 256 for ids in AutoTokenizer.from_pretrained(path)(texts)["input_ids"]]
    limit = token_limit(texts, path, None)
    assert limit is not None and (limit.cut, limit.limit) == (sum(independent), 256) == (2, 256)
    assert token_limit(texts, path, 64).line("chunk").startswith("2 of 3 distinct chunks are cut at the 64 tokens")
    assert token_limit(texts, path, 1024).cut == sum(
        len(ids) > 1024 for ids in AutoTokenizer.from_pretrained(path)(texts)["input_ids"]
    )

    monkeypatch.setattr(embed, "load_encoder", lambda *args, **kwargs: _Ones())
    settings = EmbedSettings.from_params(DEFAULTS["embed"])
    for _ in range(2):  # embedded, then from the cache
        _, stats = embed.embed_texts(texts, settings, "", tmp_path / "cache", progress=EmbedProgress(bar=False))
        assert "warning: 2 of 3 distinct chunks are longer than the model's 256-token limit" in stats.line("chunk")
    assert stats.line("chunk").endswith("shorter chunks (a chunking's chars), or a model that reads more")
    assert stats.line("question").endswith("only: a model that reads more")  # no chunking makes a question shorter
    _, short = embed.embed_texts(texts[:1], settings, "", tmp_path / "cache", progress=EmbedProgress(bar=False))
    assert "warning" not in short.line("chunk")


class _Ones:
    description = "ones"

    def batches(self, items, batch_size):
        yield [key for key, _ in items], np.ones((len(items), 384), np.float32) / np.sqrt(384)
