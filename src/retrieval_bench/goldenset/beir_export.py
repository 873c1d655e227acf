"""Write a golden set as a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) for BEIR,
MTEB or ranx. Span-anchored questions become binary qrels: every chunk holding at least
min_coverage of the evidence is relevant (grade 1); imported labels keep their grades. A
multi-evidence question's qrels are the chunks relevant to any of its pieces (BEIR has no pieces:
complete@k is this project's); an unanswerable question has no qrels and is left out, as BEIR
scores only judged queries."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.files import atomic_open, numbered_jsonl, read_table
from retrieval_bench.core.params import load_params
from retrieval_bench.core.relevance import check_min_coverage, judge
from retrieval_bench.core.values import path_argument


def export_beir(chunks: pd.DataFrame, golden: list[dict], out: Path, min_coverage: float) -> int:
    """Write the folder; returns the number of queries written (those with a relevant chunk). An id
    holding a tab or a line break, which qrels/test.tsv cannot hold, is an InputError before any
    file is written."""
    judgements = judge(golden, chunks, min_coverage)
    chunk_ids = chunks["chunk_id"].tolist()
    for what, ids in (("chunk id", chunk_ids), ("question id", [row["qid"] for row in golden])):
        if broken := next((str(i) for i in ids if any(c in str(i) for c in "\t\n\r")), None):
            raise InputError(
                f"{what} {quoted(broken)} holds a tab or a line break, which a BEIR qrels file (tab-separated "
                "lines) cannot hold; rename its document or question"
            )
    with atomic_open(out / "corpus.jsonl") as handle:
        for chunk_id, text in zip(chunk_ids, chunks["text"], strict=True):
            handle.write(json.dumps({"_id": chunk_id, "title": "", "text": text}, ensure_ascii=False) + "\n")
    written = 0
    with atomic_open(out / "queries.jsonl") as queries, atomic_open(out / "qrels" / "test.tsv") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for row, judgement in zip(golden, judgements, strict=True):
            relevant = [(chunk_ids[i], g) for i, g in zip(judgement.indices, judgement.gains, strict=True) if g > 0]
            if not relevant:
                continue
            written += 1
            queries.write(json.dumps({"_id": row["qid"], "text": row["question"]}, ensure_ascii=False) + "\n")
            for chunk_id, gain in relevant:
                grade = int(gain) if row.get("relevant") is not None else 1
                qrels.write(f"{row['qid']}\t{chunk_id}\t{grade}\n")
    return written


def read_golden(path: str | Path) -> list[dict]:
    """The rows of a golden set as generate_goldenset writes it: each a qid, a question and
    `relevant` or an evidence span (doc_id, start, end); a row that is not one (a hand-written
    question, not yet located in the documents) is an InputError naming its line."""
    rows = []
    for line, row in numbered_jsonl(path):
        located = (
            row.get("relevant") is not None
            or row.get("kind") == "unanswerable"  # located nowhere by definition
            or all(row.get(key) is not None for key in ("doc_id", "start", "end"))
        )
        if "qid" not in row or "question" not in row or not located:
            kind = (
                "a hand-written question (question, doc_id, evidence)" if "evidence" in row else "not a golden-set row"
            )
            raise InputError(
                f"{path}:{line}: {kind}; export-beir --goldenset expects a golden set as generate_goldenset writes it "
                "(data/goldenset.jsonl: qid, question, and relevant or doc_id/start/end): "
                "name hand-written questions in generate.handwritten and run `dvc repro generate_goldenset`"
            )
        rows.append(row)
    return rows


def run(args: argparse.Namespace) -> int:
    for path in (args.chunks, args.goldenset):
        if not Path(path).is_file():
            raise InputError(f"{path}: not found; run `dvc repro` first")
    min_coverage = args.min_coverage if args.min_coverage is not None else load_params("score")["min_coverage"]
    check_min_coverage(min_coverage)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"{args.out}: a file; export-beir writes a folder (corpus.jsonl, queries.jsonl, qrels/)")
    golden = read_golden(args.goldenset)
    written = export_beir(
        read_table(args.chunks, ["chunk_id", "text", "doc_id", "start", "end"]), golden, Path(args.out), min_coverage
    )
    print(f"wrote {written} of {len(golden)} queries to {args.out} (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=path_argument, help="folder to write (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("--chunks", default=paths.CHUNKS, help="chunk table (default: %(default)s)")
    parser.add_argument("--goldenset", default=paths.GOLDENSET, help="golden set (default: %(default)s)")
    parser.add_argument("--min-coverage", type=float, default=None, help="default: score.min_coverage in params.yaml")
    parser.set_defaults(run=run)
