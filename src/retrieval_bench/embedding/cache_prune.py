"""`retrieval-bench cache prune`: keep in each embedding cache only the vectors the current data
needs (for each (chunking, embedder) pair params.yaml embeds, that chunking's chunks; for each of
those embedders, the golden set's questions; each under its embedder's settings); everything else
(old models, prompts, backends, edited-away texts, the caches of pairs params.yaml no longer
embeds) is dropped and the rest rewritten as one shard. The caches are local (under .dvc/tmp, not
DVC outputs): pruning changes no stage."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import numbered_jsonl
from retrieval_bench.core.params import load_all_params
from retrieval_bench.embedding.embed import cache_keys, embedding_dimension
from retrieval_bench.embedding.embedding_cache import in_project, prune
from retrieval_bench.embedding.model_source import model_fingerprint, resolve_model
from retrieval_bench.embedding.settings import EmbedSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="cache_command", required=True)
    pruning = commands.add_parser("prune", help="drop the cached vectors the current data and params do not need")
    pruning.add_argument("--dry-run", action="store_true", help="say what would be dropped, change nothing")
    pruning.add_argument("--params", default=paths.PARAMS, help="the params file (default: %(default)s)")
    pruning.set_defaults(run=run_prune)


def _chunk_texts(source: str) -> list[str]:
    return pd.read_parquet(source, columns=["text"])["text"].tolist()


def _questions(source: str) -> list[str]:
    texts = []
    for line, row in numbered_jsonl(source):
        if not isinstance(row.get("question"), str):
            raise InputError(f"{source}:{line}: no question; expected a golden set as generate_goldenset writes it")
        texts.append(row["question"])
    return texts


def _texts(source: str, read: Callable[[str], list[str]]) -> list[str]:
    """The texts a cache must hold, read from `source` (one InputError without it)."""
    if not Path(source).is_file():
        raise InputError(
            f"{source}: not found; run `dvc repro` (or `dvc pull`) first so that prune knows what the current data needs"
        )
    return read(source)


def run_prune(args: argparse.Namespace) -> int:
    params = load_all_params(args.params)
    pairs = sorted({(pair["chunking"], pair["embedder"]) for pair in params["embedded"].values()})
    documents, queries = attrgetter("document_prompt"), attrgetter("query_prompt")
    caches = [  # (cache folder, what it must hold, its reader, the prompt its texts were embedded with, the embedder)
        (paths.corpus_vectors(chunking, embedder)[2], paths.chunks_of(chunking), _chunk_texts, documents, embedder)
        for chunking, embedder in pairs
    ] + [
        (paths.question_vectors(embedder)[2], paths.GOLDENSET, _questions, queries, embedder)
        for embedder in sorted({embedder for _, embedder in pairs})
    ]
    models: dict[str, tuple[EmbedSettings, str, int]] = {}  # embedder -> settings, fingerprint, dimension
    # every source read (each once) before any cache is pruned: a bad one stops prune with nothing dropped
    texts = {source: _texts(source, read) for relative, source, read, _, _ in caches if in_project(relative).is_dir()}
    for relative, source, _, prompt_of, embedder in caches:
        folder = in_project(relative)
        if not folder.is_dir():
            print(f"{folder}: no cache")
            continue
        if embedder not in models:  # each model resolved and read once
            settings = EmbedSettings.of_embedder(params, embedder)
            model_path = resolve_model(settings.model, settings.model_key)
            models[embedder] = (settings, model_fingerprint(model_path), embedding_dimension(model_path))
        settings, fingerprint, dim = models[embedder]
        keep = set(cache_keys(texts[source], settings, prompt_of(settings), fingerprint))
        print(prune(folder, keep, dry_run=args.dry_run, dim=dim).line(args.dry_run))
    root = in_project(paths.EMBEDDING_CACHE)
    unused = sorted({*root.glob("corpus/*/*"), *root.glob("questions/*")} - {in_project(c[0]) for c in caches})
    for folder in filter(Path.is_dir, unused):  # a pair params.yaml no longer embeds: nothing in it is needed
        print(f"{prune(folder, set(), dry_run=args.dry_run).line(args.dry_run)} (params.yaml embeds no such pair)")
    for legacy in paths.LEGACY_EMBEDDING_CACHES:  # a clone has data/embedding_cache/ for its .gitignore alone
        if not any(os.path.isdir(os.path.join(legacy, kind)) for kind in ("corpus", "questions")):
            continue
        print(
            f"{legacy}: the embedding caches' 0.2.0 location, read by the embed stages only for vectors the cache "
            "lacks; delete it once `dvc repro` has run every embed stage"
        )
    return 0
