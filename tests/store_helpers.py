"""What the store tests share: random unit-vector chunks, exact search to compare with, and a store
opened for one test."""

from __future__ import annotations

import socket
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from retrieval_bench.core.endpoints import is_loopback
from retrieval_bench.core.store_address import StoreAddress
from retrieval_bench.stores import registry
from retrieval_bench.stores.base import Store

N, DIM, DEPTH = 300, 24, 10


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def random_chunks(seed: int):
    """(ids, texts, metadata, vectors, query vectors) of N chunks in 7 documents."""
    rng = np.random.default_rng(seed)
    ids = [f"doc{i % 7}#{i}" for i in range(N)]
    metadata = [{"doc_id": f"doc{i % 7}", "start": 10 * i, "end": 10 * i + 9} for i in range(N)]
    return (
        ids,
        [f"text {i}" for i in range(N)],
        metadata,
        unit(rng.normal(size=(N, DIM))),
        unit(rng.normal(size=(12, DIM))),
    )


def exact_top_k(queries: np.ndarray, vectors: np.ndarray, ids: list[str], depth: int, rows=None):
    rows = np.arange(len(ids)) if rows is None else np.asarray(rows)
    scores = queries @ vectors[rows].T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    return [[(ids[rows[j]], float(scores[q, j])) for j in order[q]] for q in range(len(queries))]


def assert_same_ranking(found, expected):
    assert [[chunk for chunk, _ in row] for row in found] == [[chunk for chunk, _ in row] for row in expected]
    assert np.allclose([s for row in found for _, s in row], [s for row in expected for _, s in row], atol=1e-5)


@contextmanager
def opened(address: StoreAddress) -> Iterator[Store]:
    """The store at `address`, closed afterwards."""
    store = registry.open_store(address)
    try:
        yield store
    finally:
        store.close()


def own_address() -> str | None:
    """This machine's address on its default route (no packet is sent: UDP only picks the route)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if is_loopback(address) or address == "0.0.0.0" else address
