"""Open a store by its address: each engine is one adapter module, imported only when used, so a
missing optional extra is a one-line error naming the `pip install` that brings it."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from retrieval_bench.core.errors import optional_extra
from retrieval_bench.core.store_address import ENGINES, StoreAddress
from retrieval_bench.stores.base import Store


def adapter(engine: str) -> ModuleType:
    """The adapter module of `engine` (explicit imports, so dvc.yaml's deps test sees them); a
    library of its extra missing is one line naming the extra (io.optional_extra)."""
    extra, _ = ENGINES[engine]
    with optional_extra(extra, f"a {engine} store"):
        if engine == "chroma":
            from retrieval_bench.stores import chroma

            return chroma
        if engine == "lancedb":
            from retrieval_bench.stores import lancedb

            return lancedb
        if engine == "qdrant":
            from retrieval_bench.stores import qdrant

            return qdrant
        from retrieval_bench.stores import sqlite_vec

        return sqlite_vec


def open_store(address: StoreAddress) -> Store:
    """A connected Store; a missing path, collection or server is one InputError naming the address."""
    return adapter(address.engine).open_store(address)


def create_collection(
    address: StoreAddress,
    ids: list[str],
    texts: list[str],
    metadata: list[dict[str, Any]],
    vectors: np.ndarray,
    index: dict[str, Any] | None = None,
) -> None:
    """Write a new collection (replacing one of the same name) with the chunks and their vectors;
    `index` asks for the engine's ANN index with its build settings. For tests, benchmarks and
    users trying the store method on their Parquet chunks."""
    adapter(address.engine).create_collection(address, ids, texts, metadata, vectors, index)
