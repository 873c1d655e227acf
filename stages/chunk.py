"""Stage 1b for one chunking (`python -m stages.chunk <chunking>`): params chunkings.<chunking>
over load.chunking -> data/chunkings/<chunking>/chunks.parquet, and the chunks that duplicate each
other (exactly or nearly). The `default` chunking of a source with chunks of its own (ready
chunks, BEIR, a store) is those chunks; every other chunking cuts the documents."""

import sys

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_path, read_table
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.params_panel import named
from retrieval_bench.core.stage import progress, run_stage, stage_parser
from retrieval_bench.corpus.chunk import takes_source_chunks
from retrieval_bench.corpus.duplicates import describe, find_duplicates
from retrieval_bench.corpus.load import chunk_documents


def main(argv: list[str]) -> None:
    parser = stage_parser("chunk", __doc__)
    parser.add_argument("chunking", help="a chunking named under chunkings in params.yaml")
    name = parser.parse_args(argv).chunking
    params = load_all_params()
    chunking = named(params, "chunkings", name)
    given = read_table(paths.SOURCE_CHUNKS)
    with progress(2, f"chunk {name}: chunks, duplicates", "step", delay=1.0) as steps:  # seconds for a 30 MB document
        if takes_source_chunks(name, len(given)):
            chunks, how = given, "the source's own chunks"
        else:
            documents = read_table(paths.DOCUMENTS, ["doc_id", "text"])
            chunks = chunk_documents(documents, chunking["chars"], chunking["overlap"])
            how = f"{chunking['chars']} characters, {chunking['overlap']} overlap"
        steps.update()
        duplicates = find_duplicates(
            chunks, params["load"]["duplicates"]["near"], params["load"]["duplicates"]["min_jaccard"]
        )
    for path, frame in ((paths.chunks_of(name), chunks), (paths.duplicates_of(name), duplicates)):
        with atomic_path(path) as tmp:
            pd.DataFrame(frame).to_parquet(tmp, index=False)
    print(f"chunk {name}: {len(chunks)} chunks ({how}); {describe(duplicates)}")


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
