"""The golden set's questions embedded with one embedder into its question cache: what the
embed_questions stage does, and what embed_corpus does ahead of it (embed_questions_ahead).

Why ahead: in a first run every embedder's corpus and questions were embedded in two processes,
each importing torch and sentence-transformers (about 7.7 CPU-s) and loading the model. When
embed_corpus has just embedded chunks locally, those imports are paid, so it embeds the golden
set's questions too, with the encoder it loaded (embed.loading_once), into the cache
embed_questions reads (same settings, prompt and keys): embed_questions then finds every vector
cached and imports neither.
The golden set is not a dependency of embed_corpus: this only fills a cache, after the stage's
outputs are written, and a failure here is one line, not a failed stage. A question edit still
reruns embed_questions alone; a stale golden set costs only its questions' vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import read_jsonl
from retrieval_bench.core.logs import Log
from retrieval_bench.embedding.embed import EmbedProgress, EmbedStats, embed_texts
from retrieval_bench.embedding.settings import EmbedSettings


def embed_questions(questions: list[str], settings: EmbedSettings, embedder: str) -> tuple[np.ndarray, EmbedStats]:
    """The questions' vectors (embed_texts with the embedder's query prompt and question cache)."""
    _, _, cache = paths.question_vectors(embedder)
    shared, progress = paths.legacy_caches(cache), EmbedProgress("question")
    return embed_texts(questions, settings, settings.query_prompt, cache, shared_caches=shared, progress=progress)


def embed_questions_ahead(
    embedder: str, settings: EmbedSettings, golden_path: str | Path, log: Log = print
) -> EmbedStats | None:
    """The golden set's questions at `golden_path` embedded into the embedder's question cache, as
    embed_questions will ask for them, said in one line; None when there is no golden set to read
    (not made yet, or unreadable: embed_questions, which depends on it, reports that), the local
    engine is not the one in use (Ray embeds elsewhere: no imports to share), or embedding them
    failed (one line: embed_questions will embed them, or say why not)."""
    if settings.engine != "local" or not Path(golden_path).is_file():
        return None
    try:
        questions = [str(row["question"]) for row in read_jsonl(golden_path)]
    except (InputError, KeyError, TypeError):
        return None
    try:
        stats = embed_questions(questions, settings, embedder)[1]
    except InputError as error:
        log(f"the golden set's questions were not embedded ahead of embed_questions: {error}")
        return None
    log(f"embed_corpus: ahead of embed_questions@{embedder}, {stats.line('question')}")
    return stats
