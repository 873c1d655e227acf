"""LanceDB as a store: a database folder and a table (`lancedb:data/store.lancedb?table=chunks`).

Columns: the chunk id (`?id=`, default "id"), the text (`?text=`, default "text") and the vector
(`?vector=`, default "vector"); every other column is passed on as the chunk's metadata (the
document it belongs to and its offsets). Pages stream from the Lance dataset's scanner, so memory
holds one page. Searches go through the vector column's index when it has one, in that index's
distance (cosine, dot or l2), with the query parameters of `retrieval.store.search` (nprobes,
refine_factor, ef, ...); a table without an index is searched exactly, by cosine. Filters are SQL
`where` strings, applied before the vector search (prefilter).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

os.environ.setdefault("LANCEDB_LOG", "error")  # Lance logs warnings such as "No existing dataset" to stderr
import lancedb  # noqa: E402
from lancedb import index as lance_index  # noqa: E402

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.store_address import StoreAddress, check_search  # noqa: E402
from retrieval_bench.stores.base import StorePage, id_text, no_collection, reason, similarity

# create_collection's index["type"] -> LanceDB's index configuration (the names of create_index's index_type).
INDEX_TYPES = {
    "IVF_FLAT": lance_index.IvfFlat,
    "IVF_SQ": lance_index.IvfSq,
    "IVF_PQ": lance_index.IvfPq,
    "IVF_RQ": lance_index.IvfRq,
    "IVF_HNSW_FLAT": lance_index.IvfHnswFlat,
    "IVF_HNSW_SQ": lance_index.IvfHnswSq,
    "IVF_HNSW_PQ": lance_index.IvfHnswPq,
}
EXACT_METRIC = "cosine"  # the distance of a table without a vector index
# a vector index's distance_type -> base.similarity's name for it (l2 is LanceDB's squared L2)
DISTANCES = {"cosine": "cosine", "dot": "dot", "l2": "l2"}


def _connect(address: StoreAddress, create: bool):
    if address.is_server:
        raise InputError(
            f"{address}: LanceDB is read from a database folder (or an object-store URI), not an http(s) server"
        )
    if not create and not address.is_remote and not Path(address.location).is_dir():
        raise InputError(
            f"{address}: no LanceDB database at {address.location} (expected the folder lancedb.connect was given)"
        )
    try:
        return lancedb.connect(address.location)
    except Exception as error:  # an object store that refuses us, a malformed URI
        raise InputError(f"{address}: cannot open the database ({reason(error)})") from None


def _index_metric(table, column: str) -> str | None:
    """The distance of the vector index on `column`, None when it has none."""
    for index in table.list_indices():
        if list(index.columns) == [column]:
            stats = table.index_stats(index.name)
            if stats is not None and stats.distance_type:
                return stats.distance_type
    return None


class LanceStore:
    def __init__(self, address: StoreAddress, table) -> None:
        self.address = address
        self.table = table
        self.id_field = address.option("id", "id")
        self.text_field = address.option("text", "text")
        self.vector_field = address.option("vector", "vector")
        self.columns = columns = table.schema.names
        for field in (self.id_field, self.text_field):
            if field not in columns:
                raise InputError(
                    f"{address}: no column {field!r}; columns: {', '.join(columns)} (name others with ?id= / ?text=)"
                )
        self.metadata_fields = [
            name for name in columns if name not in {self.id_field, self.text_field, self.vector_field}
        ]
        self.metric = _index_metric(table, self.vector_field) if self.vector_field in columns else None

    def _vector_column(self) -> str:
        if self.vector_field not in self.columns:
            raise InputError(
                f"{self.address}: no vector column {self.vector_field!r}; columns: {', '.join(self.columns)} (name it with ?vector=)"
            )
        return self.vector_field

    def count(self) -> int:
        return self.table.count_rows()

    def pages(self, rows: int, with_vectors: bool) -> Iterator[StorePage]:
        columns = [self.id_field, self.text_field, *self.metadata_fields] + (
            [self._vector_column()] if with_vectors else []
        )
        batches = self.table.to_lance().to_batches(batch_size=rows, columns=columns)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except (pa.ArrowException, OSError, RuntimeError) as error:  # damaged data files
                raise InputError(f"{self.address}: cannot read the table ({reason(error)})") from None
            if batch.num_rows == 0:
                continue
            ids = [id_text(value, self.address) for value in batch.column(self.id_field).to_pylist()]
            texts = batch.column(self.text_field).to_pylist()
            for chunk_id, text in zip(ids, texts, strict=True):
                if not isinstance(text, str):
                    raise InputError(f"{self.address}: chunk {chunk_id} has no text in column {self.text_field!r}")
            metadata = batch.select(self.metadata_fields).to_pylist() if self.metadata_fields else [{} for _ in ids]
            vectors = None
            if with_vectors:
                column = batch.column(self.vector_field)
                vectors = np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(
                    len(column), -1
                )
            yield StorePage(ids, texts, metadata, vectors)

    def search(
        self, vectors: np.ndarray, depth: int, search: dict | None, filter: Any
    ) -> list[list[tuple[str, float]]]:
        check_search("lancedb", search)  # the keys are query-builder methods, called below
        metric = self.metric or EXACT_METRIC
        if metric not in DISTANCES:
            raise InputError(
                f"{self.address}: the vector index on {self.vector_field!r} measures {metric} distance; "
                f"supported: {', '.join(DISTANCES)}"
            )
        query = (
            self.table.search(np.asarray(vectors, dtype=np.float32), vector_column_name=self._vector_column())
            .distance_type(metric)
            .limit(depth)
            .select([self.id_field, "_distance"])
        )
        for key, value in (search or {}).items():
            if isinstance(value, bool):
                query = getattr(query, key)() if value else query
            else:
                query = getattr(query, key)(value)
        if filter:
            if not isinstance(filter, str):
                raise InputError(
                    f"retrieval.store.filter {filter!r}: LanceDB filters are SQL where strings, e.g. \"doc_id = 'a.md'\""
                )
            query = query.where(filter, prefilter=True)
        try:
            found = query.to_arrow()
        except (ValueError, RuntimeError) as error:
            raise InputError(
                f"{self.address}: the query was refused ({reason(error)}); check retrieval.store.search and filter"
            ) from None
        rows = (
            found.column("query_index").to_numpy()
            if "query_index" in found.column_names
            else np.zeros(found.num_rows, dtype=np.int64)
        )
        ids = found.column(self.id_field).to_pylist()
        scores = similarity(found.column("_distance").to_numpy(), DISTANCES[metric]).tolist()
        results: list[list[tuple[str, float]]] = [[] for _ in range(len(vectors))]
        for row, chunk_id, score in zip(rows.tolist(), ids, scores, strict=True):
            results[row].append((id_text(chunk_id, self.address), score))
        return results

    def close(self) -> None:
        self.table = None


def open_store(address: StoreAddress) -> LanceStore:
    database = _connect(address, create=False)
    try:
        table = database.open_table(address.collection)
    except (ValueError, FileNotFoundError):
        raise no_collection(address, "table", database.list_tables().tables) from None
    return LanceStore(address, table)


def create_collection(
    address: StoreAddress,
    ids: list[str],
    texts: list[str],
    metadata: list[dict[str, Any]],
    vectors: np.ndarray,
    index: dict[str, Any] | None,
) -> None:
    """A new table (replacing one of that name) with columns id, text, one per metadata field and the
    vector; `index` = {"type": "IVF_HNSW_SQ" | "IVF_PQ" | ..., "distance_type": "cosine" (default),
    and the configuration's own settings (num_partitions, m, ef_construction, num_sub_vectors, ...)}."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    fields = list(dict.fromkeys(key for record in metadata for key in record))
    columns: dict[str, Any] = {address.option("id", "id"): ids, address.option("text", "text"): texts}
    columns.update({key: [record.get(key) for record in metadata] for key in fields})
    columns[address.option("vector", "vector")] = pa.FixedSizeListArray.from_arrays(
        pa.array(vectors.ravel()), vectors.shape[1]
    )
    table = _connect(address, create=True).create_table(address.collection, pa.table(columns), mode="overwrite")
    if index:
        settings = dict(index)
        kind = str(settings.pop("type", "IVF_PQ")).upper()
        if kind not in INDEX_TYPES:
            raise InputError(f"LanceDB index type {kind!r} is not one of {', '.join(INDEX_TYPES)}")
        settings.setdefault("distance_type", "cosine")
        table.create_index(address.option("vector", "vector"), config=INDEX_TYPES[kind](**settings))
