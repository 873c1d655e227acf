"""`embed.corpus_vectors: stored`: the corpus vectors are the ones the vector store at load.source
already holds, so evaluating a production index costs the questions' embeddings only.

They are read page by page into data/chunks.parquet's row order (matched by chunk id), then checked
to come from embed.model as configured (backend, precision, max_seq_length, document_prompt): a
fixed sample of chunks is embedded again and every one must have cosine >= MIN_COSINE with its
stored vector; another dimension or a lower cosine is a one-line refusal. Stored vectors that are
unit length (within UNIT_TOLERANCE) are kept bit for bit, others are normalized as embed.model's own
are, so dense search stays cosine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.stage import progress
from retrieval_bench.core.store_address import StoreAddress, parse_address
from retrieval_bench.embedding.embed import EmbedProgress, embed_texts
from retrieval_bench.embedding.settings import EmbedSettings
from retrieval_bench.stores.base import PAGE_ROWS
from retrieval_bench.stores.registry import open_store

SAMPLE = 32  # chunks embedded again to check the model
MIN_COSINE = 0.999  # bf16 or another backend of the same model stays above it (docs/benchmarks.md, Embedding backends); int8 does not
UNIT_TOLERANCE = 1e-4


def read_vectors(address: StoreAddress, chunk_ids: list[str]) -> np.ndarray:
    """The store's vector of each chunk id, in that order (float32). Store chunks not in `chunk_ids`
    (empty texts load_chunks dropped) are skipped; a chunk id the store lacks is an InputError."""
    position = {chunk_id: row for row, chunk_id in enumerate(chunk_ids)}
    vectors: np.ndarray | None = None
    filled = np.zeros(len(chunk_ids), dtype=bool)
    store = open_store(address)
    try:
        with progress(store.count(), f"read {address.engine} vectors", unit="chunk") as bar:
            for page in store.pages(PAGE_ROWS, with_vectors=True):
                page_vectors = page.vectors
                assert page_vectors is not None  # asked for: with_vectors=True
                if vectors is None:
                    vectors = np.zeros((len(chunk_ids), page_vectors.shape[1]), dtype=np.float32)
                at = np.array([position.get(chunk_id, -1) for chunk_id in page.ids], dtype=np.int64)
                vectors[at[at >= 0]] = page_vectors[at >= 0]
                filled[at[at >= 0]] = True
                bar.update(len(page.ids))
    finally:
        store.close()
    if not filled.all():
        missing = [chunk_ids[row] for row in np.flatnonzero(~filled)[:3]]
        raise InputError(
            f"{address}: {int((~filled).sum())} chunks of {paths.CHUNKS} have no vector there (e.g. {', '.join(missing)}); "
            "the store changed since load_chunks read it: rerun `dvc repro`"
        )
    assert vectors is not None  # every chunk was filled: some page came
    return _unit_rows(vectors, address, chunk_ids)


def _unit_rows(vectors: np.ndarray, address: StoreAddress, chunk_ids: list[str]) -> np.ndarray:
    """The rows normalized to unit length; a non-finite or all-zero stored vector is a one-line
    InputError naming the store and the chunk (it would break dense search later)."""
    with np.errstate(all="ignore"):
        norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    for bad, what in (
        (~np.isfinite(vectors).all(axis=1), "not finite (NaN or infinite values)"),
        (norms == 0, "all zeros"),
    ):
        if bad.any():
            raise InputError(
                f"embed.corpus_vectors stored: the vector of chunk {chunk_ids[int(np.flatnonzero(bad)[0])]!r} in {address} "
                f"is {what}{f' (and {int(bad.sum()) - 1} more)' if bad.sum() > 1 else ''}; it cannot be compared "
                "by cosine: fix it in the store, or set embed.corpus_vectors: embed"
            )
    off = np.abs(norms - 1.0) > UNIT_TOLERANCE
    vectors[off] /= norms[off, None].astype(np.float32)
    return vectors


def sample_rows(chunk_ids: list[str], size: int = SAMPLE) -> list[int]:
    """`size` rows chosen by a hash of their chunk ids: the same chunks whatever their order."""
    return sorted(
        heapq.nsmallest(size, range(len(chunk_ids)), key=lambda row: hashlib.sha256(chunk_ids[row].encode()).digest())
    )


def check_model(
    address: StoreAddress, stored: np.ndarray, chunks: pd.DataFrame, settings: EmbedSettings, cache_dir: str | Path
) -> float:
    """The lowest cosine between stored vectors and embed.model's own for the sample; a dimension or
    cosine that shows another model made them is a one-line InputError saying how to go on."""
    rows = sample_rows(chunks["chunk_id"].tolist())
    texts = chunks["text"].iloc[rows].tolist()
    # Here, not on Ray (embed.engine): a Ray cluster gives the same vectors, and 32 texts do not pay for starting one.
    embedded, _ = embed_texts(
        texts,
        dataclasses.replace(settings, engine="local"),
        settings.document_prompt,
        cache_dir,
        progress=EmbedProgress("chunk", bar=False, tokens=False),
    )
    model = f"{settings.model_key} {settings.model}"
    how = (
        f"set {settings.model_key} (and its document_prompt, max_seq_length, backend) to the model that made the vectors in {address}, "
        "or embed.corpus_vectors: embed to embed the chunks again"
    )
    if embedded.shape[1] != stored.shape[1]:
        raise InputError(
            f"embed.corpus_vectors stored: the vectors in {address} have {stored.shape[1]} dimensions and {model} "
            f"makes {embedded.shape[1]}: another model made them, which one is unknown; {how}"
        )
    cosines = np.sum(embedded * stored[rows], axis=1)
    lowest = float(cosines.min())
    if lowest < MIN_COSINE:
        raise InputError(
            f"embed.corpus_vectors stored: the vectors in {address} were not made by {model} as configured (cosine with "
            f"its own vectors as low as {lowest:.4f} on {len(rows)} chunks, {MIN_COSINE} needed); which model made them "
            f"is unknown; {how}"
        )
    return lowest


def stored_corpus_vectors(
    source: str, chunks: pd.DataFrame, settings: EmbedSettings, cache_dir: str | Path
) -> tuple[np.ndarray, str]:
    """The stored vectors of `chunks` (chunk_id, text) in their order, checked against embed.model,
    and the line the stage prints."""
    address = parse_address(source)
    vectors = read_vectors(address, chunks["chunk_id"].tolist())
    lowest = check_model(address, vectors, chunks, settings, cache_dir)
    return vectors, (
        f"{len(chunks)} chunk vectors read from {address}; {settings.model_key} {settings.model} checked on "
        f"{min(SAMPLE, len(chunks))} of them (lowest cosine {lowest:.5f})"
    )
