"""The Ray engine (`embed.engine: ray`) against the local engine, on the same texts.

    python bench/embed_ray.py [SCIFACT] [--texts 2000] [--small 64] [--device cpu|cuda]

Every configuration embeds the first --texts SciFact abstracts (title + " " + text) through
`embed_texts`, the stages' own path, from an empty embedding cache in a temporary folder:

  --device cpu (default): the local engine, then Ray with 1 and with 2 CPU actors (1 CPU each);
  --device cuda: the local engine on the GPU, then Ray with one GPU actor (num_gpus_per_actor 1).

Ray runs as `embed.ray.address: null` does: each run starts its own local Ray instance and shuts
it down, so its wall time is everything a stage pays. Each configuration is also run on the first
--small texts: that wall time is its fixed cost (the local engine: loading the model; Ray: starting
Ray, starting the actors, each importing torch and loading the model, and shutting down), and
(texts - small) / (wall - small wall) its steady throughput once running. `ray.init` + shutdown
alone is timed too. Vectors are compared with the local engine's (max abs difference). The
1-minute load average after each configuration is printed beside it: on a shared machine it
moves the figures more than anything else. max_seq_length 256 and batch 64 as in
bench/embed_backends.py; Ray batches of 256 texts.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING

import numpy as np
from common import SCIFACT, abstracts, run_main, scifact_folder

if TYPE_CHECKING:
    from retrieval_bench.embedding.settings import EmbedSettings

MAX_SEQ_LENGTH = 256
BATCH = 64


def configurations(device: str) -> list[tuple[str, EmbedSettings]]:
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.embedding.settings import EmbedSettings

    base = copy.deepcopy(DEFAULTS["embed"])
    base.update(max_seq_length=MAX_SEQ_LENGTH, batch_size=BATCH, device=device)
    base["ray"].update(address=None, batch_size=256)

    def ray(actors: int, gpus: float) -> EmbedSettings:
        embed = copy.deepcopy(base)
        embed["engine"] = "ray"
        embed["ray"].update(num_actors=actors, num_cpus_per_actor=1.0, num_gpus_per_actor=gpus)
        return EmbedSettings.from_params(embed)

    local = EmbedSettings.from_params(base)
    if device == "cuda":
        return [("local engine (cuda)", local), ("ray, 1 GPU actor", ray(1, 1.0))]
    # Ray starts at most one actor per 256-text batch: below 512 texts "2 actors" runs one (its line says)
    return [
        ("local engine", local),
        ("ray, 1 CPU actor", ray(1, 0.0)),
        ("ray, up to 2 CPU actors (one per 256-text batch)", ray(2, 0.0)),
    ]


def timed_embed(texts: list[str], settings: EmbedSettings) -> tuple[float, np.ndarray, str]:
    """Wall seconds, vectors and the stats line of one `embed_texts` from an empty cache."""
    from retrieval_bench.embedding.embed import QUIET, embed_texts

    with tempfile.TemporaryDirectory(prefix="bench-embed-ray-") as cache:
        started = time.perf_counter()
        vectors, stats = embed_texts(texts, settings, "", cache, progress=QUIET)
        seconds = time.perf_counter() - started
    assert stats.embedded == len(texts), stats.line("chunk")
    return seconds, vectors, stats.line("chunk")


def ray_init_seconds(settings: EmbedSettings) -> float:
    """`ray.init` of a local instance sized for these actors, and its shutdown."""
    from retrieval_bench.embedding import embed_ray

    ray = embed_ray.import_ray()
    started = time.perf_counter()
    embed_ray.start_local(ray, settings.ray)
    ray.shutdown()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scifact", nargs="?", default=str(SCIFACT))
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--small", type=int, default=64)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    scifact = scifact_folder(args.scifact, "embed_ray")
    if scifact is None:
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import sentence_transformers  # noqa: F401 - imported before timing: the local engine's process has it already
    import torch

    texts = abstracts(scifact, args.texts)
    rows, reference = [], None
    for label, settings in configurations(args.device):
        small, _, _ = timed_embed(texts[: args.small], settings)
        seconds, vectors, line = timed_embed(texts, settings)
        reference = vectors if reference is None else reference
        # the rest of the texts over the rest of the time; none when the small run took longer (noise)
        steady = (len(texts) - args.small) / (seconds - small) if seconds > small else None
        rows.append(
            (label, seconds, len(texts) / seconds, small, steady, np.abs(vectors - reference).max(), os.getloadavg()[0])
        )
        print(f"{label}: {line}; {args.small} texts: {small:.1f}s", file=sys.stderr, flush=True)
    init = ray_init_seconds(configurations(args.device)[-1][1])

    print(
        f"\nRay engine: {len(texts)} SciFact abstracts, max_seq_length {MAX_SEQ_LENGTH}, batch {BATCH}, Ray batches of 256, "
        f"device {args.device}, {os.cpu_count()} CPUs (local engine: {torch.get_num_threads()} torch threads; a Ray actor: as many as its CPUs)"
    )
    print(
        f"| engine | wall, {len(texts)} texts | chunks/s | fixed cost (wall, {args.small} texts) | steady chunks/s | max abs diff vs local | load avg after |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, seconds, rate, small, steady, diff, load in rows:
        shown = "– (the small run took longer: rerun on a quieter machine)" if steady is None else f"{steady:.1f}"
        print(f"| {label} | {seconds:.1f} s | {rate:.1f} | {small:.1f} s | {shown} | {diff:.1e} | {load:.1f} |")
    print(
        f"`ray.init` of the local instance + `ray.shutdown`, alone: {init:.1f} s (part of every Ray fixed cost above)"
    )
    return 0


if __name__ == "__main__":
    run_main(main)
