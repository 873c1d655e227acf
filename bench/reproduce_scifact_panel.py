"""Score all-MiniLM-L6-v2 and all-mpnet-base-v2 on SciFact, on whole documents and on 800-char chunks.

    make install-mpnet reproduce-scifact-panel     (or: python bench/reproduce_scifact_panel.py PATH/TO/scifact)

Like bench/reproduce_scifact.py (its pinned params, a temporary git + DVC copy of the project, the
real `dvc repro`), with a panel of four systems: each model on SciFact's own documents (5,183
abstracts: `default` chunking) and on 800-char chunks with 100 overlap (`c800`). Each model's
whole-document nDCG@10 is checked against its published SciFact figure (MTEB's, see PUBLISHED):
exit 0 when both are within TOLERANCE, 2 when one is not.

all-mpnet-base-v2 is read from models/all-mpnet-base-v2 (`make install-mpnet`; the temporary copy
links to it). Each system's metrics are the strict view's (metrics/panel/SYSTEM/metrics.json).

The pipeline's embedding cache (content-addressed: the model's files and the text) is seeded from
--embedding-cache and saved back after the run, a failed or interrupted one too, so a rerun need
not embed again what an earlier one embedded.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import ROOT, SCIFACT, copy_project, project_env, run_main
from install_mpnet import DEFAULT_TARGET, WEIGHTS_SHA256, installed_sha256
from reproduce_scifact import MTEB_NDCG_AT_10, scifact_params

from retrieval_bench.core import paths
from retrieval_bench.core.params_panel import embedded_pairs

TOLERANCE = 0.002
MPNET = "models/all-mpnet-base-v2"  # relative to the project: the temporary copy links models/
# The published SciFact nDCG@10 (test split) of each model. all-MiniLM-L6-v2: MTEB, as in
# bench/reproduce_scifact.py. all-mpnet-base-v2: its model card (README.md in the packages) gives
# no figure; MTEB's results repository does: github.com/embeddings-benchmark/results,
# results/sentence-transformers__all-mpnet-base-v2/84f2bcc00d77236f9e89c8a360a00fb1139bf47d/SciFact.json
# (mteb 1.12.75), ndcg_at_10 0.6557.
PUBLISHED = {"default": MTEB_NDCG_AT_10, "mpnet": 0.6557}
MODELS = {"default": "all-MiniLM-L6-v2", "mpnet": "all-mpnet-base-v2"}
CHUNKINGS = {"default": {}, "c800": {"chars": 800, "overlap": 100}}
# mpnet runs on OpenVINO in fp32: 2.3x torch's speed on a 2-core AVX-512 CPU, its vectors within
# 2e-7 of torch's (docs/benchmarks.md); 384 tokens: the model's own limit. MiniLM keeps torch, as in
# bench/reproduce_scifact.py.
EMBEDDERS = {
    "default": {},
    "mpnet": {"model": MPNET, "max_seq_length": 384, "backend": "openvino", "precision": "fp32"},
}
PANEL = {
    "default": {"chunking": "default", "embedder": "default", "method": "dense"},  # MiniLM on whole documents
    "mpnet-docs": {"chunking": "default", "embedder": "mpnet", "method": "dense"},
    "minilm-c800": {"chunking": "c800", "embedder": "default", "method": "dense"},
    "mpnet-c800": {"chunking": "c800", "embedder": "mpnet", "method": "dense"},
}
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "retrieval-bench-scifact-embeddings"


def panel_params(scifact: Path) -> dict:
    params = scifact_params(scifact)
    params["chunkings"] = copy.deepcopy(CHUNKINGS)
    params["embedders"] = copy.deepcopy(EMBEDDERS)
    params["panel"] = copy.deepcopy(PANEL)
    params["embedded"] = embedded_pairs(PANEL)
    return params


def save_caches(project: Path, cache: Path) -> None:
    """The copy's embedding caches into `cache`/embedding_cache (the layout saved before 0.3, kept)."""
    if (project / paths.EMBEDDING_CACHE).is_dir():
        shutil.rmtree(cache / "embedding_cache", ignore_errors=True)
        shutil.copytree(project / paths.EMBEDDING_CACHE, cache / "embedding_cache")


def run_repro(scifact: Path, params: dict, cache: Path) -> tuple[Path, float]:
    """`dvc repro` in a fresh temporary copy with `params`; the embedding caches seeded from and
    saved back to `cache`. Returns the copy (a temporary folder the caller removes) and the wall time."""
    env = project_env()
    project = Path(tempfile.mkdtemp(prefix="scifact-panel-"))
    copy_project(project, env)
    (project / "models").symlink_to(ROOT / "models", target_is_directory=True)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if (cache / "embedding_cache").is_dir():
        shutil.copytree(cache / "embedding_cache", project / paths.EMBEDDING_CACHE, dirs_exist_ok=True)
    started = time.monotonic()
    try:
        subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=project, check=True, env=env)
    except BaseException:
        save_caches(project, cache)  # what was embedded is kept: the cache is written batch by batch
        shutil.rmtree(project)
        raise
    save_caches(project, cache)
    return project, time.monotonic() - started


def row(system: str, metrics: dict) -> tuple[str, float | None]:
    """One table row for `system`, and its difference from the published figure (docs systems)."""
    spec = PANEL[system]
    model, chunks = MODELS[spec["embedder"]], "documents" if spec["chunking"] == "default" else "800 chars"
    ndcg = metrics["ndcg@10"]
    unscorable = metrics.get("n_questions_without_relevant_chunk", 0)
    note = f"{metrics.get('n_questions', '?')} questions" + (f", {unscorable} unscorable" if unscorable else "")
    if spec["chunking"] != "default":
        return f"| {system} | {model} | {chunks} | {ndcg:.4f} | | {note} |", None
    delta = ndcg - PUBLISHED[spec["embedder"]]
    published = f"{PUBLISHED[spec['embedder']]} ({delta:+.4f})"
    return f"| {system} | {model} | {chunks} | {ndcg:.4f} | {published} | {note} |", delta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "scifact", nargs="?", default=str(SCIFACT), help=f"the BEIR SciFact folder (default: {SCIFACT})"
    )
    parser.add_argument(
        "--embedding-cache",
        default=str(DEFAULT_CACHE),
        help=f"where vectors are kept between runs (default: {DEFAULT_CACHE})",
    )
    args = parser.parse_args(argv)
    scifact, cache = Path(args.scifact).resolve(), Path(args.embedding_cache)
    if not (scifact / "corpus.jsonl").is_file():
        print(f"error: {scifact}: not a BEIR folder (no corpus.jsonl)", file=sys.stderr)
        return 1
    if installed_sha256(DEFAULT_TARGET) != WEIGHTS_SHA256:
        print(f"error: {DEFAULT_TARGET}: all-mpnet-base-v2 is not installed; run `make install-mpnet`", file=sys.stderr)
        return 1
    project, wall = run_repro(scifact, panel_params(scifact), cache)
    try:
        results = {
            system: json.loads((project / "metrics" / "panel" / system / "metrics.json").read_text())
            for system in PANEL
        }
        print((project / "metrics" / "leaderboard.md").read_text())
    finally:
        shutil.rmtree(project)
    print("| system | model | chunks | nDCG@10 | published (difference) | |")
    print("|---|---|---|---:|---|---|")
    deltas = []
    for system, metrics in results.items():
        line, delta = row(system, metrics)
        print(line)
        if delta is not None:
            deltas.append(delta)
    print(json.dumps(results))
    print(f"dvc repro took {wall:.0f} s", file=sys.stderr)
    return 0 if all(abs(delta) <= TOLERANCE for delta in deltas) else 2


if __name__ == "__main__":
    run_main(main)
