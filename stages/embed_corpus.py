"""Stage: embed one chunking's chunks with one embedder (`python -m stages.embed_corpus <chunking>
<embedder>`) -> data/embeddings/corpus/<chunking>/<embedder>/vectors.npy and ids.json (row order);
data/costs/embed/<chunking>/<embedder>.json, the embedding's cost (embedding.embed_cost); not DVC
outputs: data/timings/embed/<chunking>/<embedder>.json, and the questions ahead (embedding.questions).

Vectors come from the embedding cache (.dvc/tmp/retrieval-bench/embeddings/corpus/<chunking>/<embedder>,
not a DVC output: DVC run-caches this stage), the embedder's caches of the other chunkings, or the
0.2.0 location (data/embedding_cache); only new or edited chunks are embedded, each batch appended
to the cache as soon as it is computed. With `embed.corpus_vectors: stored` (params_panel.reads_stored_vectors)
the vectors are read from the store at load.source, once a sample embedded again shows embed.model made them."""

import sys

from retrieval_bench.core import paths
from retrieval_bench.core.files import read_table, write_json
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.params_panel import named, reads_stored_vectors
from retrieval_bench.core.stage import run_stage, stage_parser
from retrieval_bench.embedding.embed import EmbedProgress, embed_texts, loading_once, save_embeddings
from retrieval_bench.embedding.embed_cost import CostSettings, embedding_cost
from retrieval_bench.embedding.questions import embed_questions_ahead
from retrieval_bench.embedding.settings import EmbedSettings
from retrieval_bench.embedding.stored_vectors import stored_corpus_vectors


@loading_once()  # the chunks, the questions ahead and the cost sample: one model load
def main(argv: list[str]) -> None:
    parser = stage_parser("embed_corpus", __doc__)
    parser.add_argument("chunking", help="a chunking named under chunkings in params.yaml")
    parser.add_argument("embedder", help="an embedder named under embedders in params.yaml")
    arguments = parser.parse_args(argv)
    everything = load_all_params()
    named(everything, "chunkings", arguments.chunking)
    settings = EmbedSettings.of_embedder(everything, arguments.embedder)
    said = f"embed_corpus {arguments.chunking} with {arguments.embedder}"  # every line's prefix
    vectors_path, ids_path, cache = paths.corpus_vectors(arguments.chunking, arguments.embedder)
    chunks = read_table(paths.chunks_of(arguments.chunking), ["chunk_id", "text"])
    info, cost = {"chunks": len(chunks), "embedded": None}, {}  # vectors read from a store: nothing embedded here
    if reads_stored_vectors(everything, arguments.chunking, arguments.embedder):
        vectors, line = stored_corpus_vectors(everything["load"]["source"], chunks, settings, cache)
    else:
        pairs = [pair for pair in everything["embedded"].values() if pair["embedder"] == arguments.embedder]
        others = {paths.corpus_vectors(pair["chunking"], arguments.embedder)[2] for pair in pairs} - {cache}
        texts, shared = chunks["text"].tolist(), sorted(others) + paths.legacy_caches(cache)
        vectors, stats = embed_texts(
            texts, settings, settings.document_prompt, cache, shared_caches=shared, progress=EmbedProgress("chunk")
        )
        line, info["embedded"] = stats.line("chunk"), stats.embedded
        costs = CostSettings.from_params(everything["costs"])
        cost = embedding_cost(stats.batch_times, texts, settings, costs, log=lambda line: print(f"{said}: {line}"))
    save_embeddings(vectors, chunks["chunk_id"].tolist(), vectors_path, ids_path)
    write_json(paths.embed_cost_of(arguments.chunking, arguments.embedder), cost)
    write_json(paths.embedding_info(arguments.chunking, arguments.embedder), info)
    print(f"{said}: {line}")
    if info["embedded"]:  # torch is imported: the golden set's questions cost little more here than apart
        embed_questions_ahead(arguments.embedder, settings, paths.GOLDENSET)


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
