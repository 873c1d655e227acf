"""The small interface every store adapter implements, and what they share (API keys, errors, ids).

Addresses are parsed by retrieval_bench.core.store_address. Credentials never appear in an address: API
keys come from the environment only (CHROMA_API_KEY, QDRANT_API_KEY, and Chroma's own
CHROMA_CLIENT_AUTH_CREDENTIALS), and are sent only where
retrieval_bench.core.endpoints allows: a loopback host, the server in RETRIEVAL_BENCH_STORE_URL, or one
listed in the user's endpoints file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Protocol

import numpy as np

from retrieval_bench.core.endpoints import config_path, may_receive_key, user_endpoints
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.store_address import StoreAddress
from retrieval_bench.core.values import checked_id

PAGE_ROWS = 1000  # chunks per request when a collection is read whole: memory holds one page of vectors


def id_text(value: object, address: StoreAddress) -> str:
    """A chunk id as the store holds it, as text (io.checked_id); else one line naming the address."""
    return checked_id(value, str(address), "chunk id")


# engine -> the environment variable holding its API key (the only place a key comes from).
API_KEY_ENV = {"chroma": "CHROMA_API_KEY", "qdrant": "QDRANT_API_KEY"}
# The secret Chroma's client would read for its auth provider: the same kind of key as CHROMA_API_KEY.
CHROMA_CREDENTIALS_ENV = "CHROMA_CLIENT_AUTH_CREDENTIALS"
SECRET_ENV = (*API_KEY_ENV.values(), CHROMA_CREDENTIALS_ENV)  # every variable whose value is never shown
# Engines whose search of an unchanged collection differs between processes (Chroma's HNSW graph is
# rebuilt in memory from its log, in an order that varies): a run is one draw of it.
NONDETERMINISTIC_SEARCH = {"chroma": "Chroma's HNSW search of an unchanged collection differs between processes"}
STORE_URL_ENV = "RETRIEVAL_BENCH_STORE_URL"  # the store server the user vouches for outside git


def api_key(address: StoreAddress, name: str | None = None) -> str | None:
    """The key in environment variable `name` (default: the engine's API key), for a server it may
    be sent to (None: no key set). An address comes from params.yaml, which a pull request can
    change: a key goes only to a host the user named outside git (retrieval_bench.core.endpoints), else
    this is one InputError."""
    name = name or API_KEY_ENV.get(address.engine)
    key = os.environ.get(name) if name else None
    if not key or not address.is_server:
        return key or None
    if not may_receive_key(address.location, [os.environ.get(STORE_URL_ENV, ""), *user_endpoints(os.environ)]):
        raise InputError(
            f"{address}: {name} is set, and a key from your environment is only sent to a loopback host or to a store "
            "server you chose outside the repository, because anyone who can change params.yaml could otherwise collect it; "
            f"to allow this server, export {STORE_URL_ENV}={address.location} (or add it to {config_path(os.environ)}), "
            f"or unset {name} if the server needs no key"
        )
    return key


def reason(error: BaseException) -> str:
    """An engine's exception as a short phrase for a one-line error: its type and first line, with
    any API key from the environment blanked out (a client may echo its headers)."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    for name in SECRET_ENV:
        secret = os.environ.get(name)
        if secret:
            text = text.replace(secret, "***")
    return text[:300]


def no_collection(address: StoreAddress, noun: str, names: Iterable[str]) -> InputError:
    """The one-line error for a collection (or table) the store does not hold, listing those it does."""
    return InputError(
        f"{address}: no {noun} {address.collection!r} ({noun}s there: {', '.join(sorted(names)) or 'none'})"
    )


def plain(value: Any) -> Any:
    """A value for a JSON payload or an SQLite binding: numpy scalars as Python ones."""
    return value.item() if isinstance(value, np.generic) else value


# base.similarity's names for the distances the adapters get back (each adapter maps its engine's own).
METRICS = ("cosine", "ip", "dot", "l2", "euclid", "l1", "score")


def similarity(distances: np.ndarray, metric: str) -> np.ndarray:
    """Engine distances as similarities, higher = better (and in the engine's order for any vectors):

    - cosine, ip, dot: a distance that is 1 - similarity: 1 - d;
    - l2: a squared L2 distance d, of unit vectors 2 - 2 cos: 1 - d / 2 is their cosine;
    - euclid: a plain (not squared) L2 distance d: 1 - d² / 2, the cosine of unit vectors;
    - l1: a Manhattan distance d: -d;
    - score: a similarity already (Qdrant's Cosine and Dot scores): d."""
    distances = np.asarray(distances, dtype=np.float64)
    if metric in ("cosine", "ip", "dot"):
        return 1.0 - distances
    if metric == "l2":
        return 1.0 - distances / 2.0
    if metric == "euclid":
        return 1.0 - distances * distances / 2.0
    if metric == "l1":
        return -distances
    if metric == "score":
        return distances
    raise ValueError(f"unknown distance metric {metric!r} (known: {', '.join(METRICS)})")


@dataclass
class StorePage:
    """One page of a collection, in the store's order."""

    ids: list[str]
    texts: list[str]
    metadata: list[dict[str, Any]]  # whatever else the store keeps per chunk
    vectors: np.ndarray | None  # (len(ids), dim) float32 when asked for, else None


class Store(Protocol):
    """What every adapter module's `open_store(address)` returns."""

    address: StoreAddress

    def count(self) -> int:
        """Chunks in the collection."""

    def pages(self, rows: int, with_vectors: bool) -> Iterator[StorePage]:
        """The whole collection, `rows` chunks at a time (bounded memory)."""

    def search(
        self, vectors: np.ndarray, depth: int, search: dict | None, filter: Any
    ) -> list[list[tuple[str, float]]]:
        """For each query vector, the store's own top `depth` (chunk id, similarity), best first,
        through its configured index; `search` holds engine query parameters (e.g. hnsw_ef),
        `filter` a metadata filter in the engine's own syntax."""

    def close(self) -> None: ...
