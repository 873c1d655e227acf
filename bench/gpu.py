"""The GPU figures: texts/s of the embed stage's encoder (embedding.backends.load_encoder, as
embed_texts batches: longest first) against plain `SentenceTransformer.encode` on the same device,
interleaved rounds on SciFact abstracts; and exact dense search with `retrieval.device` (candidates
on the device, retrieval.torch_flat; fixed-order scores on the host, retrieval.flat) at each
--sizes (CHUNKS x QUESTIONS, 384-d, bench/dense_search.py's make_data), wall seconds with the
corpus's copy to the device apart. Without a GPU it runs on torch's CPU backend at small sizes.

    .venv/bin/python bench/gpu.py --device cuda --texts 20000 --sizes 1000000x2000,10000000x10000
    .venv/bin/python bench/gpu.py                    # no GPU: cpu, 256 texts, 100000 x 500 (about a minute)
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time

import numpy as np
from common import SCIFACT, InputError, abstracts, cpu_model, run_main, scifact_folder
from dense_search import make_data

BATCH = 64


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def embedding(device: str, n_texts: int, rounds: int, scifact: str) -> None:
    """The encoder's texts/s against plain sentence-transformers', interleaved by round."""
    from sentence_transformers import SentenceTransformer

    from retrieval_bench.core.logs import silent
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.embedding.backends import load_encoder
    from retrieval_bench.embedding.model_source import model_fingerprint, resolve_model
    from retrieval_bench.embedding.settings import EmbedSettings

    folder = scifact_folder(scifact, "bench/gpu.py")
    if folder is None:
        return
    texts = abstracts(folder, n_texts)
    settings = EmbedSettings.from_params({**DEFAULTS["embed"], "device": device, "batch_size": BATCH})
    path = resolve_model(settings.model)
    encoder = load_encoder(path, model_fingerprint(path), settings, log=silent)
    plain = SentenceTransformer(path, device=device, local_files_only=True)

    def stage(batch: list[str]) -> None:
        order = np.argsort([-len(text) for text in batch], kind="stable")
        for start in range(0, len(batch), BATCH):
            encoder([batch[i] for i in order[start : start + BATCH]])

    runs = {
        "plain SentenceTransformer.encode": lambda batch: plain.encode(
            batch, batch_size=BATCH, normalize_embeddings=True
        ),
        "the embed stage's encoder": stage,
    }
    for run in runs.values():  # warm-up: first-call allocations and kernels, not timed
        run(texts[:BATCH])
    seconds = {name: 0.0 for name in runs}
    for rows in np.array_split(np.arange(len(texts)), rounds):
        batch = [texts[i] for i in rows]
        for name, run in runs.items():
            synchronize(device)
            started = time.perf_counter()
            run(batch)
            synchronize(device)
            seconds[name] += time.perf_counter() - started
    base = len(texts) / seconds["plain SentenceTransformer.encode"]
    print(f"\nembedding: {len(texts):,} SciFact abstracts, {settings.model}, batch {BATCH}, on {device}")
    print("| encoder | texts/s | x plain |\n|---|---:|---:|")
    for name in runs:
        rate = len(texts) / seconds[name]
        print(f"| {name} | {rate:,.1f} | {rate / base:.2f} |", flush=True)


def search(device: str, sizes: str, depth: int, rounds: int) -> None:
    """Exact search with candidates on `device`: wall seconds per size (median of `rounds`)."""
    import torch

    from retrieval_bench.retrieval import flat, torch_flat

    print(f"\nexact dense search, depth {depth}, candidates on {device}, scores on the host")
    print("| chunks x questions | copy to the device (s) | search (s, median) | questions/s | each round (s) |")
    print("|---|---:|---:|---:|---|")
    for size in sizes.split(","):
        n_chunks, n_questions = (int(part) for part in size.lower().split("x"))
        chunks, questions, _ = make_data(n_chunks, n_questions, 384)
        started = time.perf_counter()
        candidates = torch_flat.candidates_on(device, chunks)
        synchronize(device)
        copy = time.perf_counter() - started
        each = []
        for _ in range(rounds):
            started = time.perf_counter()
            flat.top_k(questions, chunks, depth, candidates=candidates)
            each.append(time.perf_counter() - started)
        median = statistics.median(each)
        print(
            f"| {n_chunks:,} x {n_questions:,} | {copy:.2f} | {median:.2f} | {n_questions / median:,.0f} | "
            f"{', '.join(f'{s:.2f}' for s in each)} |",
            flush=True,
        )
        del candidates, chunks, questions
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def main() -> None:
    import torch

    gpu = torch.cuda.is_available()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if gpu else "cpu", help="torch device (default: cuda if present)")
    parser.add_argument("--texts", type=int, default=20_000 if gpu else 256, help="SciFact abstracts embedded")
    parser.add_argument(
        "--sizes",
        default="1000000x2000,10000000x10000" if gpu else "100000x500",
        help="comma-separated CHUNKSxQUESTIONS for the search",
    )
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scifact", default=str(SCIFACT), help="BEIR SciFact folder (corpus.jsonl)")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(
            f"--device {args.device}: torch sees no CUDA device here; --device cpu times torch's CPU backend"
        )
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "torch's CPU backend"
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; device {args.device} ({name})")
    print(f"CPU {cpu_model()}, torch threads {torch.get_num_threads()}; load average {os.getloadavg()[0]:.2f}")
    if args.texts:
        embedding(args.device, args.texts, args.rounds, args.scifact)
    search(args.device, args.sizes, args.depth, args.rounds)


if __name__ == "__main__":
    run_main(main)
