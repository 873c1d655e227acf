"""Stage 1: read the corpus named by load.source -> documents, chunks and any real labels."""
from retrieval_bench.io import atomic_path, run_stage, write_jsonl
from retrieval_bench.corpus.load import load_corpus
from retrieval_bench.params import load_params

DOCUMENTS = "data/documents.parquet"
CHUNKS = "data/chunks.parquet"
LABELS = "data/labels.jsonl"


def main() -> None:
    params = load_params("load")
    corpus = load_corpus(
        params["source"],
        id_field=params["id_field"],
        text_field=params["text_field"],
        chunk_size=params["chunking"]["chars"],
        chunk_overlap=params["chunking"]["overlap"],
        split=params["split"],
        missing_relevant=params["missing_relevant"],
    )
    for path, frame in ((DOCUMENTS, corpus.documents), (CHUNKS, corpus.chunks)):
        with atomic_path(path) as tmp:
            frame.to_parquet(tmp, index=False)
    write_jsonl(LABELS, corpus.labels)
    print(f"load_chunks: {len(corpus.documents)} documents -> {len(corpus.chunks)} chunks from {params['source']}")
    if corpus.labels:
        print(f"load_chunks: {len(corpus.labels)} real queries with relevance labels")
    for note in corpus.notes:
        print(f"load_chunks: {note}")


if __name__ == "__main__":
    run_stage(main)
