"""Rerank: a sentence-transformers CrossEncoder rescoring the `retrieval.rerank.candidates` best
chunks of a first-stage method (`retrieval.rerank.first_stage`: dense, bm25 or hybrid). The run is
the candidates in the cross-encoder's order (its raw logits are the scores), cut to the depth;
chunks beyond the candidates are not retrieved.

Scores are cached in .dvc/tmp/retrieval-bench/rerank/<system>.jsonl under the DVC project (not a
DVC output, so that DVC run-caches retrieve; score_cache), one line per pair: {"key": sha256 of (model identity, question text, chunk text), "score": logit}.
The model identity is its fingerprint (model_source.model_fingerprint: the files that decide its
outputs, weights, config and tokenizer, by name and sha256), so a retrained model never reuses
another's scores, while changing the first stage, the candidates or the depth re-scores only
pairs never seen. Appends are whole lines, flushed and fsynced per batch; a torn last line (a
crash mid-write) is ignored on reading and cut off before the next append.

The model is found like the embedding model (model_source.resolve_model): a local path, the
Hugging Face cache, then the hub (never with HF_HUB_OFFLINE set).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.run_table import from_records
from retrieval_bench.embedding import model_source
from retrieval_bench.retrieval import bm25, dense, hybrid
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings

FIRST_STAGES = {"dense": dense.retrieve, "bm25": bm25.retrieve, "hybrid": hybrid.retrieve}


def resolve_model(model: str, what: str = "retrieval.rerank.model") -> str:
    """Where to load the cross-encoder from; anything unavailable is a one-line InputError (an
    unset model is refused earlier, by params.py, naming params_sections.RERANK_DEFAULT_MODEL)."""
    return model_source.resolve_model(model, what=what, bundled=False)


def score_cache(system: str) -> Path:
    """Where panel system `system` caches its scores: under the DVC project (DVC_ROOT: the project
    for an experiment run in a temporary copy too), else under the working directory."""
    return Path(os.environ.get("DVC_ROOT", ".")) / paths.rerank_cache_of(system)


def pair_key(identity: str, question: str, chunk: str) -> str:
    return hashlib.sha256(json.dumps([identity, question, chunk], ensure_ascii=False).encode("utf-8")).hexdigest()


class ScoreCache:
    """The append-only score cache: {key: score}, with durable whole-line appends."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.scores: dict[str, float] = {}
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                self.scores[record["key"]] = float(record["score"])
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
                if number == len(lines):  # torn by a crash mid-write: no newline after it
                    continue
                raise InputError(
                    f"{self.path}:{number}: not a rerank cache record (delete the file to rebuild the cache)"
                ) from None
        if data and not data.endswith(b"\n"):  # cut the torn line, so the next append starts a clean one
            with open(self.path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)

    def append(self, scores: dict[str, float]) -> None:
        """Add records as whole lines, flushed and fsynced."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as handle:
            handle.write(
                "".join(json.dumps({"key": key, "score": score}) + "\n" for key, score in scores.items()).encode()
            )
            handle.flush()
            os.fsync(handle.fileno())
        self.scores.update(scores)


def check_cross_encoder(folder: str, what: str = "retrieval.rerank.model") -> None:
    """That `folder` holds a cross-encoder of one output (its config.json), else one line naming
    `what`: an embedding model (a bi-encoder) loads as one with a random new head, its scores
    random and, once cached, kept; a head of several outputs failed on the first batch. Checked on
    every run, cached scores or not."""
    from transformers import AutoConfig

    with model_source.loading(what, folder, "cross-encoder"):
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
    if not any(name.endswith("ForSequenceClassification") for name in config.architectures or []):
        raise InputError(
            f"{what} {folder!r}: not a cross-encoder (its config.json names {', '.join(config.architectures or ['no'])} "
            "architecture, no sequence-classification head: an embedding model?); name a cross-encoder such as "
            "cross-encoder/ms-marco-MiniLM-L6-v2"
        )
    if config.num_labels != 1:
        raise InputError(
            f"{what} {folder!r}: a cross-encoder of {config.num_labels} outputs (num_labels); reranking needs one "
            "relevance score per pair"
        )


def load_cross_encoder(folder: str, what: str = "retrieval.rerank.model"):
    """The cross-encoder in `folder` (retrieve has run check_cross_encoder on it); one that will
    not load is one line naming `what`, its key."""
    import torch
    from sentence_transformers import CrossEncoder

    with model_source.loading(what, folder, "cross-encoder"):
        # Raw logits: a sigmoid would squash high scores into ties at float precision.
        return CrossEncoder(folder, local_files_only=True, activation_fn=torch.nn.Identity())


def retrieve(
    questions: Questions, corpus: Corpus, settings: RetrievalSettings, depth: int, progress=None
) -> pd.DataFrame:
    """The first stage's candidates rescored by the cross-encoder. Scores are cached in the calling
    system's own cache, settings.rerank.cache (the default system's when None: score_cache)."""
    options = settings.rerank
    assert options.model is not None, "params validation refuses method rerank without rerank.model"
    folder = resolve_model(options.model, f"{settings.where}.rerank.model")
    check_cross_encoder(folder, f"{settings.where}.rerank.model")  # before the first stage, cached scores or not
    identity = model_source.model_fingerprint(folder)  # the model in every score key
    candidates = min(options.candidates, len(corpus.chunk_ids))
    first = FIRST_STAGES[options.first_stage](questions, corpus, settings, candidates)
    question_text = dict(zip(questions.qids, questions.texts, strict=True))
    chunk_text = dict(zip(corpus.chunk_ids, corpus.texts, strict=True))
    pairs = [
        (question_text[qid], chunk_text[chunk_id])
        for qid, chunk_id in zip(first["qid"], first["chunk_id"], strict=True)
    ]
    keys = [pair_key(identity, question, chunk) for question, chunk in pairs]
    cache_path = options.cache or score_cache(paths.DEFAULT)
    cache = ScoreCache(cache_path)
    todo = {
        key: pair for key, pair in zip(keys, pairs, strict=True) if key not in cache.scores
    }  # each distinct pair once
    if todo:
        score_pairs(
            todo,
            cache,
            load_cross_encoder(folder, f"{settings.where}.rerank.model"),
            options.batch_size,
            len(questions.qids),
            progress,
        )
    elif progress is not None:
        progress.update(len(questions.qids))
    print(
        f"rerank: {len(keys)} pairs, {len(todo)} scored by the cross-encoder (the others from {cache_path}, or repeats)",
        file=sys.stderr,
    )
    return from_records(zip(first["qid"], first["chunk_id"], (cache.scores[key] for key in keys), strict=True), depth)


def score_pairs(
    todo: dict[str, tuple[str, str]], cache: ScoreCache, model, batch_size: int, n_questions: int, progress=None
) -> None:
    """Score the pairs in batches of similar length (less padding), caching each batch."""
    items = sorted(todo.items(), key=lambda item: len(item[1][0]) + len(item[1][1]))
    reported = 0
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        scores = model.predict([pair for _, pair in batch], batch_size=batch_size, show_progress_bar=False)
        cache.append({key: float(score) for (key, _), score in zip(batch, scores, strict=True)})
        if progress is not None:  # in questions, as the stage's bar counts them
            done = n_questions * (start + len(batch)) // len(items)
            progress.update(done - reported)
            reported = done
