"""`retrieval-bench gauge FILE`: how much do the questions of any question set echo their evidence,
and how easy are they for BM25 over the chunks being scored?

FILE is this project's golden set, hand-written questions, a BEIR folder, a ragas testset
(CSV/JSONL) or a LlamaIndex EmbeddingQAFinetuneDataset (JSON): see retrieval_bench.goldenset.formats.
Each question is measured against its evidence texts (retrieval_bench.goldenset.echo); its relevant chunks in
the chunk table follow the scoring's relevance rule (retrieval_bench.core.relevance).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import atomic_open, check_not_an_input, read_table
from retrieval_bench.core.question_sets import kind_of
from retrieval_bench.core.relevance import check_min_coverage, judge
from retrieval_bench.core.values import count_argument, path_argument
from retrieval_bench.goldenset import echo, kinds
from retrieval_bench.goldenset.formats import hashed_qid, read_question_set
from retrieval_bench.goldenset.locate import EvidenceFinder

COLUMNS = ["qid", "question", "echo", "echo_longest_ngram", "echo_content_share", "bm25_rank", "n_relevant_chunks"]


def _relevance_rows(
    question: dict, kind: str, finder: EvidenceFinder, chunk_ids: set[str]
) -> tuple[list[dict], list[str]]:
    """Rows retrieval_bench.core.relevance can judge (spans or chunk labels) and the evidence texts."""
    texts = finder.texts
    if question.get("relevant") is not None:
        relevant = {c: g for c, g in question["relevant"].items() if c in chunk_ids}
        return [{"relevant": relevant}], [texts[c] for c, g in relevant.items() if g > 0 and c in texts]
    if kind == "goldenset":
        if question.get("doc_id") not in texts:
            return [], []
        return [question], [texts[question["doc_id"]][int(question["start"]) : int(question["end"])]]
    if question.get("node_ids") and all(node in chunk_ids for node in question["node_ids"]):
        return [{"relevant": {node: 1 for node in question["node_ids"]}}], question["evidence"]
    rows = []
    # a hand-written multi-evidence question's pieces each name their own document
    pieces = question.get("pieces") or [
        {"doc_id": question.get("doc_id"), "evidence": text} for text in question["evidence"]
    ]
    for piece in pieces:
        evidence, doc_id = piece["evidence"], piece["doc_id"]
        found = finder.locate(evidence, doc_id) if doc_id is None or doc_id in texts else None
        if found is not None:
            rows.append({"doc_id": found[0], "start": found[1][0], "end": found[1][1]})
    return rows, question["evidence"]


def _evidence_and_relevant(
    questions: list[dict], kind: str, chunks: pd.DataFrame, documents: pd.DataFrame, min_coverage: float
) -> tuple[list[list[str]], list[np.ndarray]]:
    """Per question, its evidence texts and its relevant chunks' row indices (sorted): every
    question's rows judged in one call, since relevance.judge indexes all the chunks each time."""
    texts = dict(zip(documents["doc_id"].astype(str), documents["text"], strict=True))
    chunk_ids, finder = set(chunks["chunk_id"]), EvidenceFinder(texts)
    to_judge, owners, evidence = [], [], []
    for number, question in enumerate(questions):
        judged_rows, evidence_texts = _relevance_rows(question, kind, finder, chunk_ids)
        to_judge += judged_rows
        owners += [number] * len(judged_rows)
        evidence.append(evidence_texts)
    found: list[set[int]] = [set() for _ in questions]
    for owner, judged in zip(owners, judge(to_judge, chunks, min_coverage), strict=True):
        found[owner].update(int(i) for i in judged.indices[judged.gains > 0])
    return evidence, [np.array(sorted(indices), dtype=np.int64) for indices in found]


def gauge_question_set(
    path: str | Path, chunks: pd.DataFrame, documents: pd.DataFrame, min_coverage: float = 0.5, split: str = "test"
) -> tuple[str, pd.DataFrame, dict]:
    """(format, one row per question, summary) for the question set at `path`."""
    kind, questions = read_question_set(path, split)
    if not questions:
        raise InputError(f"{path}: no questions")
    evidence, relevant = _evidence_and_relevant(questions, kind, chunks, documents, min_coverage)
    rows = [
        {
            "qid": str(question.get("qid") or hashed_qid(question["question"], str(question.get("doc_id") or ""))),
            "question": question["question"],
            "n_relevant_chunks": len(indices),
            "kind": kind_of(question),
        }
        for question, indices in zip(questions, relevant, strict=True)
    ]
    # keyword questions are held to the short-query rule too, as generate_goldenset holds them
    rare = kinds.Corpus(chunks).rare() if any(row["kind"] == "keyword" for row in rows) else None
    summary = echo.mark(rows, evidence, rare)
    ranks = echo.bm25_ranks(chunks["text"].tolist(), [row["question"] for row in rows], relevant)
    for row, rank in zip(rows, ranks, strict=True):
        row["bm25_rank"] = rank
    found = [rank for rank in ranks if rank is not None]
    summary.update(
        n_questions=len(rows),
        n_without_relevant_chunk=sum(rank is None for rank in ranks),
        bm25_mrr=round(float(np.mean([1 / r for r in found])), 4) if found else None,
        bm25_recall_at_1=round(float(np.mean([r == 1 for r in found])), 4) if found else None,
    )
    return kind, pd.DataFrame(rows)[COLUMNS], summary


def worst_offenders(table: pd.DataFrame, limit: int) -> pd.DataFrame:
    """The questions closest to their evidence: flagged first, then the longest shared run."""
    measured = table[table["echo"].notna()]
    return measured.sort_values(
        ["echo", "echo_longest_ngram", "echo_content_share"], ascending=False, kind="stable"
    ).head(limit)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument(
        "file", help="question set: golden set, hand-written JSONL, BEIR folder, ragas CSV/JSONL, LlamaIndex JSON"
    )
    parser.add_argument(
        "--chunks", default=paths.CHUNKS, help="chunk table to judge and rank against (default: %(default)s)"
    )
    parser.add_argument(
        "--documents", default=paths.DOCUMENTS, help="documents the evidence is found in (default: %(default)s)"
    )
    parser.add_argument(
        "--min-coverage",
        type=float,
        default=0.5,
        help="relevance threshold, as score.min_coverage (default: %(default)s)",
    )
    parser.add_argument("--split", default="test", help="BEIR folders: qrels/<split>.tsv (default: %(default)s)")
    parser.add_argument(
        "--out", type=path_argument, default=paths.GAUGE, help="per-question results (default: %(default)s)"
    )
    parser.add_argument("--show", type=count_argument, default=10, help="worst offenders listed (default: %(default)s)")
    parser.set_defaults(run=run)


def _read_table(path: str, columns: list[str], option: str, stage: str) -> pd.DataFrame:
    """The table `option` names: one that is missing, not Parquet or lacks `columns` is one line."""
    if not Path(path).exists():  # a folder or a FIFO: read_table's check_regular says which
        raise InputError(f"{option} {path}: not found (run `dvc repro {stage}`, or pass {option})")
    return read_table(path, columns, name=f"{option} {path}")


def run(args: argparse.Namespace) -> int:
    check_min_coverage(args.min_coverage)
    check_not_an_input(args.out, "--out", {"FILE": args.file, "--chunks": args.chunks, "--documents": args.documents})
    chunks = _read_table(args.chunks, ["chunk_id", "doc_id", "start", "end", "text"], "--chunks", "chunk@default")
    documents = _read_table(args.documents, ["doc_id", "text"], "--documents", "load_chunks")
    if not documents["doc_id"].is_unique:  # a chunk table: evidence would be sought in one chunk of each
        twice = documents["doc_id"][documents["doc_id"].duplicated()].iloc[0]
        raise InputError(
            f"--documents {args.documents}: doc_id {twice!r} is in it twice (a chunk table?); expected the "
            f"documents, one row per doc_id ({paths.DOCUMENTS})"
        )
    kind, table, summary = gauge_question_set(args.file, chunks, documents, args.min_coverage, args.split)
    with atomic_open(args.out) as handle:
        table.to_csv(handle, index=False, lineterminator="\n")
    rate = "n/a" if summary["echo_rate"] is None else f"{summary['echo_rate']:.1%}"
    print(f"{args.file} ({kind}): {summary['n_questions']} questions, {summary['n_measured']} with evidence")
    print(
        f"echo rate {rate} ({summary['echo_flagged']} flagged; rule: {echo.ECHO_RULE}; "
        f"a keyword query also: {echo.SHORT_ECHO_RULE})"
    )
    print(
        f"BM25 over {len(chunks)} chunks: MRR {summary['bm25_mrr']}, recall@1 {summary['bm25_recall_at_1']}; "
        f"{summary['n_without_relevant_chunk']} questions have no relevant chunk"
    )
    offenders = worst_offenders(table, args.show)
    if len(offenders):
        print("closest to their evidence:")
        for row in offenders.itertuples():
            mark = "ECHO" if row.echo else "    "
            print(
                f"  {mark} {row.qid}  run {row.echo_longest_ngram}, share {row.echo_content_share:.2f}: {str(row.question)[:100]}"
            )
    print(f"per-question results: {args.out}")
    return 0
