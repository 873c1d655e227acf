"""sqlite-vec tables as a Store: one vec0 virtual table per collection, in an SQLite file.

Layout (what `create_collection` writes and `open_store` reads; the names are address options):

    CREATE VIRTUAL TABLE chunks USING vec0(
        embedding float[384] distance_metric=cosine,  -- vector=  (the only float[] column if not named)
        doc_id text, start integer, end integer,       -- metadata columns
        +chunk_id text,                                -- id=  (absent: the rowid is the chunk id)
        +text text                                     -- text=
    );

Every column other than the vectors, the id and the text is passed on as the chunk's metadata under
its own name (the document a chunk belongs to, `doc_id`, and its offsets `start` / `end`). Metadata
columns (no `+`) can be filtered inside the k-nearest search with =, !=, <, <=, >, >= and IN, but hold
no NULLs; auxiliary columns (`+`) hold anything and cannot be filtered. Similarities: 1 - d for
cosine, 1 - d²/2 for l2 (the cosine, for unit vectors; base.similarity), -d for l1.

vec0 (sqlite-vec 0.1.9) has no ANN index and no query parameters: every search is an exact scan, at
most 4096 neighbours per query. `filter` is an SQL condition added to the k-nearest query; a condition
vec0 cannot apply inside the search (an expression such as lower(doc_id) = 'x', a rowid range) SQLite
applies to its k results afterwards, which can leave fewer than asked for: the search then asks for
the largest k and, if still short, says so rather than return a wrong ranking. The database is opened
read-only, so an evaluation never writes into it. SQLite's own sqlite3 module often cannot load
extensions, hence pysqlite3.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pysqlite3.dbapi2 as sqlite3
import sqlite_vec

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.store_address import StoreAddress
from retrieval_bench.stores.base import StorePage, id_text, plain, reason, similarity

K_MAX = 4096  # sqlite-vec's limit on k in a k-nearest query
# vec0's distance_metric -> base.similarity's name for it (vec0's l2 is not squared)
DISTANCES = {"cosine": "cosine", "l2": "euclid", "l1": "l1"}
VECTOR_COLUMN = re.compile(r"(?:^|,)\s*(\w+)\s+(float|f32|int8|i8|bit)\s*\[\s*(\d+)\s*\]([^,]*)", re.IGNORECASE)
METRIC = re.compile(r"distance_metric\s*=\s*(\w+)", re.IGNORECASE)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _connect(target: str, uri: bool = False) -> sqlite3.Connection:
    connection = sqlite3.connect(target, uri=uri)
    connection.enable_load_extension(True)
    sqlite_vec.load(connection)
    connection.enable_load_extension(False)
    return connection


class SqliteVecStore:
    def __init__(self, address: StoreAddress) -> None:
        self.address = address
        path = Path(address.location)
        if address.is_server:
            raise InputError(f"{address}: sqlite-vec has no server; give the path of an SQLite file")
        if not path.is_file():
            raise InputError(f"{address}: no SQLite file at {path}")
        self._count: int | None = None
        self._matching: dict[str, int] = {}  # filter -> the chunks it keeps (counted once per store)
        # Filters SQLite applied after the k-nearest search: searched at the largest k.
        self._after_knn: set[str | None] = set()
        self.connection = _connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            self._read_schema()
        except sqlite3.Error as error:  # not a database, unreadable, a schema vec0 cannot load
            self.connection.close()
            raise self._fail("cannot read the table", error) from None
        except InputError:
            self.connection.close()
            raise

    def _fail(self, doing: str, error: Exception) -> InputError:
        return InputError(f"{self.address}: {doing}: {reason(error)}")

    def _read_schema(self) -> None:
        table, options = self.address.collection, self.address.options
        row = self.connection.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        if row is None:
            raise InputError(f"{self.address}: no table {table!r} in the database")
        if not re.search(r"\busing\s+vec0\s*\(", row[0] or "", re.IGNORECASE):
            raise InputError(
                f"{self.address}: table {table!r} is not a vec0 virtual table (CREATE VIRTUAL TABLE ... USING vec0(...))"
            )
        vectors = {
            m.group(1): (m.group(2).lower(), int(m.group(3)), m.group(4))
            for m in VECTOR_COLUMN.finditer(row[0].split("(", 1)[1])
        }
        self.vector = options.get("vector") or (next(iter(vectors)) if len(vectors) == 1 else "")
        if self.vector not in vectors:
            raise InputError(
                f"{self.address}: no vector column {self.vector!r} (vector columns: {', '.join(vectors)}; choose one with ?vector=)"
            )
        kind, self.dim, tail = vectors[self.vector]
        metric = METRIC.search(tail)
        self.metric = metric.group(1).lower() if metric else "l2"  # vec0's default metric
        if kind not in ("float", "f32") or self.metric not in DISTANCES:
            raise InputError(
                f"{self.address}: vector column {self.vector!r} is {kind}[{self.dim}] with distance {self.metric}; "
                f"supported: float[] with distance_metric cosine, l2 or l1"
            )
        columns = [
            name
            for _, name, *_, hidden in self.connection.execute(f"PRAGMA table_xinfo({_quoted(table)})")
            if not hidden
        ]
        self.text = options.get("text", "text")
        self.id = options.get("id", "chunk_id")
        if self.text not in columns:
            raise InputError(
                f"{self.address}: no text column {self.text!r} (columns: {', '.join(columns)}; name it with ?text=)"
            )
        if self.id not in columns:
            if "id" in options:
                raise InputError(f"{self.address}: no id column {self.id!r} (columns: {', '.join(columns)})")
            self.id = "rowid"
        self.metadata = [column for column in columns if column not in {*vectors, self.id, self.text, "rowid"}]

    def count(self) -> int:
        if self._count is None:
            self._count = self.connection.execute(
                f"SELECT count(*) FROM {_quoted(self.address.collection)}"
            ).fetchone()[0]
        return self._count

    def pages(self, rows: int, with_vectors: bool) -> Iterator[StorePage]:
        # One cursor read `rows` at a time: vec0 cannot seek to a rowid range (a `rowid > ?` page would
        # scan and sort the table each time), while its full scan streams in rowid order.
        columns = [self.id, self.text, *self.metadata, *([self.vector] if with_vectors else [])]
        cursor = self.connection.execute(
            f"SELECT {', '.join(map(_quoted, columns))} FROM {_quoted(self.address.collection)}"
        )
        try:
            while batch := cursor.fetchmany(rows):
                for row in batch:
                    if not isinstance(row[1], str):
                        raise InputError(f"{self.address}: chunk {row[0]} has no text in column {self.text!r}")
                yield StorePage(
                    ids=[id_text(row[0], self.address) for row in batch],
                    texts=[row[1] for row in batch],
                    metadata=[dict(zip(self.metadata, row[2 : 2 + len(self.metadata)], strict=True)) for row in batch],
                    vectors=np.stack([np.frombuffer(row[-1], dtype=np.float32) for row in batch])
                    if with_vectors
                    else None,
                )
        finally:
            cursor.close()

    def _matching_count(self, filter: str | None) -> int:
        """The chunks `filter` keeps (all of them without one), counted once per filter."""
        if not filter:
            return self.count()
        if filter not in self._matching:
            self._matching[filter] = self.connection.execute(
                f"SELECT count(*) FROM {_quoted(self.address.collection)} WHERE ({filter})"
            ).fetchone()[0]
        return self._matching[filter]

    def search(
        self, vectors: np.ndarray, depth: int, search: dict | None, filter: Any
    ) -> list[list[tuple[str, float]]]:
        if search:
            raise InputError(
                f"{self.address}: sqlite-vec takes no search parameters (vec0 searches exactly), got {search!r}"
            )
        if filter is not None and not isinstance(filter, str):
            raise InputError(
                f"{self.address}: a sqlite-vec filter is an SQL condition on the table's columns, got {filter!r}"
            )
        table = _quoted(self.address.collection)
        condition = f" AND ({filter})" if filter else ""
        sql = (
            f"SELECT {_quoted(self.id)}, distance FROM {table} WHERE {_quoted(self.vector)} MATCH ? AND k = ?{condition} "
            f"ORDER BY distance"
        )
        try:
            largest, expected = (
                min(self.count(), K_MAX),
                min(depth, self._matching_count(filter)),
            )  # expected: what a correct ranking holds
            if expected > K_MAX:
                raise InputError(
                    f"{self.address}: sqlite-vec returns at most {K_MAX} neighbours per query; asked for {depth} (lower retrieval.depth)"
                )
            metric, results = DISTANCES[self.metric], []
            for query in np.ascontiguousarray(vectors, dtype=np.float32):
                k = largest if filter in self._after_knn else min(depth, largest)
                found = self.connection.execute(sql, (query.tobytes(), k)).fetchall()[:depth]
                if (
                    len(found) < expected and k < largest
                ):  # SQLite applied (part of) the filter to the k results: widen k
                    self._after_knn.add(filter)  # and from now on for every query with this filter
                    found = self.connection.execute(sql, (query.tobytes(), largest)).fetchall()[:depth]
                if len(found) < expected:
                    raise InputError(
                        f"{self.address}: filter {filter!r} is applied after the k-nearest search, which found "
                        f"{len(found)} of {expected} chunks; filter metadata columns with =, !=, <, <=, >, >= or IN"
                    )
                scores = similarity(np.array([distance for _, distance in found], dtype=np.float64), metric)
                results.append(
                    [
                        (id_text(chunk_id, self.address), score)
                        for (chunk_id, _), score in zip(found, scores.tolist(), strict=True)
                    ]
                )
        except (sqlite3.Error, sqlite3.Warning) as error:  # Warning: more than one statement in the filter
            raise self._fail("search failed", error) from None
        return results

    def close(self) -> None:
        self.connection.close()


def open_store(address: StoreAddress) -> SqliteVecStore:
    return SqliteVecStore(address)


def _column_type(values: list[Any]) -> str:
    if all(isinstance(value, (bool, int, np.integer)) for value in values):
        return "integer"
    if all(isinstance(value, (float, int, np.number)) for value in values):
        return "float"
    return "text"


def create_collection(
    address: StoreAddress,
    ids: list[str],
    texts: list[str],
    metadata: list[dict[str, Any]],
    vectors: np.ndarray,
    index: dict[str, Any] | None = None,
) -> None:
    """A vec0 table in the layout above (cosine distance), replacing one of the same name. A metadata
    field every chunk has becomes a metadata column (filterable), one some lack an auxiliary column."""
    if address.is_server:
        raise InputError(f"{address}: sqlite-vec has no server; give the path of an SQLite file")
    if index:
        raise InputError(
            f"{address}: sqlite-vec 0.1.9 has no ANN index to configure (vec0 searches exactly), got {index!r}"
        )
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    keys = list(dict.fromkeys(key for record in metadata for key in record))
    vector, id_column, text = (
        address.option("vector", "embedding"),
        address.option("id", "chunk_id"),
        address.option("text", "text"),
    )
    names = [vector, *keys, id_column, text]
    if bad := [name for name in names if not re.fullmatch(r"[A-Za-z_]\w*", name)]:  # vec0 takes no quoted names
        raise InputError(f"{address}: vec0 column names must be plain identifiers, got {bad[0]!r}")
    declared = [f"{vector} float[{vectors.shape[1]}] distance_metric=cosine"]
    for key in keys:
        present = [record[key] for record in metadata if record.get(key) is not None]
        declared.append(f"{'' if len(present) == len(metadata) else '+'}{key} {_column_type(present)}")
    declared += [f"+{id_column} text", f"+{text} text"]
    table = _quoted(address.collection)
    Path(address.location).parent.mkdir(parents=True, exist_ok=True)
    connection = _connect(address.location)
    try:
        with connection:
            connection.execute(f"DROP TABLE IF EXISTS {table}")
            connection.execute(f"CREATE VIRTUAL TABLE {table} USING vec0({', '.join(declared)})")
            connection.executemany(
                f"INSERT INTO {table}(rowid, {', '.join(map(_quoted, names))}) VALUES ({', '.join('?' * (len(names) + 1))})",
                (
                    (row + 1, vectors[row].tobytes(), *(plain(record.get(key)) for key in keys), chunk_id, chunk_text)
                    for row, (chunk_id, chunk_text, record) in enumerate(zip(ids, texts, metadata, strict=True))
                ),
            )
    finally:
        connection.close()
