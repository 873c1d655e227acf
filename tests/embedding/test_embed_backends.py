"""The onnx and openvino backends against plain sentence-transformers: the same vectors in fp32,
close ones in bf16/int8; the export built once, reused, rebuilt when corrupt; no OpenVINO
telemetry; a cached vector is never served to another backend; bad settings name their key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import tool_env

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS, load_all_params
from retrieval_bench.embedding import onnx_export
from retrieval_bench.embedding.embed import QUIET, EmbedProgress, embed_texts, load_model
from retrieval_bench.embedding.settings import EmbedSettings

TEXTS = [
    "How do I enable WAL mode?",
    "PRAGMA journal_mode=WAL switches the database to write-ahead logging, which lets readers run "
    "concurrently with a writer; a checkpoint later copies the log back into the database file.",
    "bananas",
    "An in-memory database exists only as long as the connection that opened it.",
    "AUTOINCREMENT prevents the reuse of ROWIDs from previously deleted rows.",
]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """A private cache root for the exports (and the extracted bundled model) of this module."""
    root = tmp_path_factory.mktemp("rb-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETRIEVAL_BENCH_CACHE", str(root))
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield root / "exports"


@pytest.fixture(scope="module")
def plain():
    return load_model(DEFAULTS["embed"]["model"]).encode(TEXTS, batch_size=2, normalize_embeddings=True)


def settings(**changes) -> EmbedSettings:
    return EmbedSettings.from_params({**DEFAULTS["embed"], "batch_size": 2, **changes})


def embed(tmp_path, log=None, **changes):
    return embed_texts(
        TEXTS, settings(**changes), "", tmp_path / "cache", progress=EmbedProgress(bar=False, log=log) if log else QUIET
    )


def test_torch_fp32_gives_plain_sentence_transformers_vectors(exports, plain, tmp_path):
    vectors, stats = embed(tmp_path)
    assert stats.embedded == len(TEXTS) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, plain, atol=1e-6)
    again, stats = embed(tmp_path)
    assert stats.embedded == 0 and stats.cached == len(TEXTS)
    np.testing.assert_array_equal(again, vectors)  # served from the cache, bit for bit


@pytest.mark.parametrize(
    ("changes", "atol", "min_cosine"),
    [
        ({"backend": "onnx"}, 1e-5, 0.99999),
        ({"backend": "openvino"}, 1e-4, 0.99999),
        ({"backend": "openvino", "precision": "bf16"}, None, 0.999),
        ({"backend": "torch", "precision": "bf16"}, None, 0.999),
        ({"backend": "onnx", "quantize": "int8"}, None, 0.95),
    ],
    ids=["onnx", "openvino", "openvino-bf16", "torch-bf16", "onnx-int8"],
)
def test_each_backend_against_plain_sentence_transformers(exports, plain, tmp_path, changes, atol, min_cosine):
    vectors, stats = embed(tmp_path, **changes)
    assert stats.embedded == len(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (vectors * plain).sum(axis=1).min() >= min_cosine
    if atol is not None:
        np.testing.assert_allclose(vectors, plain, atol=atol)


def test_the_export_is_built_once_verified_and_rebuilt_when_corrupt(exports, plain, tmp_path):
    lines = []
    embed(tmp_path / "a", log=lines.append, backend="onnx")  # built by an earlier test or now
    folders = sorted(exports.glob("onnx-*"))
    folder = next(f for f in folders if not f.name.startswith("onnx-int8"))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["inputs"]["model"].startswith("sha256:") and manifest["inputs"]["opset"] == onnx_export.OPSET
    lines.clear()
    embed(tmp_path / "b", log=lines.append, backend="onnx")
    assert not any("export" in line for line in lines)  # reused as it is

    model = folder / "model.onnx"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])  # a torn copy
    vectors, _ = embed(tmp_path / "c", log=lines.append, backend="onnx")
    assert any("does not match its manifest; rebuilding it" in line for line in lines)
    assert onnx_export.verified(folder)
    np.testing.assert_allclose(vectors, plain, atol=1e-5)


def test_a_vector_cached_under_other_settings_is_never_served(exports, tmp_path):
    cache = tmp_path / "shared-cache"
    first, stats = embed_texts(TEXTS, settings(), "", cache, progress=EmbedProgress(bar=False))
    assert stats.embedded == len(TEXTS)
    for changes, prompt in (
        ({"backend": "onnx"}, ""),
        ({}, "query: "),
        ({"max_seq_length": 8}, ""),
        ({"precision": "bf16"}, ""),
    ):
        vectors, stats = embed_texts(TEXTS, settings(**changes), prompt, cache, progress=QUIET)
        assert (stats.cached, stats.embedded) == (0, len(TEXTS)), (changes, prompt)
    # another model: the same files with one changed byte in its config
    from retrieval_bench.embedding.model_source import resolve_model

    other = tmp_path / "other-model"
    source = Path(resolve_model(DEFAULTS["embed"]["model"]))
    for path in source.rglob("*"):
        if path.is_file():
            (other / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            (other / path.relative_to(source)).write_bytes(path.read_bytes())
    config = other / "config_sentence_transformers.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "note": "a fine-tuned copy"}))
    _, stats = embed_texts(TEXTS, settings(model=str(other)), "", cache, progress=EmbedProgress(bar=False))
    assert (stats.cached, stats.embedded) == (0, len(TEXTS))
    again, stats = embed_texts(TEXTS, settings(), "", cache, progress=EmbedProgress(bar=False))
    assert stats.embedded == 0
    np.testing.assert_array_equal(again, first)


def test_onnx_and_openvino_send_no_telemetry_and_write_nothing_in_home(exports, tmp_path):
    # Left alone, `import openvino` sends an event and writes ~/intel/{openvino_ga_cid,stats}, and
    # onnxruntime writes ~/.cache/Microsoft/DeveloperTools/.onnxruntime/{deviceid,onnxruntime.db}.
    home = tmp_path / "home"
    home.mkdir()
    script = (
        "import os, sys\n"
        "from retrieval_bench.core.params import DEFAULTS\n"
        "from retrieval_bench.embedding.embed import EmbedProgress, embed_texts\n"
        "from retrieval_bench.embedding.settings import EmbedSettings\n"
        "for backend in ('onnx', 'openvino'):\n"
        "    settings = EmbedSettings.from_params({**DEFAULTS['embed'], 'backend': backend})\n"
        "    v, stats = embed_texts(['a text'], settings, '', sys.argv[1] + backend, progress=EmbedProgress(bar=False))\n"
        "    print(stats.embedded)\n"
        "from openvino.tools.ovc import telemetry_utils\n"
        "print(telemetry_utils.tm.__name__, 'openvino_telemetry' in sys.modules, os.environ['ORT_DISABLE_TELEMETRY'])\n"
    )
    env = {**tool_env(), "HOME": str(home), "RETRIEVAL_BENCH_CACHE": str(exports.parent)}
    env.pop("ORT_DISABLE_TELEMETRY", None)
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "cache-")], env=env, capture_output=True, text=True, check=True
    )
    printed = " ".join(line for line in result.stdout.splitlines() if not line.startswith("embed: exporting"))
    assert printed.split() == ["1", "1", "openvino.tools.ovc.telemetry_stub", "False", "1"]
    assert list(home.rglob("*")) == []


@pytest.mark.parametrize(
    ("embed_params", "message"),
    [
        ({"backend": "tensorrt"}, "embed.backend must be one of onnx, openvino, torch, got 'tensorrt'"),
        ({"quantize": "int4"}, "embed.quantize must be one of int8, none, got 'int4'"),
        ({"precision": "fp8"}, "embed.precision must be one of bf16, fp16, fp32, got 'fp8'"),
        ({"quantize": "int8"}, "embed.quantize int8 needs embed.backend onnx, got 'torch'"),
        ({"backend": "onnx", "precision": "bf16"}, "embed.precision bf16 is not available with embed.backend onnx"),
        ({"backend": "openvino", "device": "cuda"}, "embed.device 'cuda' needs embed.backend torch"),
        ({"device": "gpu0"}, "embed.device must be null (auto), cpu, cuda, cuda:N or mps, got 'gpu0'"),
        ({"device": 0}, "embed.device must be null (auto), cpu, cuda, cuda:N or mps, got 0"),
    ],
)
def test_bad_embed_params_name_the_key(tmp_path, embed_params, message):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"embed": embed_params}))
    with pytest.raises(InputError) as error:
        load_all_params(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_fp16_on_a_cpu_only_torch_names_the_key(exports, tmp_path, monkeypatch):
    import torch

    has_cuda = torch.cuda.is_available()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(InputError, match="embed.precision fp16 needs a GPU with embed.backend torch"):
        embed(tmp_path, precision="fp16")
    assert not list((tmp_path / "cache").glob("*.keys"))
    if not has_cuda:
        with pytest.raises(InputError, match="embed.device 'cuda': "):
            embed(tmp_path, device="cuda")
