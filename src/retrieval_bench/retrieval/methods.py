"""Every retrieval method behind one interface: (questions, corpus, settings, depth) -> run, `settings`
a RetrievalSettings and `depth` resolved (a number of chunks).

A new method is one module with a `retrieve` function and one line here; `needs_vectors` says
whether the retrieve stage must load the embeddings for it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from retrieval_bench.core.params_panel import method_searches_vectors
from retrieval_bench.core.run_table import check_scores
from retrieval_bench.retrieval import ann, bm25, costs, dense, external, hybrid, rerank, store_search
from retrieval_bench.retrieval.run import Corpus, Questions, resolve_depth
from retrieval_bench.retrieval.settings import RetrievalSettings

METHODS = {
    "dense": dense.retrieve,
    "bm25": bm25.retrieve,
    "hybrid": hybrid.retrieve,
    "run-file": external.retrieve_run_file,
    "python": external.retrieve_python,
    "rerank": rerank.retrieve,
    "ann": ann.retrieve,
    "store": store_search.retrieve,
}
# What a method reports beside its run (data/panel/<system>/run_info.json): (settings, questions, corpus, run) -> dict.
RUN_INFO = {"ann": ann.run_info, "store": store_search.run_info}


def needs_vectors(settings: RetrievalSettings) -> bool:
    return method_searches_vectors(settings.method, settings.rerank.first_stage)


def run_info(settings: RetrievalSettings, questions: Questions, corpus: Corpus, run: pd.DataFrame) -> dict:
    """data/panel/<system>/run_info.json: the method, the depth, what the method reports (ANN recall), and the
    system's size (retrieval.costs: chunks, index bytes)."""
    report = RUN_INFO.get(settings.method)
    return {
        "method": settings.method,
        "depth": settings.depth,
        **(report(settings, questions, corpus, run) if report else {}),
        **costs.system_costs(settings, corpus),
    }


def depth_text(settings: RetrievalSettings, run: pd.DataFrame, n_questions: int, max_k: int, n_chunks: int) -> str:
    """The depth the run has (an external run's is its own, an ANN's can fall short of the one asked),
    and a warning when a question holds fewer results than the deepest score.k: recall@k would
    count only what the run holds, silently equal to a shallower k (not when it holds every one
    of the `n_chunks`: then nothing is missing)."""
    counts = run.groupby("qid").size()  # questions with no result are not in it
    fewest, most = (int(counts.min()), int(counts.max())) if len(counts) else (0, 0)
    held = f"{fewest}" if fewest == most else f"{fewest}-{most}"
    text = f"{settings.method}, depth {settings.depth}, {held} results per question"
    short = int((counts < min(max_k, n_chunks)).sum()) + (n_questions - len(counts))
    if short:
        text += (
            f"; warning: {short} of {n_questions} questions hold fewer than score.k {max_k} results "
            f"(recall@{max_k} counts only what the run holds)"
        )
    return text


def search_task(
    settings: RetrievalSettings, questions: Questions, corpus: Corpus, scratch: Path
) -> Callable[[], int] | None:
    """The timed search of one system (retrieval.costs.search_task), or None (an external run)."""
    return costs.search_task(settings, questions, corpus, retrieve, scratch)


def retrieve(settings: RetrievalSettings, questions: Questions, corpus: Corpus, progress=None) -> pd.DataFrame:
    """The run of `settings.method`, checked before the stage writes anything; its messages name
    `settings.where` (`panel.NAME` for a panel system's own keys)."""
    depth = resolve_depth(settings.depth, len(corpus.chunk_ids))
    run = METHODS[settings.method](questions, corpus, settings, depth, progress)
    check_scores(run, f"{settings.where}.method {settings.method}")  # before the stage writes anything
    return run
