"""A vector store address (engine:location?collection=name&options), parsed and checked without
importing any store: params.py checks addresses with it, retrieval_bench.stores opens them.

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
wait; default 30). Credentials never appear in an address (retrieval_bench.stores.base.api_key).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from retrieval_bench.core.errors import InputError

# engine -> (the pip extra that installs it, the module it needs): a missing extra is one line.
ENGINES = {
    "chroma": ("chroma", "chromadb"),
    "lancedb": ("lancedb", "lancedb"),
    "qdrant": ("qdrant", "qdrant_client"),
    "sqlite-vec": ("sqlite-vec", "sqlite_vec"),
}
# engine -> scheme -> the port its client connects to where a server URL names none: parse_address
# writes it into the URL, so the key check (retrieval_bench.core.endpoints) and the client see one port.
DEFAULT_PORTS = {"chroma": {"http": 8000, "https": 443}, "qdrant": {"http": 6333, "https": 6333}}
OPTIONS = {"collection", "table", "text", "id", "document", "start", "end", "vector", "timeout"}
DEFAULT_TIMEOUT = (
    30.0  # seconds a request to a store server may wait (connect, send, each read) unless ?timeout= says otherwise
)


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

    @overload
    def option(self, name: str, default: str) -> str: ...

    @overload
    def option(self, name: str, default: None = None) -> str | None: ...

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
        raise InputError(
            f"{where}{shown}: not a store address (expected {'|'.join(ENGINES)}:<path or URL>?collection=<name>)"
        )
    shown = _shown(text)
    engine, rest = text.split(":", 1)
    location, _, query = rest.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    options = dict(pairs)
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise InputError(f"{where} {shown!r}: unknown option {unknown[0]!r} (valid: {', '.join(sorted(OPTIONS))})")
    names = [name for name, _ in pairs]
    twice = sorted({name for name in names if names.count(name) > 1}) or (
        ["collection and table"] if {"collection", "table"} <= set(names) else []  # one option, two spellings
    )
    if twice:
        raise InputError(f"{where} {shown!r}: {twice[0]} given twice; give each option once")
    collection = options.pop("collection", None) or options.pop("table", None)
    if not location or not collection:
        raise InputError(f"{where} {shown!r}: needs a path or URL and ?collection=<name> (or ?table=<name>)")
    if "@" in location.split("//", 1)[-1].split("/", 1)[0]:
        raise InputError(f"{where}: credentials do not belong in a store address; put the API key in the environment")
    if "timeout" in options and not _is_positive_number(options["timeout"]):
        raise InputError(
            f"{where} {shown!r}: ?timeout= must be a positive number of seconds, got {options['timeout']!r}"
        )
    return StoreAddress(engine, _with_port(engine, location, where, shown), collection, options)


def _with_port(engine: str, location: str, where: str, shown: str) -> str:
    """`location` with the port the engine's client would use written in, where it is a server URL
    that names none (an engine without a default port, or a path, is returned as it is)."""
    try:
        parts = urlsplit(location)
    except ValueError as error:  # e.g. "http://[::1": an unclosed IPv6 bracket
        raise InputError(f"{where} {shown!r}: not a URL ({error})") from None
    default = DEFAULT_PORTS.get(engine, {}).get(parts.scheme.lower())
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"{where} {shown!r}: the port must be a number from 0 to 65535") from None
    if default is None or port is not None:
        return location
    return urlunsplit(parts._replace(netloc=f"{parts.netloc}:{default}"))


def _is_positive_number(text: str) -> bool:
    try:
        return math.isfinite(float(text)) and float(text) > 0
    except ValueError:
        return False


# engine -> retrieval.store.search keys it takes -> "int" (a positive integer) or "bool" (a switch);
# Qdrant's SearchParams are checked by its own model when the store opens.
SEARCH_PARAMETERS: dict[str, dict[str, str]] = {
    "lancedb": {
        "nprobes": "int",
        "minimum_nprobes": "int",
        "maximum_nprobes": "int",
        "refine_factor": "int",
        "ef": "int",
        "bypass_vector_index": "bool",
        "fast_search": "bool",
    },
    "chroma": {},
    "sqlite-vec": {},
}


def check_search(engine: str, search: dict[str, Any] | None, where: str = "retrieval.store.search") -> None:
    """One InputError naming the key for a query parameter `engine` does not take or a bad value."""
    known = SEARCH_PARAMETERS.get(engine)
    if not search or known is None:
        return
    if not known:
        raise InputError(
            f"{where}: {engine} takes no query parameters (its index is searched as built); set it to null, got {search!r}"
        )
    for key, value in search.items():
        kind = known.get(key)
        if kind is None:
            raise InputError(f"{where}: {engine} has no query parameter {key!r} (valid: {', '.join(known)})")
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if (kind == "bool" and not isinstance(value, bool)) or (kind == "int" and not (is_int and value > 0)):
            expected = "true or false" if kind == "bool" else "a positive integer"
            raise InputError(f"{where}.{key} must be {expected}, got {value!r}")


def check_store_params(params: dict[str, Any], path: Path) -> None:
    """params.yaml's store addresses (load.source, retrieval.store) parse and fit the method; a null
    retrieval.store.address is resolved to load.source here, once for every reader."""
    source = params["load"]["source"]
    if is_store_address(source):
        parse_address(source, f"{path}: load.source")
    elif params["embed"]["corpus_vectors"] == "stored":
        raise InputError(
            f"{path}: embed.corpus_vectors stored needs load.source to be a vector store address "
            f"(e.g. lancedb:data/store.lancedb?table=chunks), got {source!r}"
        )
    check_retrieval_store(params["retrieval"], source, "retrieval", path)


def _not_json(value: Any) -> Any:
    """The first value in `value` (mappings and lists walked) JSON has no type for (a YAML date,
    binary, a set, a NaN), or None."""
    if isinstance(value, dict):
        for key, item in value.items():
            odd = key if not isinstance(key, str) else _not_json(item)
            if odd is not None:
                return odd
        return None
    if isinstance(value, list):
        return next((odd for odd in map(_not_json, value) if odd is not None), None)
    if isinstance(value, float) and not math.isfinite(value):
        return value
    return None if value is None or isinstance(value, (str, int, float)) else value


def check_retrieval_store(retrieval: dict[str, Any], source: str, where: str, path: Path) -> None:
    """One retrieval settings' store (the retrieval section's or a panel system's, `where` naming
    them) parses and fits its method and engine; a null store.address is resolved to `source`
    (load.source)."""
    store = retrieval["store"]
    address = store["address"]
    if address is not None:
        if not isinstance(address, str):
            raise InputError(
                f"{path}: {where}.store.address must be a store address or null (= load.source), got {address!r}"
            )
        parse_address(address, f"{path}: {where}.store.address")
    if retrieval["method"] == "store" and address is None and not is_store_address(source):
        raise InputError(f"{path}: {where}.method store needs {where}.store.address, or load.source a store address")
    if address is None and is_store_address(source):
        store["address"] = source  # null = load.source, resolved here once for every reader
    for key in ("search", "filter"):  # written to the run's settings as JSON and sent to the engine as it
        odd = _not_json(store[key])
        if odd is not None:
            raise InputError(
                f"{path}: {where}.store.{key} holds {odd!r}, a {type(odd).__name__}: YAML read it so, and a store "
                "query takes JSON values (text, numbers, true/false, lists, mappings); quote it"
            )
    if store["search"] is not None and not isinstance(store["search"], dict):
        raise InputError(
            f"{path}: {where}.store.search must be a mapping of the engine's query parameters or null, got {store['search']!r}"
        )
    if store["address"] is not None:
        check_search(parse_address(store["address"]).engine, store["search"], f"{path}: {where}.store.search")
