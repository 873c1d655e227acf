"""Qdrant collections as a Store: a local-mode folder (written by `QdrantClient(path=...)`) or a
server at an http(s) URL, with the API key from QDRANT_API_KEY only (sent only where base.api_key
allows) and every request waiting at most the address's timeout (rounded up to whole seconds, as qdrant-client takes it).

Layout (what `create_collection` writes and `open_store` reads; the names are address options):

- one point per chunk. Qdrant takes only unsigned integers or UUIDs as point ids, so the chunk id
  is in payload field `chunk_id` (id=) and the point id is the UUID5 of it; a point without that
  field has str(point id) as its chunk id;
- payload `text` (text=) the chunk text; every other payload field is passed on as the chunk's
  metadata as it is (the document it belongs to, `doc_id`, and its offsets `start` / `end`);
- the collection's unnamed vector, or the named vector `vector=` (which a collection with one named
  vector does without).

Scores: Cosine and Dot scores are similarities already; a Euclid distance d becomes 1 - d²/2 (the
cosine, for unit vectors; base.similarity), a Manhattan distance is negated. `search` is Qdrant's
SearchParams (hnsw_ef, exact, quantization, ...), `filter` a Qdrant Filter mapping
({must: [{key: doc_id, match: {value: ...}}]}).

Local mode holds the whole collection in memory and searches it by brute force, ignoring search
parameters (qdrant-client warns about both): it suits tests and small collections; the HNSW index,
its build settings and hnsw_ef are real only on a server.
"""

from __future__ import annotations

import math
import sqlite3
import uuid
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, cast

import httpx
import numpy as np
from pydantic import ValidationError
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ApiException, ResponseHandlingException

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.store_address import StoreAddress
from retrieval_bench.stores.base import StorePage, api_key, id_text, no_collection, plain, reason, similarity

QUERY_BATCH = 64  # query vectors per request to a server
UPLOAD_BATCH = 512  # points per upsert
# a collection's distance -> base.similarity's name for the scores Qdrant gives back (best first)
DISTANCES = {
    models.Distance.COSINE: "score",  # Cosine and Dot scores are similarities already
    models.Distance.DOT: "score",
    models.Distance.EUCLID: "euclid",  # Qdrant's Euclid is not squared
    models.Distance.MANHATTAN: "l1",
}
LOCAL_STORAGE = "meta.json"  # what QdrantClient(path=...) writes first; it creates an empty store where it is missing


def _one_line(error: Exception) -> str:
    if isinstance(error, ValidationError):  # pydantic's own text runs to a dozen lines per union member
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"] if isinstance(part, int) or str(part).isidentifier())
        return f"{where or error.title}: {first['msg']}"
    return reason(error)


@contextmanager
def _reported(address: StoreAddress, doing: str) -> Iterator[None]:
    """Engine and connection errors as one InputError naming the address."""
    try:
        yield
    except ResponseHandlingException as error:
        if not isinstance(error.source, httpx.TimeoutException):
            raise InputError(f"{address}: {doing}: {_one_line(error)}") from None
        raise InputError(
            f"{address}: {doing}: the Qdrant server did not answer within {_timeout(address)} s "
            "(for a slow server, raise ?timeout=<seconds> in the address)"
        ) from None
    except (ApiException, ValidationError, ValueError, RuntimeError, OSError, sqlite3.Error) as error:
        # sqlite3: local storage that is not a database (a damaged or foreign file)
        raise InputError(f"{address}: {doing}: {_one_line(error)}") from None


def _timeout(address: StoreAddress) -> int:
    """The address's timeout as qdrant-client applies it: whole seconds, rounded up."""
    return math.ceil(address.timeout)


def _client(address: StoreAddress, create: bool = False) -> QdrantClient:
    if address.is_server:
        key = api_key(address)
        # No version check on connecting: it warns over several lines where the server is down, and the
        # first request reports that as one line anyway. Nor qdrant-client's warning that a key goes
        # over plain http: base.api_key only lets a key go to loopback or to a server the user named,
        # and a refusal is then one line, not that line and a warning.
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="Api key is used with an insecure connection", category=UserWarning
            )
            return QdrantClient(url=address.location, api_key=key, timeout=_timeout(address), check_compatibility=False)
    if not create and not (Path(address.location) / LOCAL_STORAGE).is_file():
        raise InputError(f"{address}: no Qdrant local storage at {address.location} (no {LOCAL_STORAGE})")
    return QdrantClient(path=address.location)


def _point_id(chunk_id: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, chunk_id))


class QdrantStore:
    def __init__(self, address: StoreAddress) -> None:
        self.address = address
        with _reported(address, "cannot open the collection"):
            self.client = _client(address)
        try:
            with _reported(address, "cannot reach the collection"):
                if not self.client.collection_exists(address.collection):
                    raise no_collection(
                        address, "collection", (c.name for c in self.client.get_collections().collections)
                    )
                vectors = self.client.get_collection(address.collection).config.params.vectors
            assert vectors is not None  # a collection searched by vector has dense vector params
            self._choose_vector(vectors)
        except InputError:
            self.client.close()
            raise
        self.text = address.option("text", "text")
        self.id = address.option("id", "chunk_id")

    def _choose_vector(self, vectors: models.VectorParams | dict[str, models.VectorParams]) -> None:
        wanted = self.address.option("vector")
        if isinstance(vectors, models.VectorParams):
            if wanted:
                raise InputError(f"{self.address}: the collection has one unnamed vector; drop ?vector={wanted}")
            self.vector, params = None, vectors
        else:
            if wanted is None and len(vectors) == 1:
                wanted = next(iter(vectors))
            if wanted not in vectors:
                raise InputError(
                    f"{self.address}: no vector {wanted!r} (named vectors: {', '.join(vectors)}; choose one with ?vector=)"
                )
            self.vector, params = wanted, vectors[wanted]
        metric = DISTANCES.get(params.distance)
        if metric is None:
            raise InputError(
                f"{self.address}: distance {params.distance} is not supported (Cosine, Dot, Euclid, Manhattan)"
            )
        self.metric = metric

    def count(self) -> int:
        with _reported(self.address, "count failed"):
            return self.client.count(self.address.collection, exact=True).count

    def _page(self, records: list[models.Record], with_vectors: bool) -> StorePage:
        ids, texts, metadata = [], [], []
        for record in records:
            payload = dict(record.payload or {})
            ids.append(id_text(payload.pop(self.id, record.id), self.address))
            texts.append(payload.pop(self.text, None))
            if not isinstance(texts[-1], str):
                raise InputError(
                    f"{self.address}: point {record.id} has no text in payload field {self.text!r} "
                    f"(fields: {', '.join(payload) or 'none'}; name it with ?text=)"
                )
            metadata.append(payload)
        vectors = None
        if with_vectors:
            vectors = np.asarray(
                # A named vector: the record's vectors are {name: values}.
                [cast("dict[str, Any]", r.vector)[self.vector] if self.vector else r.vector for r in records],
                dtype=np.float32,
            )
        return StorePage(ids, texts, metadata, vectors)

    def pages(self, rows: int, with_vectors: bool) -> Iterator[StorePage]:
        offset = None
        while True:
            with _reported(self.address, "reading the collection failed"):
                records, offset = self.client.scroll(
                    self.address.collection,
                    limit=rows,
                    offset=offset,
                    with_payload=True,
                    with_vectors=([self.vector] if self.vector else True) if with_vectors else False,
                )
            if records:
                yield self._page(records, with_vectors)
            if offset is None:
                return

    def search(
        self, vectors: np.ndarray, depth: int, search: dict | None, filter: Any
    ) -> list[list[tuple[str, float]]]:
        with _reported(self.address, f"search parameters {search!r} are not Qdrant SearchParams"):
            params = models.SearchParams.model_validate(search) if search else None
        with _reported(self.address, f"filter {filter!r} is not a Qdrant Filter"):
            condition = models.Filter.model_validate(filter) if filter else None
        queries = np.asarray(vectors, dtype=np.float32)
        results = []
        for start in range(0, len(queries), QUERY_BATCH):
            requests = [
                models.QueryRequest(
                    query=query.tolist(),
                    using=self.vector,
                    filter=condition,
                    params=params,
                    limit=depth,
                    with_payload=[self.id],
                )
                for query in queries[start : start + QUERY_BATCH]
            ]
            with _reported(self.address, "search failed"):
                responses = self.client.query_batch_points(self.address.collection, requests=requests)
            for response in responses:
                scores = similarity(np.array([point.score for point in response.points], dtype=np.float64), self.metric)
                results.append(
                    [
                        (id_text((point.payload or {}).get(self.id, point.id), self.address), score)
                        for point, score in zip(response.points, scores.tolist(), strict=True)
                    ]
                )
        return results

    def close(self) -> None:
        self.client.close()


def open_store(address: StoreAddress) -> QdrantStore:
    return QdrantStore(address)


def create_collection(
    address: StoreAddress,
    ids: list[str],
    texts: list[str],
    metadata: list[dict[str, Any]],
    vectors: np.ndarray,
    index: dict[str, Any] | None = None,
) -> None:
    """A Cosine collection in the layout above, replacing one of the same name. `index` is Qdrant's
    HNSW config (m, ef_construct, ...); asking for it on a server also lowers the indexing threshold
    so that a small collection gets its graph too (built in the background, as Qdrant does)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    name, vector = address.collection, address.option("vector")
    params = models.VectorParams(size=vectors.shape[1], distance=models.Distance.COSINE)
    id_field, text_field = address.option("id", "chunk_id"), address.option("text", "text")
    with _reported(address, f"index {index!r} is not a Qdrant HNSW config"):
        hnsw = models.HnswConfigDiff.model_validate(index) if index else None
    with _reported(address, "cannot write the collection"):
        client = _client(address, create=True)
        try:
            if client.collection_exists(name):
                client.delete_collection(name)
            client.create_collection(
                name,
                vectors_config={vector: params} if vector else params,
                hnsw_config=hnsw,
                optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1)
                if index and address.is_server
                else None,
            )
            for start in range(0, len(ids), UPLOAD_BATCH):
                stop = start + UPLOAD_BATCH
                client.upsert(
                    name,
                    wait=True,
                    points=models.Batch(
                        ids=[_point_id(chunk_id) for chunk_id in ids[start:stop]],
                        vectors={vector: vectors[start:stop].tolist()} if vector else vectors[start:stop].tolist(),
                        payloads=[
                            {id_field: chunk_id, text_field: text, **{k: plain(v) for k, v in record.items()}}
                            for chunk_id, text, record in zip(
                                ids[start:stop], texts[start:stop], metadata[start:stop], strict=True
                            )
                        ],
                    ),
                )
        finally:
            client.close()
