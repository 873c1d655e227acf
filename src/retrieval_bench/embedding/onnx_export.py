"""Export a sentence-transformers model's transformer to ONNX once, verified, cached on disk.

sentence-transformers' own ONNX/OpenVINO helpers need optimum-onnx / optimum-intel, which cannot
be installed beside transformers 5.x, so the export is done here: `torch.onnx.export` (TorchScript
exporter, opset 17) of the bare transformer — the model's first module, eager attention so that
onnxruntime's transformer optimizer can fuse it — and, for the `onnx` backend, that optimizer's
fusions and optionally onnxruntime's dynamic int8 quantization (weights per channel; activations
quantized at run time, so no calibration data is involved). Pooling, Dense and Normalize stay in
torch, as the model's own modules.

Exports live under the same cache root as the extracted bundled model (io.cache_root:
`$RETRIEVAL_BENCH_CACHE` or `~/.cache/retrieval-bench`) in `exports/<variant>-<hash>/`, where
the hash covers everything the export depends on (the model's weights hash, the variant, opset,
the versions of torch, transformers, onnx and onnxruntime, and this module's EXPORT_VERSION).
`manifest.json` records the sha256 of every exported file; an export whose files do not match
it is rebuilt. A fresh export is checked against torch before it is used. Processes that need the
same export at once (two stages, Ray actors on one node) build it once: the others wait for the
lock beside it (locking.build_once), then use that export.

onnxruntime's telemetry is off: on Linux, onnxruntime 1.32 initialises Microsoft 1DS telemetry
when imported and keeps ~/.cache/Microsoft/DeveloperTools/.onnxruntime/{deviceid,onnxruntime.db};
`import_onnxruntime` sets ORT_DISABLE_TELEMETRY=1 before the import (a value the user set is
kept), which stops both.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np

from retrieval_bench.core.errors import InputError, optional_extra
from retrieval_bench.core.files import cache_root, sha256_file
from retrieval_bench.core.locking import build_once

EXPORT_VERSION = 1
OPSET = 17
VARIANTS = {"onnx", "onnx-int8", "openvino"}
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
MANIFEST = "manifest.json"
MODEL_FILE = "model.onnx"
# The text both torch and the export are run on to check a fresh export.
PROBE = ["Exported once, verified, then reused.", "A second, longer sentence so that padding is exercised too."]


def import_onnxruntime():
    """`import onnxruntime` with its telemetry off (see the module docstring)."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    with optional_extra("onnx", "embed.backend onnx or openvino (the model's ONNX export)"):
        import onnxruntime

    if os.environ["ORT_DISABLE_TELEMETRY"] not in ("0", "false"):
        onnxruntime.disable_telemetry_events()  # in case it was imported before the variable was set
    return onnxruntime


def exports_dir() -> Path:
    return cache_root() / "exports"


def export_inputs(fingerprint: str, variant: str) -> dict:
    """Everything an export depends on; its hash names the export folder."""
    onnxruntime = import_onnxruntime()  # first: a missing extra is one line
    import onnx
    import torch
    import transformers

    return {
        "export_version": EXPORT_VERSION,
        "model": fingerprint,
        "variant": variant,
        "opset": OPSET,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
    }


def verified(folder: Path) -> bool:
    """The folder holds a complete export whose files match its manifest."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        files = manifest["files"]
        return MODEL_FILE in files and all(sha256_file(folder / name) == digest for name, digest in files.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def input_names(st) -> list[str]:
    probe = st.preprocess(PROBE[:1])
    return [name for name in INPUT_NAMES if name in probe]


def exported_model(st, fingerprint: str, variant: str, log=print) -> Path:
    """The verified export of `st` for `variant` (built now if absent or corrupt)."""
    if variant not in VARIANTS:
        raise ValueError(variant)
    inputs = export_inputs(fingerprint, variant)
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    folder = exports_dir() / f"{variant}-{digest[:16]}"

    def build(staging: Path) -> None:  # only when `folder` is not verified
        if folder.exists():
            log(f"embed: the cached export {folder} does not match its manifest; rebuilding it")
        log(f"embed: exporting the model for {variant} (once; cached in {folder})")
        _build(st, variant, staging)
        files = {p.name: sha256_file(p) for p in sorted(staging.iterdir())}
        (staging / MANIFEST).write_text(json.dumps({"inputs": inputs, "files": files}, indent=2) + "\n")

    build_once(folder, build, verified, what=f"exporting the model for {variant} to {folder}", log=log)
    return folder / MODEL_FILE


def _wrap(auto_model, names):
    """The bare transformer as a module of positional tensors -> last_hidden_state."""
    import torch

    class Transformer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = auto_model

        def forward(self, *tensors):
            return self.model(**dict(zip(names, tensors, strict=True))).last_hidden_state

    return Transformer().eval()  # export restores this mode on the whole tree: eval, so dropout stays off


def _check_exportable(st) -> None:
    first = st[0]
    auto_model = getattr(first, "auto_model", None)
    config = getattr(first, "modality_config", {}) or {}
    output = (config.get("text") or {}).get("method_output_name", "last_hidden_state")
    if auto_model is None or output != "last_hidden_state":
        raise InputError(
            f"embed.backend: this model's first module ({type(first).__name__}) is not a text transformer "
            "returning last_hidden_state; only embed.backend torch can run it"
        )


def _build(st, variant: str, folder: Path) -> None:
    import torch

    _check_exportable(st)
    names = input_names(st)
    auto_model = st[0].auto_model
    previous = getattr(auto_model.config, "_attn_implementation", None)
    features = st.preprocess(PROBE)
    example = tuple(features[name].cpu() for name in names)
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    base = folder / "base.onnx"
    try:
        if previous not in (None, "eager"):
            auto_model.set_attn_implementation("eager")  # plain attention ops the optimizer can fuse
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            module = _wrap(auto_model.eval().float().cpu(), names)
            reference = module(*example).numpy()
            torch.onnx.export(
                module,
                example,
                str(base),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
    finally:
        if previous not in (None, "eager"):
            auto_model.set_attn_implementation(previous)
        st.eval()
    target = folder / MODEL_FILE
    if variant == "openvino":
        os.replace(base, target)  # OpenVINO reads plain ONNX and fuses for itself
    else:
        _optimize(auto_model.config, base, target, reference, names, example)
        base.unlink(missing_ok=True)
    if variant == "onnx-int8":
        _quantize(target)
    elif _max_diff(target, names, example, reference) > 1e-3:  # never serve a broken export
        raise InputError(
            f"embed.backend: the ONNX export of this model differs from torch by more than 1e-3 ({variant})"
        )


def _session(path: Path):
    return import_onnxruntime().InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _max_diff(path: Path, names, example, reference) -> float:
    """The largest difference from torch over real tokens (padding positions are never pooled)."""
    out = _session(path).run(None, {name: t.numpy().astype(np.int64) for name, t in zip(names, example, strict=True)})[
        0
    ]
    if out.shape != reference.shape:
        return float("inf")
    mask = (
        example[names.index("attention_mask")].numpy().astype(bool)
        if "attention_mask" in names
        else np.ones(out.shape[:2], bool)
    )
    return float(np.abs(out - reference)[mask].max())


def _optimize(config, base: Path, target: Path, reference, names, example) -> None:
    """onnxruntime's transformer fusions (attention, skip layer norm, gelu) when they keep the
    output; the plain export otherwise."""
    heads = getattr(config, "num_attention_heads", 0)
    hidden = getattr(config, "hidden_size", 0)
    try:
        import_onnxruntime()
        from onnxruntime.transformers import optimizer

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimized = optimizer.optimize_model(
                str(base), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=1
            )
            optimized.save_model_to_file(str(target))
        if _max_diff(target, names, example, reference) <= 1e-4:
            return
    except Exception:  # an architecture the fusions do not know: keep the plain export
        pass
    shutil.copyfile(base, target)


def _quantize(path: Path) -> None:
    import logging

    import onnx

    import_onnxruntime()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantized = path.with_name("int8.onnx")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer's "consider pre-processing" advice
    try:
        quantize_dynamic(
            str(path),
            str(quantized),
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        root.setLevel(level)
    os.replace(quantized, path)
