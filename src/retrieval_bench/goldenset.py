"""Assemble the golden set: questions anchored to evidence spans in documents, or real labels.

A synthetic question is anchored to the evidence it was written from (a span of its document),
not to a chunk, so the same golden set scores any chunking of the corpus.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_bench.io import InputError, read_jsonl
from retrieval_bench.relevance import coverage


def locate_evidence(document: str, excerpt: str, near: int = 0) -> tuple[int, int] | None:
    """The span of `excerpt` in `document`: exact match first (the one nearest `near`), then a
    match that ignores case and differences in whitespace; None if neither is found."""
    excerpt = excerpt.strip()
    if not excerpt:
        return None
    exact = [m.start() for m in re.finditer(re.escape(excerpt), document)]
    if exact:
        start = min(exact, key=lambda s: abs(s - near))
        return start, start + len(excerpt)
    pattern = r"\s+".join(re.escape(word) for word in excerpt.split())
    loose = list(re.finditer(pattern, document, flags=re.IGNORECASE))
    if loose:
        match = min(loose, key=lambda m: abs(m.start() - near))
        return match.start(), match.end()
    return None


def question_id(doc_id: str, question: str) -> str:
    return "q" + hashlib.sha256(f"{doc_id}\0{question}".encode("utf-8")).hexdigest()[:12]


def best_passage(passages: pd.DataFrame, doc_id: str, start: int, end: int) -> pd.Series | None:
    """The passage of `doc_id` that overlaps [start, end) the most."""
    same_doc = passages[passages["doc_id"] == doc_id]
    if same_doc.empty:
        return None
    share = coverage(same_doc["start"].to_numpy(), same_doc["end"].to_numpy(), start, end)
    return same_doc.iloc[int(np.argmax(share))]


def read_handwritten(path: str | Path) -> list[dict]:
    """Hand-written questions (question, doc_id, evidence); a missing file holds none."""
    path = Path(path)
    records = read_jsonl(path) if path.exists() else []
    for number, record in enumerate(records, 1):
        missing = {"question", "doc_id", "evidence"} - set(record)
        if missing:
            raise InputError(f"{path}: record {number} lacks {', '.join(sorted(missing))}")
    return records


def normalise_question(question: str) -> str:
    """The form two questions are compared in to find duplicates: case, spacing, end punctuation."""
    return " ".join(re.sub(r"[\s?.!]+$", "", question.lower()).split())


def handwritten_rows(records: list[dict], documents: pd.DataFrame, passages: pd.DataFrame) -> tuple[list[dict], dict[str, int]]:
    """Golden rows for hand-written questions (question, doc_id, evidence) found in this corpus."""
    texts = dict(zip(documents["doc_id"], documents["text"]))
    counts = {"other_corpus": 0, "not_located": 0}
    rows = []
    for record in records:
        text = texts.get(record["doc_id"])
        if text is None:
            counts["other_corpus"] += 1
            continue
        span = locate_evidence(text, record["evidence"])
        if span is None:
            counts["not_located"] += 1
            continue
        passage = best_passage(passages, record["doc_id"], *span)
        rows.append(_row(record["question"], passage, span, "hand-written", None, True))
    return rows, counts


def generated_row(record: dict, passage: Mapping, document: str) -> dict:
    """A golden row for a cached generated question over `passage`; the evidence excerpt is looked
    for in the passage first, then the whole document, else the whole passage is the evidence."""
    passage_text = document[passage["start"]:passage["end"]]
    span = locate_evidence(passage_text, record.get("evidence") or "")
    if span is not None:
        span = (span[0] + int(passage["start"]), span[1] + int(passage["start"]))
    else:
        span = locate_evidence(document, record.get("evidence") or "", near=int(passage["start"]))
    located = span is not None
    if span is None:
        span = (int(passage["start"]), int(passage["end"]))
    return _row(record["question"], passage, span, record["model"], record["prompt_sha256"], located)


def _row(question: str, passage: Mapping, span: tuple[int, int], source: str, prompt_sha256: str | None, located: bool) -> dict:
    return {
        "qid": question_id(passage["doc_id"], question),
        "question": question,
        "gold_chunk_id": passage["chunk_id"],
        "doc_id": passage["doc_id"],
        "start": int(span[0]),
        "end": int(span[1]),
        "chunk_sha256": passage["text_sha256"],
        "source": source,
        "prompt_sha256": prompt_sha256,
        "evidence_located": located,
    }


def label_rows(labels: list[dict]) -> list[dict]:
    """Golden rows for real labels: several relevant chunks per question, graded."""
    rows = []
    for label in labels:
        graded = sorted(label["relevant"].items(), key=lambda item: -item[1])
        rows.append(
            {
                "qid": label["qid"], "question": label["question"], "gold_chunk_id": graded[0][0],
                "doc_id": None, "start": None, "end": None, "chunk_sha256": None, "source": "qrels",
                "prompt_sha256": None, "evidence_located": None, "relevant": label["relevant"],
            }
        )
    return rows


def deduplicate(rows: list[dict]) -> tuple[list[dict], int]:
    """Keep the first of identical questions (same text, ignoring case) and of repeated qids:
    one question labelled with two different chunks is an ambiguous label."""
    seen: set[str] = set()
    kept = []
    for row in rows:
        key = normalise_question(row["question"])
        if key in seen or row["qid"] in seen:
            continue
        seen.update((key, row["qid"]))
        kept.append(row)
    return kept, len(rows) - len(kept)


def sample_rows(rows: list[dict], max_questions: int, seed: int) -> list[dict]:
    """A reproducible random subset of at most `max_questions` rows (0 = all), in qid order."""
    rows = sorted(rows, key=lambda row: row["qid"])
    if max_questions and len(rows) > max_questions:
        picked = np.random.default_rng(seed).choice(len(rows), size=max_questions, replace=False)
        rows = [rows[i] for i in sorted(picked)]
    return rows
