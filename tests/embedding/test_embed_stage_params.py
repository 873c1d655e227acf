"""The embed stages read and check params.yaml once per run."""

from __future__ import annotations

from conftest import set_params
from stage_helpers import stage_in_process
from store_helpers import random_chunks

from retrieval_bench.core import params
from retrieval_bench.core.store_address import parse_address
from retrieval_bench.stores import registry


def test_embed_corpus_reads_params_yaml_once_with_stored_vectors(workdir, monkeypatch, capsys):
    """embed.corpus_vectors stored reads load.source too: from the one parse of params.yaml."""
    source = f"sqlite-vec:{workdir / 'store.db'}?table=docs"
    ids, texts, metadata, vectors, _ = random_chunks(0)
    documents = [{"doc_id": row["doc_id"]} for row in metadata]  # no offsets: these texts are no spans of one
    registry.create_collection(parse_address(source), ids, texts, documents, vectors, None)
    set_params(workdir, **{"load.source": source})
    for name in ("load_chunks", "chunk"):
        assert stage_in_process(name, workdir, monkeypatch, capsys).returncode == 0
    set_params(workdir, **{"embed.corpus_vectors": "stored"})
    parsed, read_yaml_file = [], params.read_yaml_file
    monkeypatch.setattr(params, "read_yaml_file", lambda path: parsed.append(path) or read_yaml_file(path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = stage_in_process("embed_corpus", workdir, monkeypatch, capsys)
    # Random vectors: not embed.model's, which the stage tells in one line, having read params once.
    told = result.stderr.splitlines()[-1]
    assert result.returncode == 1 and told.startswith("error: embed.corpus_vectors stored: the vectors in"), told
    assert len(parsed) == 1
