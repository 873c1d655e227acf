"""Stage 3: embed chunks and questions -> data/embeddings/{corpus,questions}.npy and their ids."""
import numpy as np
import pandas as pd

from retrieval_bench import paths
from retrieval_bench.io import atomic_open, read_jsonl, run_stage, write_json
from retrieval_bench.params import load_params
from retrieval_bench.retrieval.embed import encode, load_model


def main() -> None:
    params = load_params("embed")
    chunks = pd.read_parquet(paths.CHUNKS, columns=["chunk_id", "text"])
    golden = read_jsonl(paths.GOLDENSET)
    model = load_model(params["model"], params["max_seq_length"])
    print(f"embed: {len(chunks)} chunks and {len(golden)} questions with {params['model']} (max_seq_length {model.max_seq_length})")
    outputs = (
        (paths.CORPUS_VECTORS, encode(model, chunks["text"].tolist(), params["batch_size"], params["document_prompt"])),
        (paths.QUESTION_VECTORS, encode(model, [row["question"] for row in golden], params["batch_size"], params["query_prompt"])),
    )
    for path, array in outputs:
        with atomic_open(path, "wb") as handle:
            np.save(handle, array)
    write_json(paths.CORPUS_IDS, chunks["chunk_id"].tolist())
    write_json(paths.QUESTION_IDS, [row["qid"] for row in golden])


if __name__ == "__main__":
    run_stage(main)
