"""The Qdrant adapter against a real local-mode Qdrant, where it differs from the other engines
(test_stores.py checks what they share): exact page sizes, Qdrant's search parameters, a collection
written by hand as a user would, field names, files left as they were, and errors that name the
address and never the API key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient, models
from store_helpers import DEPTH, DIM, N, assert_same_ranking, exact_top_k, opened, random_chunks

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.store_address import parse_address
from retrieval_bench.stores import registry


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
    with opened(address) as store:
        yield store


def test_pages_are_bounded(store):
    assert [len(page.ids) for page in store.pages(64, with_vectors=True)] == [64] * (N // 64) + [N % 64]


@pytest.mark.filterwarnings("ignore:Local mode performs exact")  # local mode ignores hnsw_ef, and says so
@pytest.mark.parametrize("search", [{"exact": True}, {"hnsw_ef": 128}])
def test_search_parameters_are_qdrant_search_params(chunks, store, search):
    ids, _, _, vectors, queries = chunks
    assert_same_ranking(store.search(queries, DEPTH, search, None), exact_top_k(queries, vectors, ids, DEPTH))


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
        return sorted(
            (str(path), path.stat().st_size, path.stat().st_mtime_ns)
            for path in Path(address.location).rglob("*")
            if path.is_file()
        )

    before = files()
    with opened(address) as store:
        list(store.pages(100, with_vectors=True))
        store.search(chunks[4], DEPTH, {"exact": True}, {"must": [{"key": "doc_id", "match": {"value": "doc1"}}]})
    assert files() == before


def test_a_collection_written_by_hand_with_its_own_field_names(tmp_path, chunks):
    """Integer point ids and no id field, the text in `body`, the document in `source`, a named
    Euclid vector: a distance d scores 1 - d²/2."""
    _, _, _, vectors, queries = chunks
    vectors = vectors[:100] * 3  # Euclid keeps lengths; local mode commits point by point, so fewer
    client = QdrantClient(path=str(tmp_path))
    client.create_collection(
        "notes", vectors_config={"dense": models.VectorParams(size=DIM, distance=models.Distance.EUCLID)}
    )
    client.upsert(
        "notes",
        points=[
            models.PointStruct(
                id=i, vector={"dense": vectors[i].tolist()}, payload={"body": f"note {i}", "source": f"s{i % 3}"}
            )
            for i in range(len(vectors))
        ],
    )
    client.close()
    for options in ("text=body&vector=dense", "text=body"):  # the only named vector needs no naming
        with opened(parse_address(f"qdrant:{tmp_path}?collection=notes&{options}")) as store:
            page = next(store.pages(50, with_vectors=True))
            assert (
                page.ids == [str(i) for i in range(50)]
                and page.texts[7] == "note 7"
                and page.metadata[7] == {"source": "s1"}
            )
            assert np.abs(page.vectors - vectors[:50]).max() <= 1e-6
            found = store.search(queries[:4], DEPTH, {"exact": True}, None)
            distances = np.linalg.norm(queries[:4, None] - vectors[None], axis=2)
            expected = [
                [(str(j), 1 - float(distances[q, j]) ** 2 / 2) for j in np.argsort(distances[q])[:DEPTH]]
                for q in range(4)
            ]
            assert_same_ranking(found, expected)
    for options, message in (("vector=sparse", "no vector 'sparse'"), ("", "no text in payload field 'text'")):
        with pytest.raises(InputError, match=message):
            with opened(parse_address(f"qdrant:{tmp_path}?collection=notes&{options}")) as store:
                next(store.pages(10, with_vectors=False))


def test_create_collection_honours_field_names(tmp_path, chunks):
    ids, texts, metadata, vectors, queries = chunks
    address = parse_address(f"qdrant:{tmp_path}?collection=c&id=key&text=body&vector=v")
    registry.create_collection(address, ids[:40], texts[:40], metadata[:40], vectors[:40])
    client = QdrantClient(path=str(tmp_path))
    record = client.scroll("c", limit=1, with_vectors=True)[0][0]
    client.close()
    assert set(record.payload) == {"key", "body", "doc_id", "start", "end"} and set(record.vector) == {"v"}
    with opened(address) as store:
        page = next(store.pages(100, with_vectors=False))
        assert sorted(zip(page.ids, page.texts, page.metadata), key=str) == sorted(
            zip(ids[:40], texts[:40], metadata[:40]), key=str
        )
        assert_same_ranking(store.search(queries, 5, None, None), exact_top_k(queries, vectors[:40], ids[:40], 5))


def test_an_unreachable_server_is_one_line_without_the_key(monkeypatch):
    monkeypatch.setenv("QDRANT_API_KEY", "s3cret-qdrant-key")
    address = parse_address("qdrant:http://127.0.0.1:1?collection=chunks")  # a port nothing listens on
    with pytest.raises(InputError) as error:
        registry.open_store(address)
    message = str(error.value)
    assert str(address) in message and "\n" not in message and "s3cret" not in message
