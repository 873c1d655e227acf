"""Chroma as a store: a persistent folder (`chroma:path/to/folder?collection=chunks`, read with
PersistentClient) or a server (`chroma:http://host:8000?collection=chunks`; an API key comes from
CHROMA_API_KEY, sent as the `x-chroma-token` header, and credentials for Chroma's auth provider from
CHROMA_CLIENT_AUTH_CREDENTIALS (with CHROMA_CLIENT_AUTH_PROVIDER), each sent only where base.api_key
allows). Chroma's Settings would also read a `.env` file in the working directory, which may be in
git: it never does here. Every request to a server waits at most the address's timeout
(base.DEFAULT_TIMEOUT, or ?timeout=): Chroma's own HTTP client waits forever.

A chunk's id is Chroma's id and its text Chroma's document, unless the address names metadata
fields for them (`?id=...`, `?text=...`); everything in a record's metadata is passed on (the
document a chunk belongs to and its offsets among it). Searches go through the collection's own
HNSW index with the settings it was created with (`configuration={"hnsw": {...}}`): Chroma takes
no per-query parameters, so `retrieval.store.search` must stay null; to try another ef_search or
max_neighbors, build a second collection and point `retrieval.store.address` at it. Distances are
turned into similarities for the collection's space (cosine, ip or l2). Filters are Chroma `where`
mappings. No embedding function is ever attached (Chroma's default downloads a model) and no
telemetry is sent.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Iterator, cast
from urllib.parse import urlparse

import httpx
import numpy as np

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # read by chromadb on import: no telemetry is sent
import chromadb  # noqa: E402
from chromadb.api.client import Client as ClientCreator  # noqa: E402
from chromadb.auth import UserIdentity  # noqa: E402
from chromadb.config import Settings  # noqa: E402
from chromadb.errors import ChromaError, NotFoundError  # noqa: E402
from overrides import override  # noqa: E402  (chromadb's components must mark what they override)

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.store_address import DEFAULT_TIMEOUT, StoreAddress  # noqa: E402
from retrieval_bench.stores.base import (
    CHROMA_CREDENTIALS_ENV,
    StorePage,
    api_key,
    id_text,
    no_collection,
    reason,
    similarity,
)

TOKEN_HEADER = "x-chroma-token"
PERSISTENT_MARKER = "chroma.sqlite3"  # what a PersistentClient folder holds; its absence means no store


class TimedSettings(Settings):
    """Chroma's settings and the seconds one request to the server may wait."""

    request_timeout_seconds: float = DEFAULT_TIMEOUT


class TimedClient(ClientCreator):
    """Chroma's client with a timeout on every request to the server: its HTTP session is built
    with none (it would wait forever on a server that accepts and never answers)."""

    @override
    def get_user_identity(self) -> UserIdentity:
        # The first request the client makes, as it connects: the session exists, nothing was sent yet.
        # Not super()'s: it turns a timeout into ValueError("timed out"), and _reported names timeouts.
        # chromadb types neither the FastAPI server's private session nor our TimedSettings' field.
        settings = cast(TimedSettings, self._system.settings)
        self._server._session.timeout = httpx.Timeout(settings.request_timeout_seconds)  # type: ignore[attr-defined]
        return self._server.get_user_identity()


@contextmanager
def _reported(address: StoreAddress) -> Iterator[None]:
    """A server that stops answering, or cannot be reached, as one InputError naming the address."""
    try:
        yield
    except httpx.TimeoutException:
        raise InputError(
            f"{address}: the Chroma server did not answer within {address.timeout:g} s "
            "(for a slow server, raise ?timeout=<seconds> in the address)"
        ) from None
    except httpx.TransportError as error:
        raise InputError(f"{address}: cannot reach the Chroma server ({reason(error)})") from None


def _check_intact(address: StoreAddress, database: Path) -> None:
    """Chroma's SQLite file passes SQLite's own check, read-only: a damaged page made Chroma's Rust
    core panic, a PanicException and a Rust backtrace on stderr rather than an error."""
    try:
        with closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)) as connection:
            verdict = connection.execute("PRAGMA quick_check(1)").fetchone()[0]
    except sqlite3.Error as error:
        verdict = reason(error)
    if verdict != "ok":
        said = " ".join(str(verdict).split())  # quick_check's report spans lines
        raise InputError(f"{address}: {database} is damaged (SQLite's check: {said}); restore the store")


def _client(address: StoreAddress, create: bool):
    """A client for the address; a folder that holds no Chroma store (reading) or a server that does
    not answer is one InputError naming the address."""
    # No .env: it sits in the working directory, where a pull request can put one (naming a server
    # for a store this process writes, or credentials for Chroma's auth provider).
    # pydantic-settings' init-only _env_file is not in the generated signature.
    settings = Settings(_env_file=None, anonymized_telemetry=False)  # type: ignore[call-arg]
    if not address.is_server:
        folder = Path(address.location)
        if not create and not (folder / PERSISTENT_MARKER).is_file():
            raise InputError(
                f"{address}: no Chroma store in {folder} (expected a PersistentClient folder holding {PERSISTENT_MARKER})"
            )
        if not create:
            _check_intact(address, folder / PERSISTENT_MARKER)
        # Resolved: Chroma keeps one client per path as written, so a relative one would outlive a chdir.
        try:
            return chromadb.PersistentClient(path=str(folder.resolve()), settings=settings)
        except ChromaError as error:  # a damaged chroma.sqlite3; a read-only folder (Chroma writes as it opens)
            raise InputError(
                f"{address}: cannot open the Chroma store in {folder} ({reason(error)}); Chroma opens its store "
                "read-write, even to read: it needs an intact folder it may write to"
            ) from None
    url, key, credentials = urlparse(address.location), api_key(address), api_key(address, CHROMA_CREDENTIALS_ENV)
    try:
        with _reported(address):
            return TimedClient(
                settings=TimedSettings(  # type: ignore[call-arg]  # pydantic-settings' _env_file, as above
                    _env_file=None,
                    anonymized_telemetry=False,
                    chroma_api_impl="chromadb.api.fastapi.FastAPI",
                    chroma_server_host=url.hostname or "",
                    chroma_server_http_port=url.port,  # parse_address wrote the default port in
                    chroma_server_ssl_enabled=url.scheme == "https",
                    chroma_server_headers={TOKEN_HEADER: key} if key else None,
                    # Explicit, so that Chroma reads neither from its environment unchecked.
                    chroma_client_auth_provider=os.environ.get("CHROMA_CLIENT_AUTH_PROVIDER") if credentials else None,
                    chroma_client_auth_credentials=credentials,
                    request_timeout_seconds=address.timeout,
                )
            )
    except InputError:
        raise
    except Exception as error:  # the client raises ValueError and auth errors alike: any means unreachable
        raise InputError(f"{address}: cannot reach the Chroma server ({reason(error)})") from None


def _space(collection) -> str:
    """The distance the collection's index measures: its configuration, else legacy metadata."""
    configuration = collection.configuration or {}
    for index in ("hnsw", "spann"):
        if configuration.get(index) and configuration[index].get("space"):
            return configuration[index]["space"]
    return (collection.metadata or {}).get("hnsw:space", "l2")


class ChromaStore:
    def __init__(self, address: StoreAddress, collection) -> None:
        self.address = address
        self.collection = collection
        self.metric = _space(collection)
        self.id_field = address.option("id")  # None: Chroma's own id
        self.text_field = address.option("text")  # None: Chroma's document

    def count(self) -> int:
        with _reported(self.address):
            return self.collection.count()

    def pages(self, rows: int, with_vectors: bool) -> Iterator[StorePage]:
        include = ["documents", "metadatas"] + (["embeddings"] if with_vectors else [])
        offset = 0
        while True:
            with _reported(self.address):
                got = self.collection.get(limit=rows, offset=offset, include=include)
            if not got["ids"]:
                return
            metadata = [dict(m) if m else {} for m in got["metadatas"]]
            ids = [
                id_text(m.get(self.id_field) if self.id_field else i, self.address)
                for i, m in zip(got["ids"], metadata, strict=True)
            ]
            texts = [
                m.get(self.text_field) if self.text_field else d
                for d, m in zip(got["documents"], metadata, strict=True)
            ]
            for chunk_id, text in zip(ids, texts, strict=True):
                if not isinstance(text, str):
                    where = (
                        f"metadata field {self.text_field!r}"
                        if self.text_field
                        else "document (or name the metadata field holding the text: ?text=<field>)"
                    )
                    raise InputError(f"{self.address}: chunk {chunk_id} has no text in its {where}")
            vectors = np.asarray(got["embeddings"], dtype=np.float32) if with_vectors else None
            yield StorePage(ids, cast("list[str]", texts), metadata, vectors)  # each text checked above
            offset += len(got["ids"])

    def search(
        self, vectors: np.ndarray, depth: int, search: dict | None, filter: Any
    ) -> list[list[tuple[str, float]]]:
        if search:
            raise InputError(
                f"retrieval.store.search {search!r}: Chroma takes no query parameters (its HNSW ef_search is the "
                f"collection's configuration); set it to null, or point retrieval.store.address at a collection built otherwise"
            )
        include = ["distances"] + (["metadatas"] if self.id_field else [])
        try:
            with _reported(self.address):
                got = self.collection.query(
                    query_embeddings=np.asarray(vectors, dtype=np.float32),
                    n_results=depth,
                    where=filter or None,
                    include=include,
                )
        except (ValueError, TypeError, ChromaError) as error:
            why = reason(error)
            # a collection of another width names its dimension; anything else is most often the filter
            check = (
                "the collection holds vectors of another model (embed.model must be the model that filled it)"
                if "dimension" in why.lower()
                else "check retrieval.store.filter (a Chroma where mapping)"
            )
            raise InputError(f"{self.address}: the query was refused ({why}); {check}") from None
        results = []
        for row, (ids, distances) in enumerate(zip(got["ids"], got["distances"], strict=True)):
            if self.id_field:
                ids = [id_text(m.get(self.id_field), self.address) for m in got["metadatas"][row]]
            scores = similarity(np.asarray(distances, dtype=np.float64), self.metric)
            results.append(list(zip(ids, scores.tolist(), strict=True)))
        return results

    def close(self) -> None:
        self.collection = None


def open_store(address: StoreAddress) -> ChromaStore:
    client = _client(address, create=False)
    try:
        with _reported(address):
            try:
                return ChromaStore(address, client.get_collection(address.collection, embedding_function=None))
            except NotFoundError:
                raise no_collection(
                    address, "collection", (collection.name for collection in client.list_collections())
                ) from None
    except InputError:
        raise
    except Exception as error:  # a server that answered the heartbeat but refuses this (auth, tenant)
        raise InputError(f"{address}: cannot open the collection ({reason(error)})") from None


def create_collection(
    address: StoreAddress,
    ids: list[str],
    texts: list[str],
    metadata: list[dict[str, Any]],
    vectors: np.ndarray,
    index: dict[str, Any] | None,
) -> None:
    """A new collection (replacing one of that name): `index` holds Chroma HNSW settings (space,
    ef_construction, ef_search, max_neighbors, ...); the space is cosine unless it says otherwise.
    Fields the address names for the id or the text are also written into each record's metadata."""
    client = _client(address, create=True)
    try:
        client.delete_collection(address.collection)
    except NotFoundError:
        pass
    collection = client.create_collection(
        address.collection, configuration={"hnsw": {"space": "cosine", **(index or {})}}, embedding_function=None
    )
    id_field, text_field = address.option("id"), address.option("text")
    records = []
    for chunk_id, text, fields in zip(ids, texts, metadata, strict=True):
        record = {key: value for key, value in fields.items() if value is not None}  # Chroma stores no nulls
        record.update({id_field: chunk_id} if id_field else {})
        record.update({text_field: text} if text_field else {})
        records.append(record or None)  # Chroma refuses an empty mapping
    batch = client.get_max_batch_size()
    for start in range(0, len(ids), batch):
        rows = slice(start, start + batch)
        collection.add(
            ids=ids[rows],
            embeddings=np.asarray(vectors[rows], dtype=np.float32),
            documents=texts[rows],
            metadatas=records[rows],
        )
