"""Every store adapter against its real engine, through the one interface: a collection written by
create_collection and read back by open_store — count, paging, vectors, the engine's own search
against exact numpy top-k, filters, one-line errors, a missing extra. Embedded engines run in
process; Chroma also as a server (`chroma run` on 127.0.0.1)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from chroma_server import chroma_server
from store_helpers import assert_same_ranking, exact_top_k, opened, unit

import retrieval_bench.stores as stores_package
from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.store_address import ENGINES, StoreAddress, parse_address
from retrieval_bench.stores import registry
from retrieval_bench.stores.base import similarity

N, DIM, DEPTH, ROWS = 250, 16, 10, 64
ALL = ["chroma", "chroma-server", "lancedb", "qdrant", "sqlite-vec"]
EMBEDDED = ["chroma", "lancedb", "qdrant", "sqlite-vec"]
# Build settings that make each engine's search exhaustive on N chunks (Chroma is always HNSW: an
# ef of N visits every node); the others search exactly without an index (Qdrant's local mode,
# sqlite-vec's vec0) or have none unless asked (LanceDB).
EXACT_INDEX = {
    "chroma": {"ef_search": N, "ef_construction": N},
    "chroma-server": {"ef_search": N, "ef_construction": N},
}
# One document's chunks, in each engine's filter syntax.
FILTER = {
    "chroma": {"doc_id": "d3.md"},
    "lancedb": "doc_id = 'd3.md'",
    "sqlite-vec": "doc_id = 'd3.md'",
    "qdrant": {"must": [{"key": "doc_id", "match": {"value": "d3.md"}}]},
}
NOWHERE = "127.0.0.1:1"  # a port nothing listens on (a free port may be another test worker's server by now)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    metadata = [{"doc_id": f"d{i % 7}.md", "start": 100 * (i // 7), "end": 100 * (i // 7) + 40} for i in range(N)]
    ids = [f"{m['doc_id']}:{m['start']}-{m['end']}" for m in metadata]
    texts = [f"chunk {i} about {rng.choice(['pages', 'locks', 'wal', 'vacuum'])}" for i in range(N)]
    return ids, texts, metadata, unit(rng.normal(size=(N, DIM))), unit(rng.normal(size=(8, DIM)))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with chroma_server(tmp_path_factory.mktemp("chroma-server")) as url:
        yield url


def address_of(engine: str, folder, name: str = "chunks", server_url: str | None = None) -> StoreAddress:
    location = {
        "chroma": folder / "chroma",
        "chroma-server": server_url,
        "lancedb": folder / "store.lancedb",
        "qdrant": folder / "qdrant",
        "sqlite-vec": folder / "store.db",
    }[engine]
    key = "table" if engine in ("lancedb", "sqlite-vec") else "collection"
    return parse_address(f"{engine.removesuffix('-server')}:{location}?{key}={name}")


@pytest.fixture(scope="module")
def built(request, data, tmp_path_factory):
    """engine -> the address of its collection of `data`, built once per engine."""
    made = {}

    def build(engine: str) -> StoreAddress:
        if engine not in made:
            url = request.getfixturevalue("server") if engine == "chroma-server" else None
            address = address_of(engine, tmp_path_factory.mktemp(engine), server_url=url)
            ids, texts, metadata, vectors, _ = data
            registry.create_collection(address, ids, texts, metadata, vectors, EXACT_INDEX.get(engine))
            made[engine] = address
        return made[engine]

    return build


@pytest.fixture(params=ALL)
def store(request, built):
    """Each engine's store of `data`, opened for one test."""
    with opened(built(request.param)) as store:
        yield store


def test_count_pages_and_vectors_give_back_what_was_written(store, data):
    ids, texts, metadata, vectors, _ = data
    assert store.count() == N
    pages = list(store.pages(ROWS, with_vectors=True))
    assert len(pages) >= N // ROWS and all(len(page.ids) <= ROWS for page in pages)
    read = {
        chunk_id: (text, fields, vector)
        for page in pages
        for chunk_id, text, fields, vector in zip(page.ids, page.texts, page.metadata, page.vectors)
    }
    assert sorted(read) == sorted(ids)
    for chunk_id, text, fields, vector in zip(ids, texts, metadata, vectors):
        assert read[chunk_id][0] == text
        assert {key: read[chunk_id][1][key] for key in fields} == fields
        # Cosine collections (Chroma, Qdrant) store the vector normalized again: equal to the last bit or two.
        assert read[chunk_id][2].dtype == np.float32 and np.allclose(read[chunk_id][2], vector, rtol=0, atol=1e-6)
    assert all(page.vectors is None for page in store.pages(ROWS, with_vectors=False))


def test_search_is_exact_top_k_as_similarities(store, data):
    ids, _, _, vectors, queries = data
    assert_same_ranking(store.search(queries, DEPTH, None, None), exact_top_k(queries, vectors, ids, DEPTH))


def test_filters_in_the_engines_own_syntax(store, data):
    ids, _, metadata, vectors, queries = data
    found = store.search(queries, DEPTH, None, FILTER[store.address.engine])
    assert_same_ranking(
        found, exact_top_k(queries, vectors, ids, DEPTH, [i for i, m in enumerate(metadata) if m["doc_id"] == "d3.md"])
    )


# Engines whose in-process mode has a real ANN index (Qdrant's local mode and sqlite-vec search exactly).
ANN = {
    "chroma": ({"max_neighbors": 4, "ef_construction": 8, "ef_search": 8}, None),
    "lancedb": ({"type": "IVF_PQ", "num_partitions": 16, "num_sub_vectors": 4}, {"nprobes": 2}),
}


@pytest.mark.parametrize("engine", sorted(ANN))
def test_ann_index_loses_some_recall_and_search_params_apply(engine, tmp_path):
    rng = np.random.default_rng(5)
    n = 3000
    vectors, queries = unit(rng.normal(size=(n, 32))), unit(rng.normal(size=(50, 32)))
    ids = [f"c{i}" for i in range(n)]
    address = address_of(engine, tmp_path)
    index, narrow = ANN[engine]
    registry.create_collection(address, ids, [f"t{i}" for i in range(n)], [{"doc_id": "d"}] * n, vectors, index)
    truth = [{chunk for chunk, _ in row} for row in exact_top_k(queries, vectors, ids, DEPTH)]
    with opened(address) as store:

        def recall(search):
            found = store.search(queries, DEPTH, search, None)
            assert all(
                len(row) == DEPTH and [s for _, s in row] == sorted((s for _, s in row), reverse=True) for row in found
            )
            return np.mean([len({chunk for chunk, _ in row} & best) / DEPTH for row, best in zip(found, truth)])

        approximate = recall(narrow)
        assert 0.05 < approximate < 1.0  # an index that loses recall, measurably
        if engine == "lancedb":
            assert recall({"nprobes": 16, "refine_factor": 20}) > approximate  # every partition, exact re-ranking


def one_line_error(call) -> str:
    with pytest.raises(InputError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("engine", EMBEDDED)
def test_reading_a_store_keeps_its_stamp_and_a_rebuild_changes_it(engine, data, tmp_path):
    """The stamp check_params writes for a local store (corpus.source_stamp) must not move when the
    pipeline only reads the store (else load_chunks, embed_corpus and retrieve rerun on every
    repro), and must move when the collection is rebuilt."""
    from retrieval_bench.corpus.source_stamp import source_stamp

    ids, texts, metadata, vectors, _ = data
    address = address_of(engine, tmp_path)
    registry.create_collection(address, ids, texts, metadata, vectors, EXACT_INDEX.get(engine))
    first = source_stamp(str(address))
    assert first["kind"] == "local store" and "md5" in first
    reader = (
        "import sys, numpy as np; from retrieval_bench.stores import registry; from retrieval_bench.core.store_address import parse_address\n"
        "store = registry.open_store(parse_address(sys.argv[1]))\n"
        "print(sum(len(page.ids) for page in store.pages(64, with_vectors=True)))\n"
        "dim = int(sys.argv[2]); store.search(np.ones((1, dim), dtype=np.float32) / dim ** 0.5, 10, None, None)\n"
        "store.close()"
    )
    for _ in range(2):  # as load_chunks, embed_corpus and retrieve do: each its own process, ended as a stage ends
        read = subprocess.run(
            [sys.executable, "-c", reader, str(address), str(DIM)], capture_output=True, text=True, check=True
        )
        assert int(read.stdout) == N and source_stamp(str(address)) == first
    registry.create_collection(address, ids[1:], texts[1:], metadata[1:], vectors[1:], EXACT_INDEX.get(engine))
    assert source_stamp(str(address))["md5"] != first["md5"]


@pytest.mark.parametrize("engine", EMBEDDED)
def test_a_missing_store_or_collection_is_one_line_naming_the_address(engine, built, tmp_path):
    nowhere = address_of(engine, tmp_path / "nowhere")
    assert str(nowhere) in one_line_error(lambda: registry.open_store(nowhere))
    assert not (tmp_path / "nowhere").exists()  # reading never creates a store
    existing = built(engine)
    other = StoreAddress(existing.engine, existing.location, "absent", existing.options)
    message = one_line_error(lambda: registry.open_store(other))
    assert str(other) in message and "absent" in message


def test_chroma_server_errors_name_the_address_and_never_the_key(monkeypatch, server):
    monkeypatch.setenv("CHROMA_API_KEY", "sk-secret-never-printed")
    unreachable = parse_address(f"chroma:http://{NOWHERE}?collection=chunks")
    message = one_line_error(lambda: registry.open_store(unreachable))
    assert str(unreachable) in message and "sk-secret-never-printed" not in message
    absent = parse_address(f"chroma:{server}?collection=absent")
    message = one_line_error(lambda: registry.open_store(absent))
    assert str(absent) in message and "sk-secret-never-printed" not in message


@pytest.mark.parametrize("engine", EMBEDDED)
def test_a_missing_extra_is_one_line_naming_the_pip_install(engine, monkeypatch, tmp_path):
    extra, module = ENGINES[engine]
    adapter = {"sqlite-vec": "sqlite_vec"}.get(engine, engine)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if the package were not installed
    monkeypatch.delitem(sys.modules, f"retrieval_bench.stores.{adapter}", raising=False)
    monkeypatch.delattr(stores_package, adapter, raising=False)
    message = one_line_error(lambda: registry.open_store(address_of(engine, tmp_path)))
    assert f"pip install -e '.[{extra}]'" in message


def test_an_address_error_never_prints_its_options():
    """A secret put in an address by mistake (keys belong in the environment) stays out of the error."""
    message = one_line_error(lambda: parse_address("qdrant:https://h?collection=c&api_key=SECRET123"))
    assert "SECRET123" not in message and "qdrant:https://h" in message and "api_key" in message
    message = one_line_error(
        lambda: parse_address("qdrant:https://user:SECRET123@h?collection=c&body=x", "retrieval.store.address")
    )
    assert "SECRET123" not in message and message.startswith("retrieval.store.address")


def test_an_option_given_twice_is_one_line():
    """`?collection=a&table=b` (one option, two spellings) kept the collection and dropped the table
    unsaid; a repeated option kept its last value."""
    for query, named in (("collection=a&table=b", "collection and table"), ("table=t&text=a&text=b", "text")):
        message = one_line_error(lambda q=query: parse_address(f"lancedb:stores/x?{q}", "load.source"))
        assert message.startswith("load.source") and f"{named} given twice" in message
    assert parse_address("lancedb:stores/x?table=t&text=a").collection == "t"


def test_a_server_url_that_is_no_url_is_one_line():
    """An unclosed IPv6 bracket raised ValueError from urlsplit, a traceback out of check_params."""
    for engine in ("qdrant", "chroma"):
        message = one_line_error(
            lambda e=engine: parse_address(f"{e}:http://[::1?collection=d", "retrieval.store.address")
        )
        assert message.startswith("retrieval.store.address") and "not a URL (Invalid IPv6 URL)" in message


def test_a_lancedb_index_of_another_distance_is_one_line_when_searched(tmp_path):
    """A hamming index (binary vectors) has no similarity here: searching it names the address and
    the distance; reading its chunks still works."""
    import lancedb
    import pyarrow as pa
    from lancedb.index import IvfFlat

    bits = np.random.default_rng(2).integers(0, 256, size=(256, 8), dtype=np.uint8)
    table = lancedb.connect(tmp_path).create_table(
        "bits",
        pa.table(
            {
                "id": [f"c{i}" for i in range(len(bits))],
                "text": ["t"] * len(bits),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(bits.ravel()), bits.shape[1]),
            }
        ),
    )
    table.create_index("vector", config=IvfFlat(distance_type="hamming", num_partitions=2))
    address = parse_address(f"lancedb:{tmp_path}?table=bits")
    with opened(address) as store:
        assert store.count() == len(bits) and len(next(store.pages(ROWS, with_vectors=False)).ids) == ROWS
        message = one_line_error(lambda: store.search(np.ones((1, 8), dtype=np.float32), DEPTH, None, None))
    assert str(address) in message and "hamming" in message


@pytest.mark.parametrize(
    "metric, distance",
    [
        ("cosine", lambda c: 1 - c),
        ("ip", lambda c: 1 - c),
        ("dot", lambda c: 1 - c),
        ("score", lambda c: c),
        ("l2", lambda c: 2 - 2 * c),
        ("euclid", lambda c: np.sqrt(2 - 2 * c)),  # squared and plain L2 of unit vectors
    ],
)
def test_similarity_of_each_distance_is_the_cosine_of_unit_vectors(metric, distance):
    cosines = np.array([0.9, 0.3, -0.5])
    assert np.allclose(similarity(distance(cosines), metric), cosines)


def test_similarity_of_a_manhattan_distance_keeps_its_order():
    assert similarity(np.array([0.5, 1.0, 2.5]), "l1").tolist() == [-0.5, -1.0, -2.5]


def test_stored_vectors_come_in_chunk_order_at_unit_length_and_a_gap_is_one_line(tmp_path):
    """read_vectors: rows in the order of the chunk ids asked for, store chunks not asked for
    skipped, vectors off unit length renormalised; a chunk the store lacks, or an all-zero vector,
    is one line."""
    from retrieval_bench.embedding.stored_vectors import read_vectors

    rng = np.random.default_rng(5)
    ids = [f"c{i}" for i in range(40)]
    vectors = unit(rng.normal(size=(40, DIM)))
    vectors[3] *= 7.0  # stored unnormalised
    address = address_of("lancedb", tmp_path)
    registry.create_collection(address, ids, [f"text {i}" for i in ids], [{} for _ in ids], vectors)
    asked = ids[::-1][:30]  # another order, and ten store chunks not asked for
    read = read_vectors(address, asked)
    expected = unit(vectors[[ids.index(chunk_id) for chunk_id in asked]])
    assert read.dtype == np.float32 and np.allclose(read, expected, atol=1e-6)
    with pytest.raises(
        InputError, match=rf"1 chunks of {re.escape(paths.CHUNKS)} have no vector there \(e.g. elsewhere\)"
    ):
        read_vectors(address, [*asked, "elsewhere"])
    vectors[0] = 0.0
    registry.create_collection(address, ids, [f"text {i}" for i in ids], [{} for _ in ids], vectors)
    with pytest.raises(
        InputError, match=r"the vector of chunk 'c0' in .* is all zeros; it cannot be compared by cosine"
    ):
        read_vectors(address, ids)


def test_a_filter_matching_no_chunk_is_named(built, data):
    """A filter that matches nothing gave "no question of the golden set is in the run"."""
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.retrieval import store_search
    from retrieval_bench.retrieval.run import Corpus, Questions
    from retrieval_bench.retrieval.settings import RetrievalSettings

    ids, texts, _, vectors, queries = data
    address = built("sqlite-vec")
    store = {"address": str(address), "search": None, "filter": "doc_id = 'nosuch.md'"}
    settings = RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": "store", "depth": 5, "store": store})
    questions = Questions([f"q{i}" for i in range(len(queries))], [""] * len(queries), queries)
    with pytest.raises(InputError, match=r"retrieval\.store\.filter \"doc_id = 'nosuch.md'\" matched no chunk"):
        store_search.retrieve(questions, Corpus(ids, texts, vectors), settings, 5)


def test_chroma_refusing_vectors_of_another_width_names_the_model_not_the_filter(built, data):
    _, _, _, _, queries = data
    with opened(built("chroma")) as store:
        with pytest.raises(InputError, match="holds vectors of another model") as error:
            store.search(np.hstack([queries, queries]), 3, None, None)
    assert "retrieval.store.filter" not in str(error.value)
