"""Stage 4: rank every chunk for every question and score -> metrics/ (metrics, per question, plots)."""
import json
import sys

import numpy as np
import pandas as pd
from tqdm import tqdm

from retrieval_bench.io import InputError, atomic_open, read_jsonl, run_stage, write_json
from retrieval_bench.evaluation.metrics import rank_histogram, summarize
from retrieval_bench.params import load_params
from retrieval_bench.retrieval.rank import method_scores
from retrieval_bench.evaluation.scoring import score_questions, unscorable_warning

CHUNKS = "data/chunks.parquet"
GOLDENSET = "data/goldenset.jsonl"
EMBEDDINGS = "data/embeddings"
METRICS = "metrics/metrics.json"
PER_QUESTION = "metrics/per_question.csv"
RECALL_CURVE = "metrics/plots/recall_at_k.csv"
RANK_HISTOGRAM = "metrics/plots/first_relevant_rank_histogram.csv"


def load_vectors(name: str, ids_file: str, expected_ids: list[str]) -> np.ndarray:
    with open(f"{EMBEDDINGS}/{ids_file}", encoding="utf-8") as handle:
        if json.load(handle) != expected_ids:
            raise InputError(f"{EMBEDDINGS}: {name} embeddings are for other ids than the current data; rerun the embed stage")
    return np.load(f"{EMBEDDINGS}/{name}.npy")


def main() -> None:
    params = load_params("score")
    retrieval = load_params("retrieval")
    ks = sorted(params["k"])
    chunks = pd.read_parquet(CHUNKS, columns=["chunk_id", "doc_id", "start", "end", "text"])
    golden = read_jsonl(GOLDENSET)
    question_vectors = chunk_vectors = None
    if retrieval["method"] != "bm25":
        question_vectors = load_vectors("questions", "question_ids.json", [row["qid"] for row in golden])
        chunk_vectors = load_vectors("corpus", "corpus_ids.json", chunks["chunk_id"].tolist())
    score_batch = method_scores(
        retrieval["method"], question_vectors, chunk_vectors, chunks["text"].tolist(), [row["question"] for row in golden],
        retrieval["rrf_k"], retrieval["weights"], retrieval["bm25"],
    )
    with tqdm(total=len(golden), desc=f"score ({retrieval['method']})", unit="q") as progress:
        table = score_questions(golden, chunks, score_batch, ks, params["min_coverage"], params["ties"], progress)
    warning = unscorable_warning(table)
    if warning:
        print(f"score: warning: {warning}", file=sys.stderr)
    summary = summarize(table, ks, len(chunks))
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
