"""Every artefact path of the pipeline, spelled once (relative to the project root, where stages
and commands run). dvc.yaml names the same files: tests/project/test_dvc_yaml.py checks they agree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

PARAMS = "params.yaml"
PARAMS_CHECKED = "data/params_checked.txt"
SOURCE_STAMP = "data/source_stamp.json"  # what load_chunks depends on for load.source (corpus.source_stamp)
STORE_STAMP = "data/store_stamp.json"  # what retrieve depends on for the store it searches (corpus.source_stamp)
STORED_VECTORS_STAMP = "data/stored_vectors_stamp.json"  # what embed_corpus depends on for stored vectors
STYLE_EXAMPLES_STAMP = (
    "data/style_examples_stamp.json"  # what generate_goldenset depends on for generate.style_examples
)
IMPORTED_STAMP = "data/imported_stamp.json"  # what generate_goldenset depends on for generate.imported
SOURCE_DIGEST_MEMO = ".dvc/tmp/retrieval-bench-source-digests.json"  # content digests by file times (not tracked)
DVC_LOCK = "dvc.lock"  # what the last `dvc repro` recorded: the question cache version a teammate pushed

# load_chunks: the source's documents, real labels, and its own chunks when it has them (ready
# chunks, BEIR, a store; empty for a folder of documents)
DOCUMENTS = "data/documents.parquet"
LABELS = "data/labels.jsonl"
SOURCE_CHUNKS = "data/source_chunks.parquet"

# chunk@<chunking>: one folder per named chunking (params chunkings)
CHUNKINGS = "data/chunkings"
DEFAULT = "default"  # the chunking, the embedder and the panel system used where none is named


def chunks_of(chunking: str) -> str:
    """The chunk table of a named chunking."""
    return f"{CHUNKINGS}/{chunking}/chunks.parquet"


def duplicates_of(chunking: str) -> str:
    """The chunks of a chunking that repeat another (exact or near), by group."""
    return f"{CHUNKINGS}/{chunking}/duplicates.parquet"


CHUNKS = chunks_of(DEFAULT)
DUPLICATES = duplicates_of(DEFAULT)

# generate_goldenset
QUESTION_PROMPT = "data/question_prompt.txt"
# Each question kind's prompt (generate.kinds; the single question's is QUESTION_PROMPT)
QUESTION_PROMPTS = {
    "single": QUESTION_PROMPT,
    "multi": "data/question_prompt_multi.txt",
    "unanswerable": "data/question_prompt_unanswerable.txt",
    "keyword": "data/question_prompt_keyword.txt",
}
# generate.kind_classifier llm: the prompt that asks a real or hand-written question's kind
KIND_PROMPT = "data/kind_prompt.txt"
# Every prompt generate_goldenset reads: each question kind's (by kind) and the kind classifier's (llm.runs.tasks.KIND_LABEL).
GOLDENSET_PROMPTS = {**QUESTION_PROMPTS, "kind_label": KIND_PROMPT}
QUESTION_CACHE = "data/question_cache.jsonl"
BATCH_JOURNAL = "data/question_cache.batches.jsonl"
GOLDENSET = "data/goldenset.jsonl"
GOLDENSET_REPORT = "metrics/goldenset.json"
GENERATE_REJECTS = "metrics/generate_rejects.jsonl"

# embed_corpus@<chunking>-<embedder> and embed_questions@<embedder>: separate files, one stage each
EMBEDDINGS = "data/embeddings"
# One embedding cache per embed stage: append-only shards of vectors keyed by (model hash, backend,
# precision, max_seq_length, prompt, text), under the DVC project's .dvc/tmp (DVC_ROOT's, for an
# experiment too). Not a DVC output: a persistent output would keep DVC from run-caching the embed
# stages; teammates share their vectors through the stages' outputs and DVC's run-cache (`dvc push
# --run-cache`). A corpus stage also reads its embedder's caches of the other chunkings (a text
# embedded once).
EMBEDDING_CACHE = ".dvc/tmp/retrieval-bench/embeddings"
# Where the caches lived up to 0.2.0 (persistent DVC outputs, and their mirror): the embed stages
# still read them for the vectors the cache lacks and copy those in, so an upgrade embeds nothing again.
LEGACY_EMBEDDING_CACHES = ("data/embedding_cache", ".dvc/tmp/retrieval-bench/data/embedding_cache")


def legacy_caches(cache: str) -> list[str]:
    """Where an embedding cache folder (under EMBEDDING_CACHE) lived up to 0.2.0."""
    return [old + cache.removeprefix(EMBEDDING_CACHE) for old in LEGACY_EMBEDDING_CACHES]


def corpus_vectors(chunking: str, embedder: str) -> tuple[str, str, str]:
    """(vectors .npy, row ids .json, embedding cache folder under the DVC project) of a chunking
    embedded by an embedder."""
    return (
        f"{EMBEDDINGS}/corpus/{chunking}/{embedder}/vectors.npy",
        f"{EMBEDDINGS}/corpus/{chunking}/{embedder}/ids.json",
        f"{EMBEDDING_CACHE}/corpus/{chunking}/{embedder}",
    )


def question_vectors(embedder: str) -> tuple[str, str, str]:
    """(vectors .npy, row ids .json, embedding cache folder under the DVC project) of the golden set's questions."""
    return (
        f"{EMBEDDINGS}/questions/{embedder}/vectors.npy",
        f"{EMBEDDINGS}/questions/{embedder}/ids.json",
        f"{EMBEDDING_CACHE}/questions/{embedder}",
    )


# What a stage did besides its outputs (texts embedded or served from a cache): git-ignored, not a DVC output.
TIMINGS = "data/timings"


def embedding_info(chunking: str, embedder: str) -> str:
    """What embed_corpus@<chunking>-<embedder> did: its chunks and how many it embedded."""
    return f"{TIMINGS}/embed/{chunking}/{embedder}.json"


# Measured by the stages (timings): their figures differ from run to run, as the leaderboard's costs do.
MEASURED_COSTS = "data/costs"


def embed_cost_of(chunking: str, embedder: str) -> str:
    """What embedding a chunking with an embedder costs, measured by its embed stage (embedding.embed_cost)."""
    return f"{MEASURED_COSTS}/embed/{chunking}/{embedder}.json"


CORPUS_VECTORS, CORPUS_IDS, CORPUS_EMBEDDING_CACHE = corpus_vectors(DEFAULT, DEFAULT)
QUESTION_VECTORS, QUESTION_IDS, QUESTION_EMBEDDING_CACHE = question_vectors(DEFAULT)

EXPORTED_QUESTIONS = "data/questions.jsonl"  # retrieval-bench export-questions, for external systems

# judge
JUDGE_PROMPT = "data/judge_prompt.txt"
JUDGEMENTS = (
    "data/judgements.jsonl"  # the judge's replies by (model, prompt, question, chunk text): persistent, append-only
)
JUDGE_BATCH_JOURNAL = (
    "data/judgements.batches.jsonl"  # journal of submitted judging batches (llm.cache.replies.journal_path_for)
)
REVIEWS = "data/reviews"  # people's reviews, one append-only JSONL per reviewer (goldenset.reviews)
JUDGED_POOL = "data/judged_pool.jsonl"  # this run's pooled (question, chunk) pairs and their grades, read by score
JUDGE_REPORT = "metrics/judge.json"

# retrieval-bench gauge
GAUGE = "metrics/gauge.csv"

# retrieve and score: each panel system (params panel; `default` is the one `show`, `compare` and
# judge.pool read when none is named) in a folder of its own, the panel's headline numbers in one
PANEL_RUNS = "data/panel"
PANEL_METRICS = "metrics/panel"
PANEL_HEADLINES = "metrics/headlines"  # the DVC metrics: a file per system, a row of `dvc metrics show` each
PANEL_RUN_KEYS = "data/panel_keys"  # what each system's run was computed from: run_key_of
PANEL_SCORE_KEYS = "metrics/panel_keys"  # and its scores: score_key_of


def run_of(system: str) -> str:
    """A system's run (qid, chunk_id, rank, score; retrieval.depth per question)."""
    return f"{PANEL_RUNS}/{system}/run.parquet"


def run_info_of(system: str) -> str:
    """What a system's method reports beside its run (ANN recall against exact search, its costs)."""
    return f"{PANEL_RUNS}/{system}/run_info.json"


def run_key_of(system: str) -> str:
    """What a system's run was computed from (core.item_memo's key) and its files' digests: a fresh
    clone takes the run from the last one when its own inputs give that key. A folder of its own,
    which no later stage reads: a code edit that changes the key and no run reruns nothing after."""
    return f"{PANEL_RUN_KEYS}/{system}.json"


def run_outputs_of(system: str, trec_export: str | None = None) -> list[str]:
    """What retrieve writes for a system: its run, its run_info and the TREC run file it exports."""
    return [run_of(system), run_info_of(system), *([trec_export] if trec_export else [])]


# Each panel system's settings as it runs them (its keys over the retrieval section), one JSON file
# each, by check_params: retrieve depends on the folder (DVC reruns it when any system's settings
# change) and keys each system's kept outputs on its resolved settings, its file's content
# (core.item_memo), so an edit to the retrieval section recomputes only the systems that inherit it.
PANEL_SETTINGS = "data/panel_settings"
MODEL_STAMPS = "data/model_stamps"  # each embedder's model folder, stamped when it is a local path (check_params)
EXTERNAL_RUNS = "runs"  # run files and Python retrievers from outside (retrieval.run_file, retrieval.python)


def model_stamp_of(embedder: str) -> str:
    """What an embedder's embed stages depend on for its model: a local folder retrained in place."""
    return f"{MODEL_STAMPS}/{embedder}.json"


def settings_of(system: str) -> str:
    """A panel system's resolved retrieval settings, chunking and embedder included."""
    return f"{PANEL_SETTINGS}/{system}.json"


# Cross-encoder scores by (model, question, chunk), append-only, one file per panel system: not a
# DVC output (a persistent output would keep DVC from run-caching retrieve), under the DVC project's
# .dvc/tmp (DVC_ROOT's, for an experiment too), beside the embedding caches.
RERANK_CACHE = ".dvc/tmp/retrieval-bench/rerank"

# This machine's copy of every paid append log (the question cache, the judgements, their batch
# journals), appended beside each record, under the DVC project's .dvc/tmp (DVC_ROOT's, for an
# experiment run in a temporary copy too): a queued or --temp experiment starts from HEAD's
# caches, and `dvc exp apply` or a checkout replaces them, so without it a record another run paid
# for would be paid again (llm.cache.replies.restore_from_mirror).
PAID_MIRROR = ".dvc/tmp/retrieval-bench/paid"

# Each panel system's last outputs of retrieve and score, by the digest of what they were computed
# from (core.item_memo): a system whose inputs did not change is copied back, not computed again.
STAGE_MEMO = ".dvc/tmp/retrieval-bench/memo"


def rerank_cache_of(system: str) -> str:
    """A system's cross-encoder score cache, relative to the DVC project's root."""
    return f"{RERANK_CACHE}/{system}.jsonl"


def metrics_of(system: str) -> str:
    """A system's scores: every metric, both views (stage score)."""
    return f"{PANEL_METRICS}/{system}/metrics.json"


def headline_of(system: str) -> str:
    """A system's few headline numbers, flat: its file in the metrics folder score declares to DVC
    (one row of `dvc metrics show` per system)."""
    return f"{PANEL_HEADLINES}/{system}.json"


def per_question_of(system: str) -> str:
    """A system's per-question results, read by `compare` and the leaderboard."""
    return f"{PANEL_METRICS}/{system}/per_question.csv"


def unknown_system_hint(system: str, project: Path) -> str:
    """For a command's --system: "" where `project` has scores of `system` or none at all, else
    "; no panel system NAME here (systems: ...)", so a mistyped name is not told to rerun DVC."""
    scored = sorted(
        folder.name for folder in (project / PANEL_METRICS).glob("*") if (folder / "metrics.json").is_file()
    )
    if not scored or system in scored:
        return ""
    if system in _panel_names(project / "params.yaml"):
        return f"; panel system {system!r} is in params.yaml but not scored yet: run `dvc repro`"
    return f"; no panel system {system!r} here (systems: {', '.join(scored)})"


def _panel_names(params_path: Path) -> list[str]:
    """The system names params.yaml's panel lists, as written (none where it cannot be read: the
    hint is a courtesy, never a second error)."""
    from retrieval_bench.core.errors import InputError
    from retrieval_bench.core.params_sections import read_yaml_file

    try:
        panel = (read_yaml_file(params_path) or {}).get("panel")
    except (InputError, AttributeError):
        return []
    return [str(name) for name in panel] if isinstance(panel, dict) else []


def score_key_of(system: str) -> str:
    """What a system's scores were computed from and their files' digests, as run_key_of (in git)."""
    return f"{PANEL_SCORE_KEYS}/{system}.json"


def score_outputs_of(system: str) -> list[str]:
    """What score writes for a system: every metric, its headline numbers, its per-question table."""
    return [metrics_of(system), headline_of(system), per_question_of(system)]


# Single-system paths of releases before the panel held every system: `compare`, `show --against`
# and judge.pool's rev: read them at old revisions, and a params.yaml naming one is told where it moved.
LEGACY_RUN = "data/run.parquet"
LEGACY_METRICS = "metrics/metrics.json"
LEGACY_PER_QUESTION = "metrics/per_question.csv"
_REPLACED: dict[Callable[[str], str], str] = {
    run_of: LEGACY_RUN,
    metrics_of: LEGACY_METRICS,
    per_question_of: LEGACY_PER_QUESTION,
}


def at_revision(of: Callable[[str], str], system: str) -> list[str]:
    """Where `of(system)` (run_of, metrics_of or per_question_of) may be found at a git revision, in
    the order to try: the system's own file, then, for the default system, the single-system file
    it replaced (a revision from before the panel)."""
    return [of(system), _REPLACED[of]] if system == DEFAULT else [of(system)]


LEADERBOARD = "metrics/leaderboard.json"
LEADERBOARD_TABLE = "metrics/leaderboard.md"
LEADERBOARD_CSV = "metrics/leaderboard.csv"
CERTIFICATE = "metrics/certificate.json"  # agreement of question sets on the panel, and the style gap
HEADLINE = "metrics/headline.json"  # the panel's, the golden set's and the judge's headline numbers (not a DVC metric)
# Measured on every leaderboard run (outputs like the others, but their figures differ run to run;
# nothing reads them to decide a rerun): each system's costs, the Pareto front and the decision table.
COSTS = "metrics/costs.json"
COSTS_TABLE = "metrics/costs.md"
DECISION = "metrics/decision.md"  # one table per system and the systems to consider; the README's sample table
QUALITY_VS_COST = "metrics/plots/quality_vs_cost.csv"  # mrr with its interval against each cost, per panel system
MEASURED_OUTPUTS = (COSTS, COSTS_TABLE, DECISION, QUALITY_VS_COST)  # the outputs whose figures differ run to run


def is_measured(path: str) -> bool:
    """Whether a DVC output or dependency holds measured figures (MEASURED_OUTPUTS, MEASURED_COSTS)."""
    return path in MEASURED_OUTPUTS or path == MEASURED_COSTS or path.startswith(MEASURED_COSTS + "/")


RECALL_CURVE = "metrics/plots/recall_at_k.csv"  # recall at each score.k, per panel system
RANK_HISTOGRAM = "metrics/plots/first_relevant_rank_histogram.csv"  # questions by first relevant rank, per system
