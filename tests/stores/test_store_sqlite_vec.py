"""The sqlite-vec adapter against the real extension, where it differs from the other engines
(test_stores.py checks what they share): pages in rowid order, filters vec0 applies inside its search
and ones SQLite applies after it, a vec0 table written by hand as a user would, column names, and a
file never written to."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pysqlite3.dbapi2 as sqlite3
import pytest
import sqlite_vec
from store_helpers import DEPTH, DIM, N, assert_same_ranking, exact_top_k, opened, random_chunks

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.store_address import parse_address
from retrieval_bench.stores import registry
from retrieval_bench.stores import sqlite_vec as adapter


@pytest.fixture(scope="module")
def chunks():
    return random_chunks(11)


def digest(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def address(chunks, tmp_path_factory):
    ids, texts, metadata, vectors, _ = chunks
    address = parse_address(f"sqlite-vec:{tmp_path_factory.mktemp('s') / 'store.db'}?table=chunks")
    registry.create_collection(address, ids, texts, metadata, vectors)
    return address


@pytest.fixture
def store(address):
    with opened(address) as store:
        yield store


def test_pages_are_bounded_and_in_rowid_order(chunks, store):
    ids, texts, metadata, vectors, _ = chunks
    pages = list(store.pages(64, with_vectors=True))
    assert [len(page.ids) for page in pages] == [64] * (N // 64) + [N % 64]
    assert [chunk for page in pages for chunk in page.ids] == ids  # rowid order: the order written
    assert [text for page in pages for text in page.texts] == texts
    assert [meta for page in pages for meta in page.metadata] == metadata
    assert np.array_equal(np.concatenate([page.vectors for page in pages]), vectors)  # the float32 bits as written


@pytest.mark.parametrize(
    "where, keep",
    [
        (
            "doc_id IN ('doc1', 'doc2') AND start >= 1000",
            lambda m: m["doc_id"] in ("doc1", "doc2") and m["start"] >= 1000,
        ),
        # vec0 cannot apply these inside its search; SQLite applies them to the k results after it
        ("lower(doc_id) = 'doc3'", lambda m: m["doc_id"] == "doc3"),
        ("start % 3 = 0", lambda m: m["start"] % 3 == 0),
    ],
)
def test_a_filter_restricts_the_search(chunks, store, where, keep):
    ids, _, metadata, vectors, queries = chunks
    rows = [i for i, m in enumerate(metadata) if keep(m)]
    assert_same_ranking(store.search(queries, DEPTH, None, where), exact_top_k(queries, vectors, ids, DEPTH, rows))


def test_a_filter_is_counted_once_and_a_widened_search_stays_wide(chunks, store):
    """store_search calls search() once per block of questions: the filter's count(*) runs once per
    store, and once a filter proved to be applied after the k-nearest search, later queries ask for
    the largest k straight away (one k-nearest query each, not two)."""
    ids, _, metadata, vectors, queries = chunks
    where = "lower(doc_id) = 'doc3'"
    statements: list[str] = []
    store.connection.set_trace_callback(statements.append)
    expected = exact_top_k(queries, vectors, ids, DEPTH, [i for i, m in enumerate(metadata) if m["doc_id"] == "doc3"])
    for _ in range(2):
        assert_same_ranking(store.search(queries, DEPTH, None, where), expected)
    assert len([sql for sql in statements if "count(*)" in sql and where in sql]) == 1
    assert len([sql for sql in statements if "MATCH" in sql]) == 2 * len(queries) + 1  # the first query tried k = DEPTH


def test_a_filter_that_leaves_too_few_is_an_error_not_a_short_ranking(monkeypatch, store):
    monkeypatch.setattr(adapter, "K_MAX", 20)  # as if the collection were far past sqlite-vec's 4096
    query = np.ones((1, DIM), dtype=np.float32)
    with pytest.raises(InputError, match="applied after the k-nearest search") as error:
        store.search(query, DEPTH, None, "lower(doc_id) = 'doc3'")
    assert str(store.address) in str(error.value)
    with pytest.raises(InputError, match="at most 20 neighbours"):
        store.search(query, 30, None, None)


@pytest.mark.parametrize(
    "search, where, message",
    [
        ({"ef": 10}, None, "no search parameters"),
        (None, {"doc_id": "doc3"}, "SQL condition"),
        (None, "text = 'text 3'", "auxiliary column"),  # vec0 refuses it in a k-nearest query
        (None, "nonsense = 1", "no such column"),
    ],
)
def test_bad_search_parameters_or_filter_are_one_line(store, search, where, message):
    with pytest.raises(InputError, match=message) as error:
        store.search(np.ones((1, DIM), dtype=np.float32), DEPTH, search, where)
    assert str(store.address) in str(error.value) and "\n" not in str(error.value)


def test_reading_and_searching_never_write_to_the_file(address, chunks):
    path = Path(address.location)
    before = (digest(path), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir()))
    with opened(address) as store:
        list(store.pages(50, with_vectors=True))
        store.search(chunks[4], DEPTH, None, "doc_id = 'doc1'")
        with pytest.raises(InputError, match="one statement"):  # the filter is SQL, run as a single SELECT
            store.search(chunks[4], DEPTH, None, "1); DELETE FROM chunks; SELECT (1")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):  # and the connection cannot write anyway
            store.connection.execute("DELETE FROM chunks")
    assert (digest(path), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir())) == before


def test_a_table_written_by_hand_with_its_own_column_names(tmp_path, chunks):
    """No chunk id column (the rowid is the id), the text in `body`, the document in `paper`, two
    vector columns, the chosen one with L2 distance: a distance d scores 1 - d²/2."""
    _, _, _, vectors, queries = chunks
    vectors = vectors * 3
    connection = sqlite3.connect(tmp_path / "notes.db")
    connection.enable_load_extension(True)
    sqlite_vec.load(connection)
    connection.execute(
        f"CREATE VIRTUAL TABLE notes USING vec0(small float[2], emb float[{DIM}] distance_metric=l2, paper text, +body text, +tags text)"
    )
    connection.executemany(
        "INSERT INTO notes(rowid, small, emb, paper, body, tags) VALUES (?, ?, ?, ?, ?, ?)",
        [
            (i + 100, np.zeros(2, np.float32).tobytes(), vectors[i].tobytes(), f"p{i % 3}", f"note {i}", None)
            for i in range(N)
        ],
    )
    connection.commit()
    connection.close()
    with opened(parse_address(f"sqlite-vec:{tmp_path / 'notes.db'}?table=notes&text=body&vector=emb")) as store:
        page = next(store.pages(50, with_vectors=True))
        assert (
            page.ids[:2] == ["100", "101"]
            and page.texts[7] == "note 7"
            and page.metadata[7] == {"paper": "p1", "tags": None}
        )
        assert np.array_equal(page.vectors, vectors[:50])
        distances = np.linalg.norm(queries[:, None] - vectors[None], axis=2)
        expected = [
            [(str(j + 100), 1 - float(distances[q, j]) ** 2 / 2) for j in np.argsort(distances[q])[:DEPTH]]
            for q in range(len(queries))
        ]
        assert_same_ranking(store.search(queries, DEPTH, None, None), expected)
    with pytest.raises(InputError, match=r"vector columns: small, emb; choose one with \?vector="):
        registry.open_store(parse_address(f"sqlite-vec:{tmp_path / 'notes.db'}?table=notes&text=body"))
    with pytest.raises(InputError, match="no text column 'text'"):
        registry.open_store(parse_address(f"sqlite-vec:{tmp_path / 'notes.db'}?table=notes&vector=emb"))


def test_create_collection_honours_column_names(tmp_path, chunks):
    ids, texts, metadata, vectors, queries = chunks
    address = parse_address(f"sqlite-vec:{tmp_path / 'x.db'}?table=c&id=key&text=body&vector=emb")
    records = [{**m, "note": "odd"} if i % 2 else m for i, m in enumerate(metadata[:40])]  # `note`: some chunks only
    registry.create_collection(address, ids[:40], texts[:40], records, vectors[:40])
    connection = sqlite3.connect(tmp_path / "x.db")
    sql = connection.execute("SELECT sql FROM sqlite_master WHERE name = 'c'").fetchone()[0]
    connection.close()
    assert (
        f"emb float[{DIM}] distance_metric=cosine, doc_id text, start integer, end integer, +note text, +key text, +body text"
        in sql
    )
    with opened(address) as store:
        page = next(store.pages(100, with_vectors=False))
        assert page.ids == ids[:40] and page.texts == texts[:40]
        assert page.metadata == [{**m, "note": m.get("note")} for m in records]
        assert_same_ranking(
            store.search(queries, 5, None, "doc_id = 'doc2'"),
            exact_top_k(queries, vectors[:40], ids[:40], 5, [i for i in range(40) if i % 7 == 2]),
        )


def test_a_table_that_is_not_vec0_is_one_line_naming_the_address(tmp_path):
    connection = sqlite3.connect(tmp_path / "plain.db")
    connection.execute("CREATE TABLE other (id text)")
    connection.close()
    address = parse_address(f"sqlite-vec:{tmp_path / 'plain.db'}?table=other")
    with pytest.raises(InputError, match="not a vec0 virtual table") as error:
        registry.open_store(address)
    assert str(address) in str(error.value) and "\n" not in str(error.value)
