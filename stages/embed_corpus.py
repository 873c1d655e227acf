"""Stage: embed the chunks -> data/embeddings/corpus.npy and corpus_ids.json (row order).

Vectors come from the corpus embedding cache when it holds them; only new or edited chunks are
embedded, each batch appended to the cache as soon as it is computed. With
`embed.corpus_vectors: stored` they are read from the vector store at load.source instead, after a
sample of chunks embedded again shows that embed.model made them."""

from retrieval_bench import paths
from retrieval_bench.embedding.embed import embed_texts, save_embeddings
from retrieval_bench.embedding.stored_vectors import stored_corpus_vectors
from retrieval_bench.io import read_table, run_stage
from retrieval_bench.params import load_all_params


def main() -> None:
    everything = load_all_params()
    params = everything["embed"]
    chunks = read_table(paths.CHUNKS, ["chunk_id", "text"])
    if params["corpus_vectors"] == "stored":
        vectors, line = stored_corpus_vectors(
            everything["load"]["source"], chunks, params, paths.CORPUS_EMBEDDING_CACHE
        )
    else:
        vectors, stats = embed_texts(
            chunks["text"].tolist(), params, params["document_prompt"], paths.CORPUS_EMBEDDING_CACHE, unit="chunk"
        )
        line = stats.line("chunk")
    save_embeddings(vectors, chunks["chunk_id"].tolist(), paths.CORPUS_VECTORS, paths.CORPUS_IDS)
    print(f"embed_corpus: {line}")


if __name__ == "__main__":
    run_stage(main)
