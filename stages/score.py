"""Stage 4: rank every chunk for every question and score -> metrics/ (metrics, per question, plots)."""
import json
import sys

import numpy as np
import pandas as pd
from tqdm import tqdm

from retrieval_bench import paths
from retrieval_bench.io import InputError, atomic_open, read_jsonl, run_stage, write_json
from retrieval_bench.evaluation.metrics import rank_histogram, summarize
from retrieval_bench.params import load_params
from retrieval_bench.retrieval.rank import method_scores
from retrieval_bench.evaluation.scoring import score_questions, unscorable_warning


def load_vectors(vectors: str, ids: str, expected_ids: list[str]) -> np.ndarray:
    with open(ids, encoding="utf-8") as handle:
        if json.load(handle) != expected_ids:
            raise InputError(f"{vectors}: embeddings of other ids than the current data; rerun the embed stage")
    return np.load(vectors)


def main() -> None:
    params = load_params("score")
    retrieval = load_params("retrieval")
    ks = sorted(params["k"])
    chunks = pd.read_parquet(paths.CHUNKS, columns=["chunk_id", "doc_id", "start", "end", "text"])
    golden = read_jsonl(paths.GOLDENSET)
    question_vectors = chunk_vectors = None
    if retrieval["method"] != "bm25":
        question_vectors = load_vectors(paths.QUESTION_VECTORS, paths.QUESTION_IDS, [row["qid"] for row in golden])
        chunk_vectors = load_vectors(paths.CORPUS_VECTORS, paths.CORPUS_IDS, chunks["chunk_id"].tolist())
    score_batch = method_scores(
        retrieval, question_vectors, chunk_vectors, chunks["text"].tolist(), [row["question"] for row in golden]
    )
    with tqdm(total=len(golden), desc=f"score ({retrieval['method']})", unit="q") as progress:
        table = score_questions(golden, chunks, score_batch, ks, params["min_coverage"], params["ties"], progress)
    warning = unscorable_warning(table)
    if warning:
        print(f"score: warning: {warning}", file=sys.stderr)
    summary = summarize(table, ks, len(chunks))
    write_json(paths.METRICS, summary)
    for path, frame in (
        (paths.PER_QUESTION, table),
        (paths.RECALL_CURVE, pd.DataFrame({"k": ks, "recall": [summary[f"recall@{k}"] for k in ks]})),
        (paths.RANK_HISTOGRAM, rank_histogram(table["first_relevant_rank"])),
    ):
        with atomic_open(path) as handle:
            frame.to_csv(handle, index=False, lineterminator="\n")
    print(" ".join(f"{name}={value:.4f}" if isinstance(value, float) else f"{name}={value}" for name, value in summary.items()))


if __name__ == "__main__":
    run_stage(main)
