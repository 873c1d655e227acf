"""Stage 4: rank every chunk for every question and score -> metrics/ (metrics, per question, plots)."""
import json

import numpy as np
import pandas as pd
from tqdm import tqdm

from retrieval_bench.io import (
    InputError,
    atomic_open,
    read_jsonl,
    run_stage,
    write_json,
)
from retrieval_bench.lexical import bm25_scores
from retrieval_bench.metrics import question_metrics, summary_names
from retrieval_bench.params import load_params
from retrieval_bench.rank import dense_scores, judged_ranks, rrf_scores
from retrieval_bench.relevance import judge, span_recall

CHUNKS = "data/chunks.parquet"
GOLDENSET = "data/goldenset.jsonl"
EMBEDDINGS = "data/embeddings"
METRICS = "metrics/metrics.json"
PER_QUESTION = "metrics/per_question.csv"
RECALL_CURVE = "metrics/plots/recall_at_k.csv"
RANK_HISTOGRAM = "metrics/plots/gold_rank_histogram.csv"
RANK_BUCKETS = [(1, 1), (2, 2), (3, 3), (4, 5), (6, 10), (11, 20), (21, 50), (51, 100), (101, None)]


def load_vectors(name: str, expected_ids: list[str]) -> np.ndarray:
    with open(f"{EMBEDDINGS}/{'corpus' if name == 'corpus' else 'question'}_ids.json", encoding="utf-8") as handle:
        ids = json.load(handle)
    if ids != expected_ids:
        raise InputError(f"{EMBEDDINGS}: {name} embeddings are for other ids than the current data; rerun the embed stage")
    return np.load(f"{EMBEDDINGS}/{name}.npy")


def score_function(retrieval: dict, chunks: pd.DataFrame, golden: list[dict]):
    """The configured retrieval method as a function of a batch of question rows."""
    methods = {}
    if retrieval["method"] in ("dense", "hybrid"):
        methods["dense"] = dense_scores(
            load_vectors("questions", [row["qid"] for row in golden]), load_vectors("corpus", chunks["chunk_id"].tolist())
        )
    if retrieval["method"] in ("bm25", "hybrid"):
        methods["bm25"] = bm25_scores(chunks["text"].tolist(), [row["question"] for row in golden])
    if retrieval["method"] == "hybrid":
        weights = retrieval["weights"]
        return rrf_scores([(methods[name], weights[name]) for name in ("dense", "bm25")], retrieval["rrf_k"])
    return methods[retrieval["method"]]


def rank_histogram(first_ranks: pd.Series) -> pd.DataFrame:
    rows = []
    for low, high in RANK_BUCKETS:
        inside = (first_ranks >= low) & (first_ranks <= (high if high is not None else np.inf))
        label = str(low) if low == high else (f"{low}-{high}" if high is not None else f">{low - 1}")
        rows.append({"gold_rank": label, "questions": int(inside.sum())})
    rows.append({"gold_rank": "none", "questions": int(first_ranks.isna().sum())})
    return pd.DataFrame(rows)


def main() -> None:
    params = load_params("score")
    retrieval = load_params("retrieval")
    ks = sorted(params["k"])
    chunks = pd.read_parquet(CHUNKS, columns=["chunk_id", "doc_id", "start", "end", "text"])
    golden = read_jsonl(GOLDENSET)
    judgements = judge(golden, chunks, params["min_coverage"])
    score_batch = score_function(retrieval, chunks, golden)
    per_question = []
    with tqdm(total=len(golden), desc=f"score ({retrieval['method']})", unit="q") as progress:
        ranked = judged_ranks(score_batch, len(golden), [j.indices for j in judgements], progress)
        for row, judgement, ranks in zip(golden, judgements, ranked):
            relevant = judgement.gains > 0
            recall_at = span_recall(judgement, ranks, ks) if judgement.span is not None else None
            metrics = question_metrics(ranks[relevant], judgement.gains[relevant], ks, recall_at)
            per_question.append({"qid": row["qid"], **metrics})
    table = pd.DataFrame(per_question)
    summary = {name: float(table[column].mean()) for name, column in summary_names(ks)}
    summary.update(
        n_questions=len(golden),
        n_chunks=len(chunks),
        n_questions_without_relevant_chunk=int(table["first_relevant_rank"].isna().sum()),
    )
    write_json(METRICS, summary)
    for path, frame in (
        (PER_QUESTION, table),
        (RECALL_CURVE, pd.DataFrame({"k": ks, "recall": [summary[f"recall@{k}"] for k in ks]})),
        (RANK_HISTOGRAM, rank_histogram(table["first_relevant_rank"])),
    ):
        with atomic_open(path) as handle:
            frame.to_csv(handle, index=False, lineterminator="\n")
    print(" ".join(f"{name}={value:.4f}" if isinstance(value, float) else f"{name}={value}" for name, value in summary.items()))


if __name__ == "__main__":
    run_stage(main)
