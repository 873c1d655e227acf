"""Stage 1: read the corpus named by load.source (a documents folder, ready chunks, a BEIR folder
or a vector store) -> documents, chunks, any real labels, and the chunks that duplicate each other
(exactly or nearly)."""

from retrieval_bench import paths
from retrieval_bench.corpus.duplicates import describe, find_duplicates
from retrieval_bench.corpus.load import load_corpus
from retrieval_bench.corpus.store_source import load_store_corpus
from retrieval_bench.io import atomic_path, run_stage, write_jsonl
from retrieval_bench.params import load_params
from retrieval_bench.store_address import is_store_address


def main() -> None:
    params = load_params("load")
    corpus = (
        load_store_corpus(params["source"])
        if is_store_address(params["source"])
        else load_corpus(
            params["source"],
            id_field=params["id_field"],
            text_field=params["text_field"],
            chunk_chars=params["chunking"]["chars"],
            chunk_overlap=params["chunking"]["overlap"],
            split=params["split"],
            missing_relevant=params["missing_relevant"],
        )
    )
    for path, frame in ((paths.DOCUMENTS, corpus.documents), (paths.CHUNKS, corpus.chunks)):
        with atomic_path(path) as tmp:
            frame.to_parquet(tmp, index=False)
    duplicates = find_duplicates(corpus.chunks, params["duplicates"]["near"], params["duplicates"]["min_jaccard"])
    with atomic_path(paths.DUPLICATES) as tmp:
        duplicates.to_parquet(tmp, index=False)
    write_jsonl(paths.LABELS, corpus.labels)
    print(f"load_chunks: {len(corpus.documents)} documents -> {len(corpus.chunks)} chunks from {params['source']}")
    if corpus.labels:
        print(f"load_chunks: {len(corpus.labels)} real queries with relevance labels")
    for note in corpus.notes:
        print(f"load_chunks: {note}")
    print(f"load_chunks: {describe(duplicates)} (listed in {paths.DUPLICATES})")


if __name__ == "__main__":
    run_stage(main)
