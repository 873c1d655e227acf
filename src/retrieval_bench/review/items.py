"""What the review shows for each sampled question: the question, its evidence passage(s) with the
evidence marked, and the pooled top chunks of the panel's systems (shuffled with the seed, system
names hidden, a text several systems or chunkings returned shown once)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import read_jsonl, read_table
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.question_sets import question_set_of
from retrieval_bench.core.run_table import read_run_table
from retrieval_bench.evaluation.score.per_question import check_one_row_per_question
from retrieval_bench.goldenset.review_sample import DEFAULT_KIND, review_sample

CONTEXT_CHARS = 600  # document text shown on each side of an evidence span
MAKE_REPRO = "run `make repro` (or `dvc repro`) first"


@dataclass(frozen=True)
class Review:
    """The sample to review, in order, and every golden-set question id (a click on any other is refused)."""

    items: list[dict[str, Any]]
    golden_qids: set[str]

    @property
    def qids(self) -> list[str]:
        return [item["qid"] for item in self.items]


def load_review(root: Path, sample: int | None = None) -> Review:
    """The review of the project at `root` as params.yaml's review section says (`sample` overrides
    review.sample): an InputError naming what is missing when the pipeline has not run."""
    params = load_all_params(root / paths.PARAMS)
    settings = params["review"]
    size = settings["sample"] if sample is None else sample
    if size <= 0:
        raise InputError(f"--sample {size}: expected a positive number of questions")
    golden_path = root / paths.GOLDENSET
    if not golden_path.is_file():
        raise InputError(f"{paths.GOLDENSET}: no golden set yet; {MAKE_REPRO}")
    golden = read_jsonl(golden_path)
    if not golden:
        raise InputError(f"{paths.GOLDENSET}: the golden set is empty; nothing to review")
    check_one_row_per_question((str(row.get("qid")) for row in golden), paths.GOLDENSET)  # as scoring does
    if size > len(golden):
        print(f"review.sample {size} is more than the golden set's {len(golden)} questions: all of them are the sample")
    qids = review_sample(pd.DataFrame(golden), size, settings["seed"])
    by_qid = {str(row["qid"]): row for row in golden}
    documents = _documents(root)
    chunks = _chunk_texts(root, {system["chunking"] for system in params["panel"].values()})
    tops = _pooled(root, list(params["panel"]), qids, settings["depth"])
    items = [
        {
            "qid": qid,
            "question": str(by_qid[qid]["question"]),
            "question_set": question_set_of(by_qid[qid]),
            "kind": str(by_qid[qid].get("kind") or DEFAULT_KIND),
            "evidence": evidence_passages(by_qid[qid], documents, chunks),
            "chunks": pooled_cards(tops.get(qid, []), chunks, f"{settings['seed']}:{qid}"),
        }
        for qid in qids
    ]
    return Review(items, set(by_qid))


def evidence_passages(row: dict[str, Any], documents: dict[str, str], text_of: dict[str, str]) -> list[dict[str, str]]:
    """Each evidence span of `row` as {doc_id, before, span, after}: the span and up to
    CONTEXT_CHARS of its document on each side. A multi-evidence row has one per piece of
    `evidence_spans`, an unanswerable one none, a row judged by chunk labels its relevant chunks
    (their texts in `text_of`, by chunk id)."""
    if row.get("kind") == "unanswerable":
        return []
    if row.get("evidence_spans"):
        spans = [(s["doc_id"], s["start"], s["end"]) for s in row["evidence_spans"]]
    elif row.get("doc_id") is not None and row.get("start") is not None:
        spans = [(row["doc_id"], row["start"], row["end"])]
    else:  # real labels: the labelled chunks are the evidence
        relevant = [c for c, grade in (row.get("relevant") or {}).items() if grade > 0 and c in text_of]
        return [{"doc_id": c, "before": "", "span": text_of[c], "after": ""} for c in relevant]
    passages = []
    for doc_id, start, end in spans:
        text = documents.get(str(doc_id), "")
        passages.append(
            {
                "doc_id": str(doc_id),
                "before": ("…" if start > CONTEXT_CHARS else "") + text[max(0, start - CONTEXT_CHARS) : start],
                "span": text[start:end],
                "after": text[end : end + CONTEXT_CHARS] + ("…" if end + CONTEXT_CHARS < len(text) else ""),
            }
        )
    return passages


def pooled_cards(chunk_ids: list[str], text_of: dict[str, str], shuffle_seed: str) -> list[dict[str, Any]]:
    """One card per distinct chunk text among `chunk_ids` (its chunk ids: a grade is one click per
    id), shuffled by `shuffle_seed` so no position tells which system ranked it."""
    cards: dict[str, list[str]] = {}
    for chunk_id in dict.fromkeys(chunk_ids):
        if chunk_id in text_of:
            cards.setdefault(text_of[chunk_id], []).append(chunk_id)
    shown = [{"chunk_ids": ids, "text": text} for text, ids in cards.items()]
    random.Random(shuffle_seed).shuffle(shown)
    return shown


def _documents(root: Path) -> dict[str, str]:
    path = root / paths.DOCUMENTS
    if not path.is_file():
        raise InputError(f"{paths.DOCUMENTS}: not found; {MAKE_REPRO}")
    documents = read_table(path, ["doc_id", "text"], paths.DOCUMENTS)
    return dict(zip(documents["doc_id"].astype(str), documents["text"].astype(str), strict=True))


def _chunk_texts(root: Path, chunkings: set[str]) -> dict[str, str]:
    """chunk id -> text, over every chunking a panel system reads (chunk ids name their span, so
    two chunkings' ids differ unless their chunks are the same)."""
    tables = []
    for chunking in sorted(chunkings):
        path = root / paths.chunks_of(chunking)
        if not path.is_file():
            raise InputError(f"{paths.chunks_of(chunking)}: not found; {MAKE_REPRO}")
        tables.append(read_table(path, ["chunk_id", "text"], paths.chunks_of(chunking)))
    chunks = pd.concat(tables).drop_duplicates("chunk_id")
    return dict(zip(chunks["chunk_id"].astype(str), chunks["text"].astype(str), strict=True))


def _pooled(root: Path, systems: list[str], qids: list[str], depth: int) -> dict[str, list[str]]:
    """qid -> the chunk ids the panel's systems rank in their top `depth`, system by system."""
    wanted = set(qids)
    pooled: dict[str, list[str]] = {}
    for system in systems:
        path = root / paths.run_of(system)
        if not path.is_file():
            raise InputError(f"{paths.run_of(system)}: not found; {MAKE_REPRO}")
        run = read_run_table(path, paths.run_of(system))
        top = run[(run["rank"] <= depth) & run["qid"].isin(wanted)].sort_values(["qid", "rank"], kind="stable")
        for qid, chunk_id in zip(top["qid"], top["chunk_id"], strict=True):
            pooled.setdefault(qid, []).append(chunk_id)
    return pooled


def check_shown(clicks: list[dict[str, Any]], review: Review) -> None:
    """A grade click must grade a chunk the review showed for its question (its pooled cards): an
    InputError naming the first that does not (a grade of a chunk no one read is no judgement)."""
    shown = {item["qid"]: {c for card in item["chunks"] for c in card["chunk_ids"]} for item in review.items}
    for click in clicks:
        if click["type"] == "grade" and click["chunk_id"] not in shown.get(click["qid"], set()):
            raise InputError(
                f"chunk {click['chunk_id']!r} was not shown for question {click['qid']!r}: a grade is of a chunk "
                "the review showed"
            )
