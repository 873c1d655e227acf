"""The golden set's questions embedded with one embedder into its question cache: what the
embed_questions stage does, and what embed_corpus does ahead of it (embed_questions_ahead).

Why ahead: in a first run every embedder's corpus and questions are embedded in two processes,
each importing torch and sentence-transformers and loading the model (about 8 CPU-s, as much as
embedding 300 questions many times over). When embed_corpus has just embedded chunks locally,
those imports are paid, so it embeds the golden set's questions too, into the cache embed_questions
reads (same settings, prompt and keys): embed_questions then finds every vector cached and loads
no model. The golden set is not a dependency of embed_corpus: this only fills a cache. A question
edit still reruns embed_questions alone, and a stale golden set costs only its questions' vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import read_jsonl
from retrieval_bench.embedding.embed import EmbedProgress, EmbedStats, embed_texts
from retrieval_bench.embedding.settings import EmbedSettings


def embed_questions(
    questions: list[str], settings: EmbedSettings, embedder: str, progress: EmbedProgress = EmbedProgress("question")
) -> tuple[np.ndarray, EmbedStats]:
    """The questions' vectors (embed_texts with the embedder's query prompt and question cache)."""
    _, _, cache = paths.question_vectors(embedder)
    return embed_texts(
        questions, settings, settings.query_prompt, cache, shared_caches=paths.legacy_caches(cache), progress=progress
    )


def embed_questions_ahead(embedder: str, settings: EmbedSettings, golden_path: str | Path) -> EmbedStats | None:
    """The golden set's questions at `golden_path` embedded into the embedder's question cache, as
    embed_questions will ask for them; None when there is no golden set to read (not made yet, or
    unreadable: embed_questions, which depends on it, reports that) or the local engine is not the
    one in use (Ray embeds elsewhere: no imports to share)."""
    if settings.engine != "local" or not Path(golden_path).is_file():
        return None
    try:
        questions = [str(row["question"]) for row in read_jsonl(golden_path)]
    except (InputError, KeyError, TypeError):
        return None
    return embed_questions(questions, settings, embedder)[1]
