"""P1: how fast each embedding backend is against plain sentence-transformers, and what it does
to SciFact nDCG@10.

    python bench/embed_backends.py [SCIFACT] [--texts 2000] [--rounds 8] [--skip-ndcg]
    python bench/embed_backends.py --model models/all-mpnet-base-v2 --max-seq-length 384 \
        --configs "torch fp32,openvino fp32" --texts 128 --rounds 2 --skip-ndcg     (speed only)

Speed: the first --texts SciFact abstracts (title + " " + text, as BEIR embeds them), cut into
--rounds equal slices; each round embeds its slice with every backend in turn (plain
`SentenceTransformer.encode` first), so background load hits all of them alike; texts/s is the
total over the rounds, and the ratio is against plain ST in the same run. No cache is involved.

nDCG@10: the real pipeline on all 5,183 abstracts and 300 test queries with
bench/reproduce_scifact.py's params (max_seq_length 256, exact dense search), once per backend,
each with an empty embedding cache; the metric is the score stage's own.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from common import SCIFACT, abstracts, copy_project, project_env, run_main, scifact_folder

from retrieval_bench.core import paths

CONFIGS = [  # (label, backend, precision, quantize)
    ("torch fp32", "torch", "fp32", "none"),
    ("onnx fp32", "onnx", "fp32", "none"),
    ("openvino fp32", "openvino", "fp32", "none"),
    ("torch bf16", "torch", "bf16", "none"),
    ("openvino bf16", "openvino", "bf16", "none"),
    ("onnx int8", "onnx", "fp32", "int8"),
]
MAX_SEQ_LENGTH = 256  # as MTEB evaluated all-MiniLM-L6-v2 on SciFact
BATCH = 64


def speed(texts: list[str], rounds: int, model: str | None, max_seq_length: int, configs: list[tuple]) -> None:
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.embedding.backends import load_encoder
    from retrieval_bench.embedding.embed import load_model
    from retrieval_bench.embedding.model_source import model_fingerprint, resolve_model
    from retrieval_bench.embedding.settings import EmbedSettings

    base = {**DEFAULTS["embed"], "max_seq_length": max_seq_length, "batch_size": BATCH}
    base["model"] = model or base["model"]
    path = resolve_model(base["model"])
    plain = load_model(base["model"], max_seq_length)
    plain.to("cpu")
    encoders = {"plain ST (torch fp32)": lambda batch: plain.encode(batch, batch_size=BATCH, normalize_embeddings=True)}
    for label, backend, precision, quantize in configs:
        encoder = load_encoder(
            path,
            model_fingerprint(path),
            EmbedSettings.from_params({**base, "backend": backend, "precision": precision, "quantize": quantize}),
        )

        def run(batch, encoder=encoder):
            order = np.argsort([-len(t) for t in batch])  # as embed_texts batches its misses
            out = np.zeros((len(batch), encoder.dim), dtype=np.float32)
            for start in range(0, len(batch), BATCH):
                rows = order[start : start + BATCH]
                out[rows] = encoder([batch[i] for i in rows])
            return out

        encoders[label] = run
    for run in encoders.values():  # warm-up (first-call allocations), not timed
        run(texts[:8])
    seconds = {label: 0.0 for label in encoders}
    vectors: dict[str, list[np.ndarray]] = {label: [] for label in encoders}
    slices = np.array_split(np.arange(len(texts)), rounds)
    for number, rows in enumerate(slices, 1):
        batch = [texts[i] for i in rows]
        for label, run in encoders.items():
            started = time.perf_counter()
            vectors[label].append(run(batch))
            seconds[label] += time.perf_counter() - started
        print(
            f"round {number}/{rounds}: "
            + ", ".join(f"{label} {len(batch) * number / seconds[label]:.1f}/s" for label in encoders),
            file=sys.stderr,
        )
    reference = np.concatenate(vectors["plain ST (torch fp32)"])
    print(
        f"\nP1 speed: {base['model']}, {len(texts)} SciFact abstracts, max_seq_length {max_seq_length}, batch {BATCH}, {rounds} interleaved rounds, "
        f"{os.cpu_count()} CPUs (torch threads {__import__('torch').get_num_threads()})"
    )
    print("| backend | texts/s | × plain ST | max abs diff | min cosine |")
    print("|---|---:|---:|---:|---:|")
    base_rate = len(texts) / seconds["plain ST (torch fp32)"]
    for label in encoders:
        found = np.concatenate(vectors[label])
        rate = len(texts) / seconds[label]
        print(
            f"| {label} | {rate:.1f} | {rate / base_rate:.2f} | {np.abs(found - reference).max():.1e} | {(found * reference).sum(1).min():.5f} |"
        )


def ndcg(scifact: Path) -> None:
    env = project_env(HF_HUB_OFFLINE="1")
    print("\nP1 quality: full SciFact (5,183 abstracts, 300 queries), the pipeline's nDCG@10")
    print("| backend | nDCG@10 | Δ vs torch fp32 | embed_corpus |")
    print("|---|---:|---:|---|")
    reference = None
    with tempfile.TemporaryDirectory(prefix="scifact-backends-") as tmp:
        project = Path(tmp)
        copy_project(project, env)
        from reproduce_scifact import scifact_params  # the reproduction's own params: MTEB's setting

        for label, backend, precision, quantize in CONFIGS:
            params = scifact_params(scifact)
            params["embed"].update(batch_size=BATCH, backend=backend, precision=precision, quantize=quantize)
            (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
            shutil.rmtree(project / paths.EMBEDDING_CACHE, ignore_errors=True)  # every backend embeds everything
            result = subprocess.run(
                [sys.executable, "-m", "dvc", "repro"], cwd=project, env=env, capture_output=True, text=True
            )
            if result.returncode != 0:
                print(f"| {label} | failed: {result.stderr.strip().splitlines()[-1:]} | | |")
                continue
            value = json.loads((project / "metrics" / "panel" / "default" / "metrics.json").read_text())["ndcg@10"]
            reference = value if reference is None else reference
            line = re.search(r"^embed_corpus: (.*)$", result.stdout, re.MULTILINE)
            print(f"| {label} | {value:.5f} | {value - reference:+.5f} | {line.group(1) if line else ''} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scifact", nargs="?", default=str(SCIFACT))
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-ndcg", action="store_true")
    parser.add_argument("--model", help="speed only: a model folder (default: the project's embed.model)")
    parser.add_argument("--max-seq-length", type=int, default=MAX_SEQ_LENGTH, help="speed only")
    parser.add_argument("--configs", help="speed only: comma-separated labels of CONFIGS (default: all)")
    args = parser.parse_args()
    configs = CONFIGS
    if args.configs:
        wanted = [label.strip() for label in args.configs.split(",")]
        unknown = sorted(set(wanted) - {config[0] for config in CONFIGS})
        if unknown:
            parser.error(f"--configs: unknown {unknown}; choose from {[config[0] for config in CONFIGS]}")
        configs = [config for config in CONFIGS if config[0] in wanted]
    if args.model and not args.skip_ndcg:
        parser.error("--model is for the speed part: add --skip-ndcg (mpnet's nDCG: bench/reproduce_scifact_panel.py)")
    scifact = scifact_folder(args.scifact, "embed_backends")
    if scifact is None:
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not args.skip_speed:
        speed(abstracts(scifact, args.texts), args.rounds, args.model, args.max_seq_length, configs)
    if not args.skip_ndcg:
        ndcg(scifact)
    return 0


if __name__ == "__main__":
    run_main(main)
