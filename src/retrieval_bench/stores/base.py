"""A vector store address and the small interface every store adapter implements.

An address names the engine, where the store is (a local path or an http(s) URL of a server) and
the collection or table, with optional field names after `?`:

    lancedb:data/stores/sample.lancedb?table=chunks
    chroma:data/stores/chroma?collection=chunks
    chroma:http://127.0.0.1:8000?collection=chunks
    qdrant:data/stores/qdrant?collection=chunks&text=body
    sqlite-vec:data/stores/sample.db?table=chunks

Options (all optional): `text` (the field holding the chunk text; default "text"), `id` (the field
holding the chunk id where the store's own id is not it), `document` (the field naming the document
a chunk belongs to; default "doc_id"), `start` / `end` (character offsets in that document), `vector`
(the vector column; default "vector"), `timeout` (seconds any one request to a store server may
wait; default 30). Credentials never appear in an address: API keys come from the environment only
(CHROMA_API_KEY, QDRANT_API_KEY), and are sent only where retrieval_bench.endpoints allows: a
loopback host, the server in RETRIEVAL_BENCH_STORE_URL, or one listed in the user's endpoints file.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Protocol
from urllib.parse import parse_qsl

import numpy as np

from retrieval_bench.endpoints import config_path, is_vouched, user_endpoints
from retrieval_bench.io import InputError, checked_id

# engine -> (the pip extra that installs it, the module it needs): a missing extra is one line.
ENGINES = {
    "chroma": ("chroma", "chromadb"),
    "lancedb": ("lancedb", "lancedb"),
    "qdrant": ("qdrant", "qdrant_client"),
    "sqlite-vec": ("sqlite-vec", "sqlite_vec"),
}
OPTIONS = {"collection", "table", "text", "id", "document", "start", "end", "vector", "timeout"}
DEFAULT_TIMEOUT = 30.0  # seconds a request to a store server may wait (connect, send, each read) unless ?timeout= says otherwise
PAGE_ROWS = 1000  # chunks per request when a collection is read whole: memory holds one page of vectors


@dataclass(frozen=True)
class StoreAddress:
    engine: str
    location: str  # a local path, or the http(s) URL of a server
    collection: str  # the collection (Chroma, Qdrant) or table (LanceDB, sqlite-vec)
    options: dict[str, str] = field(default_factory=dict)  # text, id, document, start, end, vector

    @property
    def is_server(self) -> bool:
        return self.location.startswith(("http://", "https://"))

    @property
    def is_remote(self) -> bool:
        """A server or object storage (s3://, gs://, ...): nothing on this machine to look at."""
        return "://" in self.location

    def option(self, name: str, default: str | None = None) -> str | None:
        return self.options.get(name, default)

    @property
    def timeout(self) -> float:
        """Seconds one request to the server may wait (parse_address checked ?timeout=)."""
        return float(self.options.get("timeout", DEFAULT_TIMEOUT))

    def __str__(self) -> str:
        return f"{self.engine}:{self.location}?collection={self.collection}"


def is_store_address(text: object) -> bool:
    return isinstance(text, str) and text.split(":", 1)[0] in ENGINES and ":" in text


def _shown(text: str) -> str:
    """What an error may print of an address: engine:location, never the options after `?` (a user
    may put a secret there by mistake) nor a user:password@ in a URL."""
    return re.sub(r"//[^/?#]*@", "//***@", text.partition("?")[0])


def parse_address(text: str, where: str = "load.source") -> StoreAddress:
    """The StoreAddress in `text`; a malformed one is a one-line InputError naming `where` and the
    engine:location (never the options, which may hold a misplaced secret)."""
    if not is_store_address(text):
        shown = f" {_shown(text)!r}" if isinstance(text, str) else ""
        raise InputError(f"{where}{shown}: not a store address (expected {'|'.join(ENGINES)}:<path or URL>?collection=<name>)")
    shown = _shown(text)
    engine, rest = text.split(":", 1)
    location, _, query = rest.partition("?")
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise InputError(f"{where} {shown!r}: unknown option {unknown[0]!r} (valid: {', '.join(sorted(OPTIONS))})")
    collection = options.pop("collection", None) or options.pop("table", None)
    if not location or not collection:
        raise InputError(f"{where} {shown!r}: needs a path or URL and ?collection=<name> (or ?table=<name>)")
    if "@" in location.split("//", 1)[-1].split("/", 1)[0]:
        raise InputError(f"{where}: credentials do not belong in a store address; put the API key in the environment")
    if "timeout" in options and not _is_positive_number(options["timeout"]):
        raise InputError(f"{where} {shown!r}: ?timeout= must be a positive number of seconds, got {options['timeout']!r}")
    return StoreAddress(engine, location, collection, options)


def _is_positive_number(text: str) -> bool:
    try:
        return math.isfinite(float(text)) and float(text) > 0
    except ValueError:
        return False


def id_text(value: object, address: StoreAddress) -> str:
    """A chunk id as the store holds it, as text (io.checked_id); else one line naming the address."""
    return checked_id(value, str(address), "chunk id")


# engine -> the environment variable holding its API key (the only place a key comes from).
API_KEY_ENV = {"chroma": "CHROMA_API_KEY", "qdrant": "QDRANT_API_KEY"}
# Engines whose search of an unchanged collection differs between processes (Chroma's HNSW graph is
# rebuilt in memory from its log, in an order that varies): a run is one draw of it.
NONDETERMINISTIC_SEARCH = {"chroma": "Chroma's HNSW search of an unchanged collection differs between processes"}
STORE_URL_ENV = "RETRIEVAL_BENCH_STORE_URL"  # the store server the user vouches for outside git


def api_key(address: StoreAddress) -> str | None:
    """The engine's API key from the environment, for a server it may be sent to (None: no key set).
    An address comes from params.yaml, which a pull request can change: a key goes only to a host
    the user named outside git (retrieval_bench.endpoints), else this is one InputError."""
    name = API_KEY_ENV.get(address.engine)
    key = os.environ.get(name) if name else None
    if not key or not address.is_server:
        return key or None
    if not is_vouched(address.location, [os.environ.get(STORE_URL_ENV, ""), *user_endpoints(os.environ)]):
        raise InputError(
            f"{address}: {name} is set, and a key from your environment is only sent to a loopback host or to a store "
            "server you chose outside the repository, because anyone who can change params.yaml could otherwise collect it; "
            f"to allow this server, export {STORE_URL_ENV}={address.location} (or add it to {config_path(os.environ)}), "
            f"or unset {name} if the server needs no key")
    return key


def reason(error: BaseException) -> str:
    """An engine's exception as a short phrase for a one-line error: its type and first line, with
    any API key from the environment blanked out (a client may echo its headers)."""
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    for name in API_KEY_ENV.values():
        secret = os.environ.get(name)
        if secret:
            text = text.replace(secret, "***")
    return text[:300]


# engine -> retrieval.store.search keys it takes -> "int" (a positive integer) or "bool" (a switch);
# Qdrant's SearchParams are checked by its own model when the store opens.
SEARCH_PARAMETERS: dict[str, dict[str, str]] = {
    "lancedb": {"nprobes": "int", "minimum_nprobes": "int", "maximum_nprobes": "int", "refine_factor": "int", "ef": "int",
                "bypass_vector_index": "bool", "fast_search": "bool"},
    "chroma": {}, "sqlite-vec": {},
}


def check_search(engine: str, search: dict | None, where: str = "retrieval.store.search") -> None:
    """One InputError naming the key for a query parameter `engine` does not take or a bad value."""
    known = SEARCH_PARAMETERS.get(engine)
    if not search or known is None:
        return
    if not known:
        raise InputError(f"{where}: {engine} takes no query parameters (its index is searched as built); set it to null, got {search!r}")
    for key, value in search.items():
        kind = known.get(key)
        if kind is None:
            raise InputError(f"{where}: {engine} has no query parameter {key!r} (valid: {', '.join(known)})")
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if (kind == "bool" and not isinstance(value, bool)) or (kind == "int" and not (is_int and value > 0)):
            expected = "true or false" if kind == "bool" else "a positive integer"
            raise InputError(f"{where}.{key} must be {expected}, got {value!r}")


def no_collection(address: StoreAddress, noun: str, names: Iterable[str]) -> InputError:
    """The one-line error for a collection (or table) the store does not hold, listing those it does."""
    return InputError(f"{address}: no {noun} {address.collection!r} ({noun}s there: {', '.join(sorted(names)) or 'none'})")


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

    def search(self, vectors: np.ndarray, depth: int, search: dict | None, filter: Any) -> list[list[tuple[str, float]]]:
        """For each query vector, the store's own top `depth` (chunk id, similarity), best first,
        through its configured index; `search` holds engine query parameters (e.g. hnsw_ef),
        `filter` a metadata filter in the engine's own syntax."""

    def close(self) -> None: ...
