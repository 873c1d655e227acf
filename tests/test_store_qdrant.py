"""The Qdrant adapter against a real local-mode Qdrant: a collection written by create_collection or
by hand as a user would, read back page by page, searched against exact numpy top-k, and errors that
name the address and never the API key."""
from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from retrieval_bench.io import InputError
from retrieval_bench.stores import registry
from retrieval_bench.stores.base import parse_address

pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient, models  # noqa: E402
from store_helpers import DEPTH, DIM, N, assert_same_ranking, exact_top_k, random_chunks  # noqa: E402


@pytest.fixture(scope="module")
def chunks():
    return random_chunks(7)


@pytest.fixture(scope="module")
def address(chunks, tmp_path_factory):
    ids, texts, metadata, vectors, _ = chunks
    address = parse_address(f"qdrant:{tmp_path_factory.mktemp('q') / 'store'}?collection=chunks")
    registry.create_collection(address, ids, texts, metadata, vectors, index={"m": 8, "ef_construct": 64})
    return address


@pytest.fixture
def store(address):
    opened = registry.open_store(address)
    yield opened
    opened.close()


def test_pages_are_bounded_and_give_back_what_was_written(chunks, store):
    ids, texts, metadata, vectors, _ = chunks
    assert store.count() == N
    pages = list(store.pages(64, with_vectors=True))
    assert [len(page.ids) for page in pages] == [64, 64, 64, 64, 44]
    read = {chunk: (text, meta, vector) for page in pages
            for chunk, text, meta, vector in zip(page.ids, page.texts, page.metadata, page.vectors)}
    assert sorted(read) == sorted(ids)
    for i, chunk in enumerate(ids):
        text, meta, vector = read[chunk]
        assert (text, meta) == (texts[i], metadata[i])
        assert vector.dtype == np.float32 and np.abs(vector - vectors[i]).max() <= 1e-6
    assert all(page.vectors is None for page in store.pages(100, with_vectors=False))


@pytest.mark.filterwarnings("ignore:Local mode performs exact")  # local mode ignores hnsw_ef, and says so
@pytest.mark.parametrize("search", [None, {"exact": True}, {"hnsw_ef": 128}])
def test_search_equals_exact_top_k(chunks, store, search):
    ids, _, _, vectors, queries = chunks
    assert_same_ranking(store.search(queries, DEPTH, search, None), exact_top_k(queries, vectors, ids, DEPTH))


def test_a_filter_restricts_the_search(chunks, store):
    ids, _, metadata, vectors, queries = chunks
    only = {"must": [{"key": "doc_id", "match": {"value": "doc3"}}]}
    rows = [i for i, meta in enumerate(metadata) if meta["doc_id"] == "doc3"]
    assert_same_ranking(store.search(queries, DEPTH, None, only), exact_top_k(queries, vectors, ids, DEPTH, rows))


def test_bad_search_parameters_or_filter_are_one_line(store):
    query = np.ones((1, DIM), dtype=np.float32)
    with pytest.raises(InputError, match="hnsw_eff") as error:
        store.search(query, DEPTH, {"hnsw_eff": 64}, None)
    assert str(store.address) in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(InputError, match="filter") as error:
        store.search(query, DEPTH, None, {"must": "doc3"})
    assert "\n" not in str(error.value)


def test_reading_and_searching_never_change_the_files(address, chunks):
    """load_chunks' source stamp is the files' sizes and times: reading must leave them as they are."""
    def files():
        return sorted((str(path), path.stat().st_size, path.stat().st_mtime_ns) for path in Path(address.location).rglob("*") if path.is_file())
    before = files()
    store = registry.open_store(address)
    try:
        list(store.pages(100, with_vectors=True))
        store.search(chunks[4], DEPTH, {"exact": True}, {"must": [{"key": "doc_id", "match": {"value": "doc1"}}]})
    finally:
        store.close()
    assert files() == before


def test_a_collection_written_by_hand_with_its_own_field_names(tmp_path, chunks):
    """Integer point ids and no id field, the text in `body`, the document in `source`, a named
    Euclid vector: a distance d scores 1 - d²/2."""
    _, _, _, vectors, queries = chunks
    vectors = vectors[:100] * 3  # Euclid keeps lengths; local mode commits point by point, so fewer
    client = QdrantClient(path=str(tmp_path))
    client.create_collection("notes", vectors_config={"dense": models.VectorParams(size=DIM, distance=models.Distance.EUCLID)})
    client.upsert("notes", points=[models.PointStruct(id=i, vector={"dense": vectors[i].tolist()}, payload={"body": f"note {i}", "source": f"s{i % 3}"})
                                   for i in range(len(vectors))])
    client.close()
    for options in ("text=body&vector=dense", "text=body"):  # the only named vector needs no naming
        store = registry.open_store(parse_address(f"qdrant:{tmp_path}?collection=notes&{options}"))
        try:
            page = next(store.pages(50, with_vectors=True))
            assert page.ids == [str(i) for i in range(50)] and page.texts[7] == "note 7" and page.metadata[7] == {"source": "s1"}
            assert np.abs(page.vectors - vectors[:50]).max() <= 1e-6
            found = store.search(queries[:4], DEPTH, {"exact": True}, None)
            distances = np.linalg.norm(queries[:4, None] - vectors[None], axis=2)
            expected = [[(str(j), 1 - float(distances[q, j]) ** 2 / 2) for j in np.argsort(distances[q])[:DEPTH]] for q in range(4)]
            assert_same_ranking(found, expected)
        finally:
            store.close()
    for options, message in (("vector=sparse", "no vector 'sparse'"), ("", "no text in payload field 'text'")):
        with pytest.raises(InputError, match=message):
            store = registry.open_store(parse_address(f"qdrant:{tmp_path}?collection=notes&{options}"))
            try:
                next(store.pages(10, with_vectors=False))
            finally:
                store.close()


def test_create_collection_honours_field_names(tmp_path, chunks):
    ids, texts, metadata, vectors, queries = chunks
    address = parse_address(f"qdrant:{tmp_path}?collection=c&id=key&text=body&vector=v")
    registry.create_collection(address, ids[:40], texts[:40], metadata[:40], vectors[:40])
    client = QdrantClient(path=str(tmp_path))
    record = client.scroll("c", limit=1, with_vectors=True)[0][0]
    client.close()
    assert set(record.payload) == {"key", "body", "doc_id", "start", "end"} and set(record.vector) == {"v"}
    store = registry.open_store(address)
    try:
        page = next(store.pages(100, with_vectors=False))
        assert sorted(zip(page.ids, page.texts, page.metadata), key=str) == sorted(zip(ids[:40], texts[:40], metadata[:40]), key=str)
        assert_same_ranking(store.search(queries, 5, None, None), exact_top_k(queries, vectors[:40], ids[:40], 5))
    finally:
        store.close()


@pytest.mark.parametrize("where", ["missing path", "missing collection"])
def test_a_missing_store_is_one_line_naming_the_address(address, tmp_path, where):
    text = f"qdrant:{tmp_path / 'nowhere'}?collection=chunks" if where == "missing path" else f"qdrant:{address.location}?collection=other"
    with pytest.raises(InputError) as error:
        registry.open_store(parse_address(text))
    message = str(error.value)
    assert str(parse_address(text)) in message and "\n" not in message
    assert not (tmp_path / "nowhere").exists()  # reading never creates a store


def test_an_unreachable_server_is_one_line_without_the_key(monkeypatch):
    monkeypatch.setenv("QDRANT_API_KEY", "s3cret-qdrant-key")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = parse_address(f"qdrant:http://127.0.0.1:{port}?collection=chunks")
    with pytest.warns(UserWarning, match="insecure"), pytest.raises(InputError) as error:  # the key over plain http
        registry.open_store(address)
    message = str(error.value)
    assert str(address) in message and "\n" not in message and "s3cret" not in message
