"""Vector stores through the real `dvc repro`: a collection built in each of the four engines from the
sample's chunks and vectors scores exactly like the same chunks as a Parquet file (dense, reusing
the stored vectors); the `store` method searches the store's own index and `compare` reads it; a
collection whose vectors another model made is refused in one line; a Chroma server started here
serves the same pipeline through its URL; an API key never reaches an error message."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from chroma_server import chroma_server, free_port
from conftest import copy_project, dvc, git, read_metrics, run, set_params, tool_env

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.core.store_address import parse_address
from retrieval_bench.corpus.load import load_corpus
from retrieval_bench.embedding.settings import EmbedSettings
from retrieval_bench.embedding.stored_vectors import stored_corpus_vectors
from retrieval_bench.stores import registry

pytestmark = pytest.mark.pipeline

ENGINES = ["chroma", "lancedb", "qdrant", "sqlite-vec"]
SECRET = "sk-chroma-secret-never-printed"


def ran_stages(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")} - {"check_params"}


def address_text(engine: str, location: Path | str, name: str = "sample") -> str:
    return f"{engine}:{location}?{'table' if engine in ('lancedb', 'sqlite-vec') else 'collection'}={name}"


def store_location(project: Path, engine: str) -> Path:
    return (
        project
        / "stores"
        / {"chroma": "chroma", "lancedb": "sample.lancedb", "qdrant": "qdrant", "sqlite-vec": "sample.db"}[engine]
    )


@dataclass
class Routes:
    project: Path
    chunks: pd.DataFrame  # the sample's chunks, as the documents route cuts them
    vectors: np.ndarray  # their vectors (paths.CORPUS_VECTORS of the Parquet route)
    outputs: dict[str, bytes]  # paths.CHUNKS and paths.DOCUMENTS of the Parquet route
    metrics: dict  # metrics.json of the Parquet route

    def build(
        self, engine: str, vectors: np.ndarray | None = None, name: str = "sample", index: dict | None = None
    ) -> str:
        """A collection of the sample's chunks (doc_id, start, end as metadata) and `vectors`."""
        text = address_text(engine, store_location(self.project, engine), name)
        metadata = self.chunks[["doc_id", "start", "end"]].to_dict("records")
        registry.create_collection(
            parse_address(text),
            self.chunks["chunk_id"].tolist(),
            self.chunks["text"].tolist(),
            metadata,
            self.vectors if vectors is None else vectors,
            index,
        )
        return text


@pytest.fixture(scope="module")
def routes(tmp_path_factory) -> Routes:
    """The sample's chunks (cut from its documents) as a Parquet file of ready chunks with their
    documents and offsets, through `dvc repro`."""
    project = copy_project(tmp_path_factory.mktemp("stores") / "project")
    documents = load_corpus(project / "data" / "sample" / "sqlite")
    (project / "exports").mkdir()
    documents.chunks[["chunk_id", "doc_id", "start", "end", "text"]].to_parquet(
        project / "exports" / "chunks.parquet", index=False
    )
    set_params(project, **{"load.source": "exports/chunks.parquet", "load.id_field": "chunk_id"})
    dvc("repro", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-qm", "parquet route", cwd=project)
    outputs = {name: (project / name).read_bytes() for name in (paths.CHUNKS, paths.DOCUMENTS)}
    rebuilt = pd.read_parquet(project / paths.DOCUMENTS)
    # The same chunks as the documents route, and the documents rebuilt from their offsets (bar the
    # whitespace after a document's last chunk), so evidence spans land where they did.
    assert pd.read_parquet(project / paths.CHUNKS).equals(documents.chunks)
    assert rebuilt["doc_id"].tolist() == documents.documents["doc_id"].tolist()
    assert [text.rstrip() for text in rebuilt["text"]] == [text.rstrip() for text in documents.documents["text"]]
    return Routes(
        project,
        documents.chunks,
        np.load(project / paths.CORPUS_VECTORS),
        outputs,
        read_metrics(project),
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_store_built_from_the_sample_scores_like_the_parquet_route(engine, routes):
    project = routes.project
    source = routes.build(engine)
    set_params(
        project,
        **{"load.source": source, "load.id_field": "id", "embed.corpus_vectors": "stored", "retrieval.method": "dense"},
    )
    output = dvc("repro", cwd=project).stdout
    assert {"load_chunks", "embed_corpus@default-default"} <= ran_stages(output)
    assert "embed_questions@default" not in ran_stages(output)
    assert "chunk vectors read from" in output and "checked on 32 of them" in output
    for name, expected in routes.outputs.items():
        assert (project / name).read_bytes() == expected, name  # the same chunks and documents, byte for byte
    stored = np.load(project / paths.CORPUS_VECTORS)
    assert np.allclose(
        stored, routes.vectors, rtol=0, atol=1e-6
    )  # cosine collections normalize again: the last bit may move
    assert json.loads((project / "data" / "source_stamp.json").read_text())["kind"] == "local store"
    assert_same_metrics(read_metrics(project), routes.metrics)


# Figures that are raw cosine similarities, not ranks: the store's float32 may move their last bits
# (as the vectors' above), which no metric of a rank does.
SCORE_VALUED = ("abstention_threshold", "top_score_median_answerable", "top_score_median_unanswerable")


def assert_same_metrics(got: dict, expected: dict) -> None:
    """Every metric equal, the score-valued ones to 1e-6 (metrics.json's by_kind entries too)."""
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        if isinstance(value, dict):
            assert_same_metrics(got[name], value)
        elif name in SCORE_VALUED:
            assert got[name] == pytest.approx(value, abs=1e-6), name
        else:
            assert got[name] == value, name


def test_the_store_method_reports_what_its_index_costs_and_runs_through_compare(routes):
    project = routes.project
    git("add", "-A", cwd=project)
    git("commit", "-qm", "dense", "--allow-empty", cwd=project)
    dense = read_metrics(project)
    # A table of the same chunks with an IVF index, one partition probed: the index costs recall.
    ivf = routes.build("lancedb", name="ivf", index={"type": "IVF_FLAT", "num_partitions": 8})
    set_params(
        project,
        **{"retrieval.method": "store", "retrieval.store.address": ivf, "retrieval.store.search": {"nprobes": 1}},
    )
    assert ran_stages(dvc("repro", cwd=project).stdout) == {"retrieve", "judge", "score", "leaderboard"}
    narrow = read_metrics(project)
    info = json.loads((project / "data" / "panel" / "default" / "run_info.json").read_text())
    assert info["method"] == "store" and info["store"] == str(parse_address(ivf)) and info["search"] == {"nprobes": 1}
    assert 0 < narrow["ann_recall@10"] < 1.0 and narrow["ann_recall@10"] == pytest.approx(info["ann_recall"]["10"])
    compared = json.loads(
        run([sys.executable, "-m", "retrieval_bench.cli", "compare", "HEAD", "workspace", "--json"], cwd=project).stdout
    )
    answerable = dense["n_questions"] - dense.get("n_unanswerable", 0)  # compare pairs the ranked questions
    assert compared["n_questions"] == answerable and "recall@10" in compared["metrics"]
    set_params(
        project, **{"retrieval.method": "dense", "retrieval.store.address": None, "retrieval.store.search": None}
    )


def test_vectors_another_model_made_are_refused_in_one_line(routes, tmp_path):
    project = routes.project
    rng = np.random.default_rng(0)
    foreign = rng.normal(size=routes.vectors.shape).astype(np.float32)
    source = routes.build("lancedb", vectors=foreign / np.linalg.norm(foreign, axis=1, keepdims=True), name="foreign")
    set_params(project, **{"load.source": source, "embed.corpus_vectors": "stored", "retrieval.method": "dense"})
    failed = dvc("repro", cwd=project, check=False)
    errors = [line for line in (failed.stdout + failed.stderr).splitlines() if line.startswith("error:")]
    assert failed.returncode != 0 and len(errors) == 1, failed.stderr
    assert (
        f"the vectors in {parse_address(source)} were not made by embed.model sentence-transformers/all-MiniLM-L6-v2"
        in errors[0]
    )
    assert "which model made them is unknown" in errors[0] and "embed.corpus_vectors: embed" in errors[0]

    # Another dimension is refused the same way, before any cosine is taken.
    narrow = routes.build(
        "lancedb", vectors=foreign[:, :64] / np.linalg.norm(foreign[:, :64], axis=1, keepdims=True), name="narrow"
    )
    with pytest.raises(
        InputError, match=r"have 64 dimensions and embed.model sentence-transformers/all-MiniLM-L6-v2 makes 384"
    ):
        stored_corpus_vectors(
            narrow,
            routes.chunks[["chunk_id", "text"]],
            EmbedSettings.from_params(DEFAULTS["embed"]),
            tmp_path / "cache",
        )


def test_a_chroma_server_started_here_serves_the_pipeline_through_its_url(routes, tmp_path):
    project = routes.project
    with chroma_server(tmp_path / "chroma-server") as url:
        source = address_text("chroma", url)
        registry.create_collection(
            parse_address(source),
            routes.chunks["chunk_id"].tolist(),
            routes.chunks["text"].tolist(),
            routes.chunks[["doc_id", "start", "end"]].to_dict("records"),
            routes.vectors,
            None,
        )
        set_params(project, **{"load.source": source, "embed.corpus_vectors": "stored", "retrieval.method": "store"})
        output = dvc("repro", cwd=project).stdout
    assert {"load_chunks", "embed_corpus@default-default", "retrieve"} <= ran_stages(output)
    assert (project / paths.CHUNKS).read_bytes() == routes.outputs[paths.CHUNKS]
    assert (
        json.loads((project / "data" / "source_stamp.json").read_text())["kind"] == "store server"
    )  # re-read on every repro
    assert read_metrics(project)["ann_recall@10"] >= 0.99  # HNSW with ef_search 100 over ~60 chunks visits them all


def test_an_api_key_never_reaches_the_one_line_error(routes):
    project = routes.project
    source = address_text("chroma", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    set_params(project, **{"load.source": source, "embed.corpus_vectors": "embed", "retrieval.method": "dense"})
    failed = run(
        [sys.executable, "-m", "stages.load_chunks"],
        cwd=project,
        check=False,
        env={**tool_env(), "CHROMA_API_KEY": SECRET},
    )
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {parse_address(source)}: cannot reach the Chroma server")
    assert SECRET not in failed.stdout + failed.stderr
