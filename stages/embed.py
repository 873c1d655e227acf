"""Stage 3: embed chunks and questions -> data/embeddings/{corpus,questions}.npy and their ids."""
import numpy as np
import pandas as pd

from retrieval_bench.retrieval.embed import encode, load_model
from retrieval_bench.io import atomic_open, read_jsonl, run_stage, write_json
from retrieval_bench.params import load_params

CHUNKS = "data/chunks.parquet"
GOLDENSET = "data/goldenset.jsonl"
OUT = "data/embeddings"


def main() -> None:
    params = load_params("embed")
    chunks = pd.read_parquet(CHUNKS, columns=["chunk_id", "text"])
    golden = read_jsonl(GOLDENSET)
    model = load_model(params["model"], params["max_seq_length"])
    print(f"embed: {len(chunks)} chunks and {len(golden)} questions with {params['model']} (max_seq_length {model.max_seq_length})")
    vectors = {
        "corpus": encode(model, chunks["text"].tolist(), params["batch_size"], params["document_prompt"]),
        "questions": encode(model, [row["question"] for row in golden], params["batch_size"], params["query_prompt"]),
    }
    for name, array in vectors.items():
        with atomic_open(f"{OUT}/{name}.npy", "wb") as handle:
            np.save(handle, array)
    write_json(f"{OUT}/corpus_ids.json", chunks["chunk_id"].tolist())
    write_json(f"{OUT}/question_ids.json", [row["qid"] for row in golden])


if __name__ == "__main__":
    run_stage(main)
