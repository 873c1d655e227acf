"""Stage: embed the golden set's questions -> data/embeddings/questions.npy and question_ids.json.

Vectors come from the question embedding cache when it holds them: adding 10 questions embeds 10
texts, and the corpus is never touched."""

from retrieval_bench import paths
from retrieval_bench.embedding.embed import embed_texts, save_embeddings
from retrieval_bench.io import read_jsonl, run_stage
from retrieval_bench.params import load_params


def main() -> None:
    params = load_params("embed")
    golden = read_jsonl(paths.GOLDENSET)
    texts = [row["question"] for row in golden]
    vectors, stats = embed_texts(texts, params, params["query_prompt"], paths.QUESTION_EMBEDDING_CACHE, unit="question")
    save_embeddings(vectors, [row["qid"] for row in golden], paths.QUESTION_VECTORS, paths.QUESTION_IDS)
    print(f"embed_questions: {stats.line('question')}")


if __name__ == "__main__":
    run_stage(main)
