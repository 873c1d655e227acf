"""Encoders: a sentence-transformers model's transformer run by torch, onnxruntime or OpenVINO.

Whatever the backend, the texts are tokenized by the model's own tokenizer and the modules after
the transformer (pooling, dense, normalize) are the model's own, run by torch in float32; the
backend only computes the token embeddings. So `torch` in fp32 gives plain sentence-transformers'
vectors, and any other backend differs only where its transformer does.

OpenVINO telemetry is off: `import openvino` itself sends an "import" event (openvino.tools.ovc
initialises openvino_telemetry, which also writes ~/intel/openvino_ga_cid and ~/intel/stats).
`import_openvino` imports it with the `openvino_telemetry` module blocked, so OpenVINO falls back
to its own no-op stub (openvino.tools.ovc.telemetry_stub): nothing is sent, nothing is written
under ~. The model is read from the exported ONNX file (`Core.read_model`), never through
`convert_model`. onnxruntime's own telemetry is turned off too (onnx_export.import_onnxruntime).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.core.errors import InputError, first_line, optional_extra
from retrieval_bench.embedding.model_source import loading
from retrieval_bench.embedding.onnx_export import exported_model, import_onnxruntime, input_names
from retrieval_bench.embedding.settings import EmbedSettings

OPENVINO_HINTS = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
CPUINFO = Path("/proc/cpuinfo")  # Linux; elsewhere the CPU's bf16 support is not checked
# Native bf16 arithmetic: x86 AVX512-BF16 or AMX, Arm's BF16 extension. Without it OpenVINO computes
# a bf16 hint in fp32 (the same vectors at the same speed) and torch emulates bf16.
BF16_FLAGS = {"avx512_bf16", "amx_bf16", "bf16"}


def runtime_version(backend: str) -> str | None:
    """The library that computes the vectors, besides torch (part of the cache key)."""
    if backend == "onnx":
        return f"onnxruntime=={import_onnxruntime().__version__}"
    if backend == "openvino":
        return f"openvino=={import_openvino().__version__}"
    return None


def import_openvino():
    """`import openvino` with its telemetry off (see the module docstring)."""
    if "openvino" in sys.modules:
        return sys.modules["openvino"]
    blocked = ("openvino_telemetry", "openvino_telemetry.backend")
    saved = {name: sys.modules[name] for name in blocked if name in sys.modules}
    # A None entry makes `import` raise ImportError (typeshed types sys.modules as modules only).
    sys.modules.update(dict.fromkeys(blocked))  # type: ignore[arg-type]
    try:
        with optional_extra("openvino", "embed.backend openvino"):
            import openvino
    finally:
        for name in blocked:
            if name in saved:
                sys.modules[name] = saved[name]
            else:
                sys.modules.pop(name, None)
    return openvino


def resolve_device(device: str | None) -> str:
    """`embed.device`, or the best device present (null): cuda, then mps, then cpu."""
    import torch

    if device:
        return device
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def cpu_flags() -> set[str] | None:
    """The CPU's feature flags (the `flags` line of /proc/cpuinfo, `Features` on Arm); None where unknown."""
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return None


def warn_without_bf16(settings: EmbedSettings, device: str) -> None:
    """One line on stderr when bf16 on the CPU is asked for and the CPU has no native bf16."""
    if settings.precision != "bf16" or device != "cpu":
        return
    flags = cpu_flags()
    if flags is None or flags & BF16_FLAGS:
        return
    emulated = "OpenVINO computes in fp32: the fp32 vectors" if settings.backend == "openvino" else "torch emulates it"
    print(
        f"embed: warning: {settings.key('precision')} bf16, but this CPU has no native bf16 (no {'/'.join(sorted(BF16_FLAGS))} flag in "
        f"{CPUINFO}): {emulated}, with no speed-up over fp32",
        file=sys.stderr,
    )


def encoder_label(settings: EmbedSettings) -> str:
    """The backend and number format `settings` asks for: "onnx int8"."""
    return f"{settings.backend} {'int8' if settings.quantize == 'int8' else settings.precision}"


def st_dimension(st) -> int:
    """A SentenceTransformer's vector size (the method's name changed in sentence-transformers 5)."""
    return (getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension)()


@dataclass
class Encoder:
    """Call with a batch of texts: unit-length float32 vectors, one row per text."""

    st: Any  # a SentenceTransformer (imported only when an encoder is loaded)
    first: Callable[[dict], dict]  # features -> features with float32 token_embeddings
    description: str

    @property
    def dim(self) -> int:
        return st_dimension(self.st)

    def __call__(self, texts: list[str]) -> np.ndarray:
        import torch

        features = self.st.preprocess(texts)
        with torch.inference_mode():
            features = self.first(features)
            for module in list(self.st.children())[1:]:
                features = module(features)
            vectors = torch.nn.functional.normalize(features["sentence_embedding"].float(), p=2, dim=1)
        return vectors.cpu().numpy().astype(np.float32, copy=False)

    def batches(
        self, items: list[tuple[bytes, str]], batch_size: int
    ) -> Generator[tuple[list[bytes], np.ndarray], None, None]:
        """(keys, vectors) for `items` ((key, text) pairs), embedded in order in batches of
        `batch_size`: the local engine appends each to the cache, a Ray actor joins them."""
        for start in range(0, len(items), batch_size):
            batch = items[start : start + batch_size]
            yield [key for key, _ in batch], self([text for _, text in batch])


def load_encoder(model_path: str, fingerprint: str, settings: EmbedSettings, log=print) -> Encoder:
    """The encoder `settings` (the embed section of params.yaml, or an embedder) asks for."""
    from sentence_transformers import SentenceTransformer

    backend, precision, quantize = settings.backend, settings.precision, settings.quantize
    device = resolve_device(settings.device) if backend == "torch" else "cpu"
    if backend == "torch" and precision == "fp16" and device == "cpu":
        raise InputError(
            f"{settings.key('precision')} fp16 needs a GPU with {settings.key('backend')} torch (none found); "
            "use bf16 on the CPU"
        )
    warn_without_bf16(settings, device)
    try:
        with loading(settings.model_key, model_path):
            st = SentenceTransformer(model_path, device=device, local_files_only=True)
    except (RuntimeError, AssertionError) as error:
        raise InputError(f"{settings.key('device')} {device!r}: {first_line(error)}") from None
    if settings.max_seq_length:
        # Beyond the model's positions the forward pass fails mid-stage, on the first long chunk only.
        limit = usable_positions(getattr(st[0], "auto_model", None))
        if limit is not None and settings.max_seq_length > limit:
            raise InputError(
                f"{settings.key('max_seq_length')} {settings.max_seq_length} is beyond the model's {limit} positions "
                f"({model_path}); use {limit} or less, or null (the model's own)"
            )
        st.max_seq_length = settings.max_seq_length
    st.eval()
    name = f"{encoder_label(settings)} on {device}"
    if backend == "torch":
        return Encoder(st, _torch_first(st, precision, device), name)
    variant = "onnx-int8" if quantize == "int8" else backend
    path = exported_model(st, fingerprint, variant, log=log)
    names = input_names(st)
    if backend == "onnx":
        return Encoder(st, _onnx_first(path, names), name)
    return Encoder(st, _openvino_first(path, names, OPENVINO_HINTS[precision]), name)


def usable_positions(model: Any) -> int | None:
    """The tokens a Hugging Face encoder can read: its position embeddings' count, less the ones a
    padding offset uses (RoBERTa, MPNet: positions start after padding_idx, so 514 rows read 512
    tokens); None where it says nothing."""
    table = getattr(getattr(model, "embeddings", None), "position_embeddings", None)
    rows, padding = getattr(table, "num_embeddings", None), getattr(table, "padding_idx", None)
    if isinstance(rows, int):
        return rows - (padding + 1 if isinstance(padding, int) else 0)
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return limit if isinstance(limit, int) else None


def _torch_first(st, precision: str, device: str) -> Callable[[dict], dict]:
    import torch
    from sentence_transformers.util import batch_to_device

    first = st[0]
    if precision != "fp32":
        first.to(torch.float16 if precision == "fp16" else torch.bfloat16)

    def run(features: dict) -> dict:
        # batch_to_device moves each tensor with .to(device), which takes a device name too.
        features = first(batch_to_device(features, device))  # type: ignore[arg-type]
        features["token_embeddings"] = features["token_embeddings"].float()
        return features

    return run


def _feed(features: dict, names: list[str]) -> dict:
    return {name: features[name].cpu().numpy().astype(np.int64, copy=False) for name in names}


def _onnx_first(path, names: list[str]) -> Callable[[dict], dict]:
    import torch

    session = import_onnxruntime().InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def run(features: dict) -> dict:
        features["token_embeddings"] = torch.from_numpy(session.run(None, _feed(features, names))[0])
        return features

    return run


def _openvino_first(path, names: list[str], hint: str) -> Callable[[dict], dict]:
    import torch

    core = import_openvino().Core()
    compiled = core.compile_model(core.read_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": hint})
    request = compiled.create_infer_request()

    def run(features: dict) -> dict:
        hidden = request.infer(_feed(features, names))[0]
        features["token_embeddings"] = torch.from_numpy(
            np.array(hidden, dtype=np.float32)
        )  # a copy: the buffer is reused
        return features

    return run
