"""Stage: embed the chunks -> data/embeddings/corpus.npy and corpus_ids.json (row order).

Vectors come from the corpus embedding cache when it holds them; only new or edited chunks are
embedded, each batch appended to the cache as soon as it is computed."""
import numpy as np
import pandas as pd

from retrieval_bench import paths
from retrieval_bench.io import atomic_open, run_stage, write_json
from retrieval_bench.params import load_params
from retrieval_bench.retrieval.embed import embed_texts


def main() -> None:
    params = load_params("embed")
    chunks = pd.read_parquet(paths.CHUNKS, columns=["chunk_id", "text"])
    vectors, stats = embed_texts(chunks["text"].tolist(), params, params["document_prompt"], paths.CORPUS_EMBEDDING_CACHE, unit="chunk")
    with atomic_open(paths.CORPUS_VECTORS, "wb") as handle:
        np.save(handle, vectors)
    write_json(paths.CORPUS_IDS, chunks["chunk_id"].tolist())
    print(f"embed_corpus: {stats.line('chunk')}")


if __name__ == "__main__":
    run_stage(main)
