"""Golden rows: questions anchored to evidence spans in documents, or real labels; de-duplication
and sampling (retrieval_bench.goldenset.assemble puts them together).

A synthetic question is anchored to the evidence it was written from (a span of its document),
not to a chunk, so the same golden set scores any chunking of the corpus.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_bench.evaluation.relevance import coverage
from retrieval_bench.goldenset.evidence import locate_evidence, locate_in_passage
from retrieval_bench.goldenset.formats import hashed_qid, read_question_set
from retrieval_bench.io import InputError, read_jsonl


def question_id(doc_id: str, question: str) -> str:
    return hashed_qid(question, doc_id)


def best_passage(passages: pd.DataFrame, doc_id: str, start: int, end: int) -> pd.Series | None:
    """The passage of `doc_id` that overlaps [start, end) the most."""
    same_doc = passages[passages["doc_id"] == doc_id]
    if same_doc.empty:
        return None
    share = coverage(same_doc["start"].to_numpy(), same_doc["end"].to_numpy(), start, end)
    return same_doc.iloc[int(np.argmax(share))]


def read_handwritten(path: str | Path) -> list[dict]:
    """Questions the user brings: hand-written JSONL (question, evidence, doc_id, optional qid and
    any other fields), a ragas testset (CSV/JSONL) or a LlamaIndex EmbeddingQAFinetuneDataset
    (JSON). Each record: qid (None: derived), question, evidence (one text), doc_id (None: any
    document), extra (the source's other fields, kept as-is). A missing file holds none."""
    path = Path(path)
    if not path.exists():
        return []
    if path.suffix.lower() == ".jsonl":
        for number, record in enumerate(read_jsonl(path), 1):
            missing = {"question", "doc_id", "evidence"} - set(record)
            if missing and not {"user_input", "reference_contexts"} <= set(record):
                raise InputError(f"{path}: record {number} lacks {', '.join(sorted(missing))}")
    kind, questions = read_question_set(path)
    if kind not in ("handwritten", "ragas", "llamaindex"):
        raise InputError(f"{path}: generate.handwritten takes hand-written JSONL, a ragas testset or a LlamaIndex dataset, not a {kind} set")
    records = []
    for question in questions:
        evidence = question["evidence"][0] if question["evidence"] else ""
        records.append({
            "qid": question["qid"],  # None: derived from document and question, as it always was
            "question": question["question"], "evidence": evidence,
            "doc_id": question.get("doc_id"), "extra": question["extra"],
        })
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
        doc_id = record.get("doc_id")
        if doc_id is not None and doc_id not in texts:
            counts["other_corpus"] += 1
            continue
        found = locate_anywhere(texts, record["evidence"], doc_id)
        if found is None:
            counts["not_located"] += 1
            continue
        doc_id, span = found
        passage = best_passage(passages, doc_id, *span)
        row = _row(record["question"], passage, span, "hand-written", None, True)
        if record.get("qid") is not None:
            row["qid"] = str(record["qid"])
        rows.append({**record.get("extra", {}), **row})  # the user's own fields, ours win on a clash
    return rows, counts


def locate_anywhere(texts: dict[str, str], evidence: str, doc_id: str | None) -> tuple[str, tuple[int, int]] | None:
    """(document, span) of `evidence`: in document `doc_id`, or with no doc_id in the first
    document (by id) that holds it."""
    candidates = [doc_id] if doc_id is not None else sorted(texts)
    for candidate in candidates:
        span = locate_evidence(texts[candidate], evidence)
        if span is not None:
            return candidate, span
    return None


def generated_row(record: dict, passage: Mapping, document: str) -> dict:
    """A golden row for a cached generated question over `passage`; the evidence excerpt is looked
    for in the passage that was sent only (never elsewhere in the document, where a chunk's text
    could steer it), else the whole passage is the evidence."""
    passage_text = document[passage["start"]:passage["end"]]
    span = locate_in_passage(record.get("evidence") or "", passage_text)
    if span is not None:
        span = (span[0] + int(passage["start"]), span[1] + int(passage["start"]))
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


def evidence_texts(rows: list[dict], texts: Mapping[str, str]) -> list[list[str]]:
    """Each row's evidence: its span of its document, or for chunk labels the relevant chunks'
    texts (`texts` maps document ids, which are the chunk ids of a pre-chunked corpus)."""
    evidence = []
    for row in rows:
        if row.get("relevant") is not None:
            evidence.append([texts[c] for c, grade in row["relevant"].items() if grade > 0 and c in texts])
        elif row.get("doc_id") in texts and row.get("start") is not None:
            evidence.append([texts[row["doc_id"]][int(row["start"]):int(row["end"])]])
        else:
            evidence.append([])
    return evidence


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
