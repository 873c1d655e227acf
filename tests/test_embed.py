"""Model resolution offline (bundled weights verified by sha256) and embedding shapes."""
import hashlib
import zipfile

import numpy as np
import pytest

from retrieval_bench.retrieval import embed
from retrieval_bench.io import InputError


def test_bundled_model_is_verified_and_embeds(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = embed.resolve_model("sentence-transformers/all-MiniLM-L6-v2")
    weights = (tmp_path / "models").glob("*/model.safetensors")
    assert str(next(weights).parent) == path
    assert hashlib.sha256((tmp_path / "models" / path.split("/")[-1] / "model.safetensors").read_bytes()).hexdigest() == embed.BUNDLED_SHA256
    model = embed.load_model("sentence-transformers/all-MiniLM-L6-v2", max_seq_length=128)
    assert model.max_seq_length == 128
    vectors = embed.encode(model, ["How do I enable WAL mode?", "PRAGMA journal_mode=WAL", "bananas"], 2, progress=False)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2]  # a real model, not noise
    assert embed.resolve_model(path) == path  # a local path is used as is


def test_tampered_bundled_weights_are_refused(tmp_path, monkeypatch):
    fake_zip = tmp_path / "model.zip"
    with zipfile.ZipFile(fake_zip, "w") as archive:
        archive.writestr("model.safetensors", b"not the real weights")

    class FakeDistribution:
        def locate_file(self, name):
            return fake_zip

    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(embed.metadata, "distribution", lambda name: FakeDistribution())
    with pytest.raises(InputError, match="model.safetensors has sha256 .* expected 53aa5117"):
        embed.bundled_model_path()
    assert not list((tmp_path / "cache").glob("models/*/model.safetensors"))


def test_unknown_model_offline_names_the_model(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="embed.model 'nobody/nothing': not a local path"):
        embed.resolve_model("nobody/nothing")
