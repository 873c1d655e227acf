"""params.yaml's embed section and retrieval's rerank and ANN settings, checked (params.py checks
the rest), with the numeric bounds beyond which a value only costs time or memory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from retrieval_bench.io import InputError

# (lowest, highest) of numeric params: beyond the upper bound a value only costs time or memory
# (retrieval.ann.ef_search 1e8 searched for hours), so it is refused, as NaN is.
EMBED_BOUNDS = {
    "batch_size": (1, 65_536),
    "ray.num_actors": (1, 1024),
    "ray.batch_size": (1, 1 << 20),
    "ray.num_cpus_per_actor": (0, 1024),
    "ray.num_gpus_per_actor": (0, 64),
    "ray.timeout_s": (0.1, 600),
}
ANN_BOUNDS = {
    "hnsw_m": (2, 256),
    "ef_construction": (1, 4096),
    "ef_search": (1, 32_768),
    "nlist": (1, 1 << 20),
    "nprobe": (1, 1 << 20),
    "pq_m": (1, 1024),
    "pq_bits": (1, 16),
}


def check_bounds(section: dict[str, Any], bounds: dict[str, tuple[float, float]], where: str, path: Path) -> None:
    for key, (lowest, highest) in bounds.items():
        group, _, name = key.rpartition(".")
        value = section[group][name] if group else section[name]
        if not lowest <= value <= highest:  # NaN is refused too
            raise InputError(f"{path}: {where}.{key} must be between {lowest} and {highest}, got {value!r}")


def check_embed(embed: dict[str, Any], path: Path) -> None:
    device = embed["device"]
    if device is not None and not (isinstance(device, str) and re.fullmatch(r"cpu|mps|cuda(:\d+)?", device)):
        raise InputError(f"{path}: embed.device must be null (auto), cpu, cuda, cuda:N or mps, got {device!r}")
    if embed["quantize"] == "int8" and embed["backend"] != "onnx":
        raise InputError(f"{path}: embed.quantize int8 needs embed.backend onnx, got {embed['backend']!r}")
    if embed["backend"] == "onnx" and embed["precision"] != "fp32":
        raise InputError(
            f"{path}: embed.precision {embed['precision']} is not available with embed.backend onnx "
            "(fp32 only; bf16/fp16: openvino or torch)"
        )
    if embed["backend"] != "torch" and device not in (None, "cpu"):
        raise InputError(
            f"{path}: embed.device {device!r} needs embed.backend torch ({embed['backend']} runs on the CPU here)"
        )
    ray = embed["ray"]
    address = ray["address"]
    if address is not None and not (isinstance(address, str) and address.strip()):
        raise InputError(
            f"{path}: embed.ray.address must be null (start a local Ray), auto or host:port, got {address!r}"
        )
    if address == "local":  # Ray's own name for a new local instance: the engine's private one, watchdog and all
        ray["address"] = None
    check_bounds(embed, EMBED_BOUNDS, "embed", path)
    if (
        embed["engine"] == "ray"
        and ray["num_gpus_per_actor"] > 0
        and (embed["backend"] != "torch" or device not in (None, "cuda"))
    ):
        raise InputError(
            f"{path}: embed.ray.num_gpus_per_actor > 0 needs embed.backend torch and embed.device null or cuda "
            f"(got backend {embed['backend']}, device {device})"
        )


RERANK_DEFAULT_MODEL = "cross-encoder/ms-marco-MiniLM-L6-v2"  # the usual choice, named in the error below


def check_rerank_and_ann(retrieval: dict[str, Any], path: Path) -> None:
    rerank, ann = retrieval["rerank"], retrieval["ann"]
    model = rerank["model"]
    if model is not None and not (isinstance(model, str) and model.strip()):
        raise InputError(
            f"{path}: retrieval.rerank.model must be a cross-encoder id or local path, or null, got {model!r}"
        )
    if retrieval["method"] == "rerank" and model is None:
        raise InputError(
            f"{path}: retrieval.method rerank needs retrieval.rerank.model, a cross-encoder id or local path "
            f"(usually {RERANK_DEFAULT_MODEL}; offline, a local copy of it)"
        )
    choices = {"rerank.first_stage": ("dense", "bm25", "hybrid"), "ann.index": ("hnsw", "ivf-flat", "ivf-pq")}
    for where, allowed in choices.items():
        group, key = where.split(".")
        if retrieval[group][key] not in allowed:
            raise InputError(
                f"{path}: retrieval.{where} must be one of {', '.join(allowed)}, got {retrieval[group][key]!r}"
            )
    for key in ("candidates", "batch_size"):
        if rerank[key] <= 0:
            raise InputError(f"{path}: retrieval.rerank.{key} must be a positive integer, got {rerank[key]!r}")
    check_bounds(ann, ANN_BOUNDS, "retrieval.ann", path)
    if ann["nprobe"] > ann["nlist"]:
        raise InputError(
            f"{path}: retrieval.ann.nprobe ({ann['nprobe']}) cannot exceed retrieval.ann.nlist ({ann['nlist']})"
        )
