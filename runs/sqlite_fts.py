"""An external engine, as a worked example: SQLite's FTS5 full-text index over the chunks.

Two ways to evaluate it with retrieval-bench:

- as a Python retriever: `retrieval.method: python`, `retrieval.python: runs.sqlite_fts:search`;
- as a system that writes a run file: `python runs/sqlite_fts.py runs/fts5.trec` (questions from
  `retrieval-bench export-questions`, default data/questions.jsonl), then `retrieval.method:
  run-file`, `retrieval.run_file: runs/fts5.trec`.

Your own client (a vector database, a search service) follows the same shape: take the
questions, return (qid, chunk_id, score) triples, higher scores better.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys

import pandas as pd

CHUNKS = "data/chunkings/default/chunks.parquet"  # the default chunking (stage chunk@default)
WORD = re.compile(r"\w+")


def _index() -> tuple[sqlite3.Connection, list[str]]:
    chunks = pd.read_parquet(CHUNKS, columns=["chunk_id", "text"])
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE VIRTUAL TABLE chunks USING fts5(text, tokenize='porter unicode61')")
    connection.executemany("INSERT INTO chunks(rowid, text) VALUES (?, ?)", enumerate(chunks["text"]))
    return connection, chunks["chunk_id"].tolist()


def search(questions: list[dict], depth: int) -> list[tuple[str, str, float]]:
    """The top `depth` chunks of every question by FTS5's BM25 (any of the question's words)."""
    connection, chunk_ids = _index()
    results = []
    for question in questions:
        words = WORD.findall(question["question"].lower())
        if not words:
            continue
        match = " OR ".join(f'"{word}"' for word in words)
        rows = connection.execute(
            "SELECT rowid, bm25(chunks) FROM chunks WHERE chunks MATCH ? ORDER BY bm25(chunks) LIMIT ?", (match, depth)
        )
        results += [(question["qid"], chunk_ids[rowid], -score) for rowid, score in rows]  # FTS5: lower is better
    return results


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "runs/fts5.trec"
    questions_file = sys.argv[2] if len(sys.argv) > 2 else "data/questions.jsonl"
    with open(questions_file, encoding="utf-8") as handle:
        questions = [json.loads(line) for line in handle if line.strip()]
    with open(out, "w", encoding="utf-8") as handle:
        for qid, chunk_id, score in search(questions, 100):
            handle.write(f"{qid} Q0 {chunk_id} 0 {score!r} fts5\n")
    print(f"wrote a run for {len(questions)} questions to {out}")
