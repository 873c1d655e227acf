"""Stage: embed the golden set's questions with one embedder (`python -m stages.embed_questions
<embedder>`) -> data/embeddings/questions/<embedder>/vectors.npy and ids.json.

Vectors come from the question embedding cache (.dvc/tmp/retrieval-bench/embeddings/questions/<embedder>,
not a DVC output: DVC run-caches this stage) when it holds them, or from the 0.2.0 location
(data/embedding_cache): adding 10 questions embeds 10 texts, and the corpus is never touched. In a
first run embed_corpus has usually embedded them already, its imports paid (embedding.questions):
then no model is imported or loaded here."""

import sys

from retrieval_bench.core import paths
from retrieval_bench.core.files import read_jsonl
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.stage import run_stage, stage_parser
from retrieval_bench.embedding.embed import save_embeddings
from retrieval_bench.embedding.questions import embed_questions
from retrieval_bench.embedding.settings import EmbedSettings


def main(argv: list[str]) -> None:
    parser = stage_parser("embed_questions", __doc__)
    parser.add_argument("embedder", help="an embedder named under embedders in params.yaml")
    embedder = parser.parse_args(argv).embedder
    params = load_all_params()
    settings = EmbedSettings.of_embedder(params, embedder)
    vectors_path, ids_path, _ = paths.question_vectors(embedder)
    golden = read_jsonl(paths.GOLDENSET)
    vectors, stats = embed_questions([row["question"] for row in golden], settings, embedder)
    save_embeddings(vectors, [row["qid"] for row in golden], vectors_path, ids_path)
    print(f"embed_questions with {embedder}: {stats.line('question')}")


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
