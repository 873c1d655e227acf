"""`retrieval-bench cache prune`: keep in each embedding cache only the vectors the current data
needs (the chunks in data/chunks.parquet and the questions in data/goldenset.jsonl, under the
embed settings in params.yaml); everything else — old models, prompts, backends, edited-away
texts — is dropped and the rest rewritten as one shard. The caches are local (under .dvc/tmp, not
DVC outputs): pruning changes no stage."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import read_jsonl
from retrieval_bench.core.params import load_params
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


def _current(source: str, read) -> list[str]:
    if not Path(source).is_file():
        raise InputError(
            f"{source}: not found; run `dvc repro` (or `dvc pull`) first so that prune knows what the current data needs"
        )
    return read(source)


def run_prune(args: argparse.Namespace) -> int:
    settings = EmbedSettings.from_params(load_params("embed", args.params))
    caches = (
        (
            paths.CORPUS_EMBEDDING_CACHE,
            paths.CHUNKS,
            lambda p: pd.read_parquet(p, columns=["text"])["text"].tolist(),
            settings.document_prompt,
        ),
        (
            paths.QUESTION_EMBEDDING_CACHE,
            paths.GOLDENSET,
            lambda p: [row["question"] for row in read_jsonl(p)],
            settings.query_prompt,
        ),
    )
    model_path = resolve_model(settings.model, settings.model_key)
    fingerprint, dim = model_fingerprint(model_path), embedding_dimension(model_path)
    for relative, source, read, prompt in caches:
        folder = in_project(relative)
        if not folder.is_dir():
            print(f"{folder}: no cache")
            continue
        report = prune(
            folder,
            set(cache_keys(_current(source, read), settings, prompt, fingerprint)),
            dry_run=args.dry_run,
            dim=dim,
        )
        print(report.line(args.dry_run))
    for legacy in filter(os.path.isdir, paths.LEGACY_EMBEDDING_CACHES):
        print(
            f"{legacy}: the embedding caches' 0.2.0 location, read by the embed stages only for vectors the cache "
            "lacks; delete it once `dvc repro` has run every embed stage"
        )
    return 0
