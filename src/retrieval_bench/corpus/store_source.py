"""load.source as a vector store: the chunks, their ids and texts and the document each belongs to,
read page by page (vectors are left in the store), as ready chunks from a file would be.

A chunk's document and offsets come from its metadata fields `doc_id`, `start` and `end`, renamed by
the address's `document`, `start` and `end` options (an empty option, `?start=`, reads no such
field). With them the documents are rebuilt from their chunks and questions anchored to evidence
spans are scored as on the documents themselves; without them each chunk is its own document. The
chunks come out in document and offset order (else chunk id order), whatever order the engine
keeps, so an unchanged collection always gives the same data/chunks.parquet.
"""

from __future__ import annotations

import re

import pandas as pd

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.stage import progress
from retrieval_bench.core.store_address import StoreAddress, parse_address
from retrieval_bench.corpus.load import DOCUMENT_FIELDS, Corpus, note_repeated_texts, ready_chunks_corpus
from retrieval_bench.stores.base import PAGE_ROWS
from retrieval_bench.stores.registry import open_store

DOCUMENT_OPTIONS = {"doc_id": "document", "start": "start", "end": "end"}  # chunk field -> the address option naming it


def document_fields(address: StoreAddress) -> dict[str, str]:
    """chunk field (doc_id, start, end) -> the metadata field holding it, for the fields read."""
    named = {key: address.option(DOCUMENT_OPTIONS[key], key) for key in DOCUMENT_FIELDS}
    return {key: field for key, field in named.items() if field}


_DIGITS = re.compile(r"\d+")


def _natural(ids: pd.Series) -> pd.Series:
    """Sort keys of chunk ids with their numbers in numeric order (manual-2 before manual-10), of
    any length, then the id itself (doc-1 before doc-01: a total order, whatever order the store
    pages them in): without offsets this is the order a document's chunks are joined in."""

    def numeric(number: re.Match) -> str:
        digits = number.group().lstrip("0") or "0"
        return f"{len(digits):05d}{digits}"  # the longer number is the larger: its length first

    return ids.astype(str).map(lambda chunk_id: f"{_DIGITS.sub(numeric, chunk_id)}\0{chunk_id}")


def read_store_chunks(address: StoreAddress) -> pd.DataFrame:
    """chunk_id, text and the document fields some chunk has, in chunk id order (_natural)."""
    fields = document_fields(address)
    columns: dict[str, list] = {"chunk_id": [], "text": [], **{key: [] for key in fields}}
    store = open_store(address)
    try:
        with progress(store.count(), f"load {address.engine}", unit="chunk") as bar:
            for page in store.pages(PAGE_ROWS, with_vectors=False):
                columns["chunk_id"] += page.ids
                columns["text"] += page.texts
                for key, field in fields.items():
                    columns[key] += [record.get(field) for record in page.metadata]
                bar.update(len(page.ids))
    finally:
        store.close()
    if not columns["chunk_id"]:
        raise InputError(f"{address}: the collection holds no chunks")
    present = {key: values for key, values in columns.items() if any(value is not None for value in values)}
    return pd.DataFrame(present).sort_values("chunk_id", kind="stable", ignore_index=True, key=_natural)


def load_store_corpus(source: str) -> Corpus:
    """The Corpus of the store at address `source` (load.source); no labels."""
    address = parse_address(source)
    notes: list[str] = []
    records = read_store_chunks(address)
    if "doc_id" in records and not {"start", "end"} & set(records.columns):
        notes.append(
            "the chunks have a doc_id but no offsets: each document is rebuilt from its chunks joined in chunk-id "
            "order (numbers in numeric order), as the store keeps no other; give start/end metadata for the documents "
            "as they were"
        )
    documents, chunks = ready_chunks_corpus(records, address, notes)
    note_repeated_texts(chunks, notes)
    return Corpus(documents=documents, chunks=chunks, notes=notes)
