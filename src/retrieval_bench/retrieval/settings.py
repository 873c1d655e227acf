"""RetrievalSettings: one system's retrieval settings (the retrieval section with a panel system's
keys over it: core.params_panel), built once from the validated settings (as evaluation's Scoring
is) and passed to every method instead of the raw section; a method's own block (bm25, rerank, ann,
store, hybrid's fusion) is a small frozen part of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Bm25Settings:
    """retrieval.bm25: how chunks and questions are tokenized (stemmer english | none, stopwords en | none)."""

    stemmer: str
    stopwords: str


@dataclass(frozen=True)
class HybridSettings:
    """How method hybrid fuses its dense and BM25 runs: retrieval.fusion (rrf | weighted), rrf_k,
    each run's weight (retrieval.weights) and how deep each run is retrieved (fusion_depth)."""

    fusion: str
    rrf_k: float
    dense_weight: float
    bm25_weight: float
    fusion_depth: int


@dataclass(frozen=True)
class RerankSettings:
    """retrieval.rerank, and where the cross-encoder's scores are cached (`cache`: each panel system
    has its own, rerank.score_cache; None: the default system's)."""

    model: str | None
    first_stage: str
    candidates: int
    batch_size: int
    cache: str | Path | None = None


@dataclass(frozen=True)
class AnnSettings:
    """retrieval.ann: the FAISS index type, its build parameters and its query-time ones."""

    index: str
    hnsw_m: int
    ef_construction: int
    ef_search: int
    nlist: int
    nprobe: int
    pq_m: int
    pq_bits: int


@dataclass(frozen=True)
class StoreSettings:
    """retrieval.store: the store searched (None: load.source, resolved by validation), the engine's
    query parameters and its metadata filter (in the engine's own syntax)."""

    address: str | None
    search: dict[str, Any] | None
    filter: Any


@dataclass(frozen=True)
class RetrievalSettings:
    """One system's retrieval settings. `where`: the params key they came from (`retrieval`, or
    `panel.NAME` for a panel system's own keys), which the methods' messages name."""

    method: str
    depth: int | str  # chunks per question, or "all"
    device: str
    bm25: Bm25Settings
    hybrid: HybridSettings
    rerank: RerankSettings
    ann: AnnSettings
    store: StoreSettings
    run_file: str | None
    python: str | None
    trec_export: str | None
    where: str = "retrieval"

    @classmethod
    def from_params(
        cls, settings: Mapping[str, Any], where: str = "retrieval", rerank_cache: str | Path | None = None
    ) -> RetrievalSettings:
        """From a validated retrieval section or panel system (params_panel.panel_system; its
        chunking and embedder are not retrieval settings); `rerank_cache`: RerankSettings.cache."""
        return cls(
            method=settings["method"],
            depth=settings["depth"],
            device=settings["device"],
            bm25=Bm25Settings(**settings["bm25"]),
            hybrid=HybridSettings(
                fusion=settings["fusion"],
                rrf_k=settings["rrf_k"],
                dense_weight=settings["weights"]["dense"],
                bm25_weight=settings["weights"]["bm25"],
                fusion_depth=settings["fusion_depth"],
            ),
            rerank=RerankSettings(**settings["rerank"], cache=rerank_cache),
            ann=AnnSettings(**settings["ann"]),
            store=StoreSettings(**settings["store"]),
            run_file=settings["run_file"],
            python=settings["python"],
            trec_export=settings["trec_export"],
            where=where,
        )
