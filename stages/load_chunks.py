"""Stage 1: read the corpus named by load.source (a documents folder, ready chunks, a BEIR folder
or a vector store) -> its documents, any real labels, and its own chunks when it has them (ready
chunks, BEIR, a store; none for a folder of documents). Stage chunk@NAME cuts each chunking."""

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_path, write_jsonl
from retrieval_bench.core.params import load_params
from retrieval_bench.core.stage import run_stage
from retrieval_bench.core.store_address import is_store_address
from retrieval_bench.corpus.load import CHUNK_COLUMNS, LoadSettings, load_corpus
from retrieval_bench.corpus.store_source import load_store_corpus


def main() -> None:
    params = load_params("load")
    corpus = (
        load_store_corpus(params["source"])
        if is_store_address(params["source"])
        else load_corpus(params["source"], LoadSettings.from_params(params))
    )
    given = corpus.chunks if corpus.given else pd.DataFrame(columns=CHUNK_COLUMNS)
    for path, frame in ((paths.DOCUMENTS, corpus.documents), (paths.SOURCE_CHUNKS, given)):
        with atomic_path(path) as tmp:
            frame.to_parquet(tmp, index=False)
    write_jsonl(paths.LABELS, corpus.labels)
    own = f", {len(given)} chunks of its own" if corpus.given else ""
    print(f"load_chunks: {len(corpus.documents)} documents{own} from {params['source']}")
    if corpus.labels:
        print(f"load_chunks: {len(corpus.labels)} real queries with relevance labels")
    for note in corpus.notes:
        print(f"load_chunks: {note}")


if __name__ == "__main__":
    run_stage(main)
