"""Hybrid retrieval: fuse a dense and a BM25 run, as real systems do.

- `rrf` (reciprocal rank fusion): score = sum over runs of weight / (rrf_k + rank in that run);
  a chunk a run did not retrieve gets nothing from it. Tied chunks in a run share their worst
  rank, so fusion never depends on the order of the corpus.
- `weighted`: score = sum over runs of weight x the chunk's min-max normalised score in that
  run (0 where the run did not retrieve it).
Each component run is retrieved `retrieval.fusion_depth` deep.
"""
from __future__ import annotations

import pandas as pd

from retrieval_bench.retrieval import bm25, dense
from retrieval_bench.retrieval.run import from_records


def fuse(runs: dict[str, pd.DataFrame], weights: dict[str, float], fusion: str, rrf_k: float, depth: int) -> pd.DataFrame:
    parts = []
    for name, run in runs.items():
        if fusion == "rrf":
            worst_rank = run.groupby(["qid", "score"], sort=False)["rank"].transform("max")
            contribution = weights[name] / (rrf_k + worst_rank)
        else:
            low = run.groupby("qid")["score"].transform("min")
            high = run.groupby("qid")["score"].transform("max")
            contribution = weights[name] * ((run["score"] - low) / (high - low).where(high > low, 1.0))
        parts.append(pd.DataFrame({"qid": run["qid"], "chunk_id": run["chunk_id"], "score": contribution}))
    fused = pd.concat(parts).groupby(["qid", "chunk_id"], sort=False, as_index=False)["score"].sum()
    return from_records(fused.itertuples(index=False, name=None), depth)


def retrieve(questions, corpus, settings: dict, depth: int, progress=None) -> pd.DataFrame:
    candidates = max(depth, min(settings["fusion_depth"], len(corpus.chunk_ids)))
    runs = {"dense": dense.retrieve(questions, corpus, settings, candidates), "bm25": bm25.retrieve(questions, corpus, settings, candidates)}
    fused = fuse(runs, settings["weights"], settings["fusion"], settings["rrf_k"], depth)
    if progress is not None:
        progress.update(len(questions.qids))
    return _in_question_order(fused, questions.qids)


def _in_question_order(run: pd.DataFrame, qids: list[str]) -> pd.DataFrame:
    order = {qid: i for i, qid in enumerate(qids)}
    return run.iloc[run["qid"].map(order).argsort(kind="stable")].reset_index(drop=True)
