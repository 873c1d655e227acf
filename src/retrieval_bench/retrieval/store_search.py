"""`retrieval.method: store`: every question goes to the vector store's own search — its index with
the settings it was built with, the query parameters of `retrieval.store.search` and the metadata
filter of `retrieval.store.filter` — for the run's depth, and the store's answers are the run.

The store is `retrieval.store.address` (params.py resolves null to load.source). The questions are embedded by embed.model, so the store's vectors must come from that model:
with `embed.corpus_vectors: stored` embed_corpus has checked it. run_info reports the run's recall
against exact search over data/embeddings/corpus.npy — the store's own vectors under
`corpus_vectors: stored` — as `ann_recall`: what the index costs. With a filter the store searches
a subset that exact search over every chunk does not, so no recall is reported then. An engine
whose search is not repeatable (base.NONDETERMINISTIC_SEARCH: Chroma) gets a warning on stderr and
`one_draw` in run_info: the run, and every metric of it, is one draw; repeat retrieve to see the spread.
"""

from __future__ import annotations

import sys

import pandas as pd

from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.run_table import check_run, from_records
from retrieval_bench.core.store_address import StoreAddress, parse_address
from retrieval_bench.retrieval.run import Corpus, Questions, resolve_depth
from retrieval_bench.retrieval.run_info import recall_against_exact
from retrieval_bench.retrieval.settings import RetrievalSettings
from retrieval_bench.stores.base import NONDETERMINISTIC_SEARCH
from retrieval_bench.stores.registry import open_store

QUERY_BLOCK = 256  # questions per request to the store


def searched_store(settings: RetrievalSettings) -> StoreAddress:
    """retrieval.store.address, parsed (validation resolves a null one to load.source, or refuses it)."""
    assert settings.store.address is not None, "params validation resolves or refuses a null store.address"
    return parse_address(settings.store.address, f"{settings.where}.store.address")


def retrieve(
    questions: Questions, corpus: Corpus, settings: RetrievalSettings, depth: int, progress=None
) -> pd.DataFrame:
    store_settings = settings.store
    address = searched_store(settings)
    records: list[tuple[str, str, float]] = []
    if address.engine in NONDETERMINISTIC_SEARCH:
        print(
            f"warning: {address}: {NONDETERMINISTIC_SEARCH[address.engine]}; this run is one draw of it "
            "(repeat retrieve to see the spread of its metrics)",
            file=sys.stderr,
        )
    store = open_store(address)
    try:
        for start in range(0, len(questions.qids), QUERY_BLOCK):
            qids = questions.qids[start : start + QUERY_BLOCK]
            found = store.search(
                questions.dense_vectors[start : start + QUERY_BLOCK],
                depth,
                store_settings.search,
                store_settings.filter,
            )
            records.extend(
                (qid, chunk_id, score) for qid, hits in zip(qids, found, strict=True) for chunk_id, score in hits
            )
            if progress is not None:
                progress.update(len(qids))
    finally:
        store.close()
    if not records and store_settings.filter:  # else "no question of the golden set is in the run"
        raise InputError(
            f"{address}: {settings.where}.store.filter {quoted(store_settings.filter)} matched no chunk: the search returned "
            "nothing for any question"
        )
    run = from_records(records, depth)
    # The store's chunks must be the chunks being scored: another collection, or one changed since
    # load_chunks, names chunk ids that data/chunks.parquet lacks.
    return check_run(run, questions.qids, set(corpus.chunk_ids), str(address))


def run_info(settings: RetrievalSettings, questions: Questions, corpus: Corpus, run: pd.DataFrame) -> dict:
    """The store, its query settings and the run's recall against exact search (no filter only)."""
    store_settings = settings.store
    address = searched_store(settings)
    info = {"store": str(address), "search": store_settings.search, "filter": store_settings.filter}
    if address.engine in NONDETERMINISTIC_SEARCH:
        info["one_draw"] = f"{NONDETERMINISTIC_SEARCH[address.engine]}: this run is one draw of it"
    if store_settings.filter:
        return {
            **info,
            "ann_recall_skipped": f"{settings.where}.store.filter is set: the store searched a subset, exact search every chunk",
        }
    depth = resolve_depth(settings.depth, len(corpus.chunk_ids))
    return {**info, "ann_recall": recall_against_exact(questions, corpus, run, depth)}
