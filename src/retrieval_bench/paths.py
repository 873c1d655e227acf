"""Every artefact path of the pipeline, spelled once (relative to the project root, where stages
and commands run). dvc.yaml names the same files: tests/test_dvc_yaml.py checks they agree."""

from __future__ import annotations

PARAMS = "params.yaml"
PARAMS_CHECKED = "data/params_checked.txt"
SOURCE_STAMP = "data/source_stamp.json"  # what load_chunks depends on for load.source (corpus.source_stamp)
STORE_STAMP = "data/store_stamp.json"  # what retrieve depends on for the store it searches (corpus.source_stamp)
STORED_VECTORS_STAMP = "data/stored_vectors_stamp.json"  # what embed_corpus depends on for stored vectors
STYLE_EXAMPLES_STAMP = (
    "data/style_examples_stamp.json"  # what generate_goldenset depends on for generate.style_examples
)
SOURCE_DIGEST_MEMO = ".dvc/tmp/retrieval-bench-source-digests.json"  # content digests by file times (not tracked)
DVC_LOCK = "dvc.lock"  # what the last `dvc repro` recorded: the question cache version a teammate pushed

# load_chunks
DOCUMENTS = "data/documents.parquet"
CHUNKS = "data/chunks.parquet"
LABELS = "data/labels.jsonl"
DUPLICATES = "data/duplicates.parquet"  # chunks that repeat another (exact or near), by group

# generate_goldenset
QUESTION_PROMPT = "data/question_prompt.txt"
QUESTION_CACHE = "data/question_cache.jsonl"
BATCH_JOURNAL = "data/question_cache.batches.jsonl"
GOLDENSET = "data/goldenset.jsonl"
GOLDENSET_REPORT = "metrics/goldenset.json"
GENERATE_REJECTS = "metrics/generate_rejects.jsonl"

# embed_corpus (corpus.*) and embed_questions (question*): separate files, one stage each
EMBEDDINGS = "data/embeddings"
CORPUS_VECTORS = f"{EMBEDDINGS}/corpus.npy"
CORPUS_IDS = f"{EMBEDDINGS}/corpus_ids.json"
QUESTION_VECTORS = f"{EMBEDDINGS}/questions.npy"
QUESTION_IDS = f"{EMBEDDINGS}/question_ids.json"
# One embedding cache per embed stage (DVC lets one stage own an output): persistent, append-only
# shards of vectors keyed by (model hash, backend, precision, max_seq_length, prompt, text).
EMBEDDING_CACHE = "data/embedding_cache"
CORPUS_EMBEDDING_CACHE = f"{EMBEDDING_CACHE}/corpus"
QUESTION_EMBEDDING_CACHE = f"{EMBEDDING_CACHE}/questions"

# retrieve
RUN = "data/run.parquet"
RUN_INFO = "data/run_info.json"  # what the method reports beside its run (ANN recall against exact search)
RERANK_CACHE = "data/rerank_cache.jsonl"  # cross-encoder scores by (model, question, chunk): persistent, append-only
EXPORTED_QUESTIONS = "data/questions.jsonl"  # retrieval-bench export-questions, for external systems

# judge
JUDGE_PROMPT = "data/judge_prompt.txt"
JUDGEMENTS = (
    "data/judgements.jsonl"  # the judge's replies by (model, prompt, question, chunk text): persistent, append-only
)
JUDGE_BATCH_JOURNAL = (
    "data/judgements.batches.jsonl"  # journal of submitted judging batches (llm.cache.journal_path_for)
)
JUDGED_POOL = "data/judged_pool.jsonl"  # this run's pooled (question, chunk) pairs and their grades, read by score
JUDGE_REPORT = "metrics/judge.json"

# score
METRICS = "metrics/metrics.json"
PER_QUESTION = "metrics/per_question.csv"
RECALL_CURVE = "metrics/plots/recall_at_k.csv"
RANK_HISTOGRAM = "metrics/plots/first_relevant_rank_histogram.csv"

# retrieval-bench gauge
GAUGE = "metrics/gauge.csv"

# panel (params panel: several retrieval systems, one folder each) and its leaderboard
PANEL_RUNS = "data/panel"  # <system>/run.parquet, <system>/run_info.json (stage retrieve_panel@<system>)
PANEL_METRICS = "metrics/panel"  # <system>/metrics.json, <system>/per_question.csv (stage score_panel@<system>)
PANEL_SYSTEMS = f"{PANEL_METRICS}/systems.json"  # the panel's names, by check_params: the folder exists without a panel
LEADERBOARD = "metrics/leaderboard.json"
LEADERBOARD_TABLE = "metrics/leaderboard.md"
LEADERBOARD_CSV = "metrics/leaderboard.csv"
CERTIFICATE = "metrics/certificate.json"  # agreement of question sets on the panel, and the style gap


def panel_file(folder: str, system: str, name: str) -> str:
    """A panel system's artefact, e.g. panel_file(PANEL_RUNS, "bm25", "run.parquet")."""
    return f"{folder}/{system}/{name}"
