"""A small judge project (6 questions over 20 ready chunks, a run of 8 per question) and a stub
reply that grades by a planted marker: shared by the judge's tests and the local-server tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import yaml
from conftest import ROOT

from retrieval_bench.core import paths
from retrieval_bench.corpus.duplicates import find_duplicates

MARKER = "PLANTED-ANSWER"


def chunk_table(n: int = 20, extra: dict[str, str] | None = None) -> pd.DataFrame:
    texts = {
        f"c{i:02d}": f"Chunk {i} talks about topic {i % 7} and nothing else of note, number {i}." for i in range(n)
    }
    texts.update(extra or {})
    ids = list(texts)
    return pd.DataFrame(
        {
            "chunk_id": ids,
            "doc_id": ids,
            "start": 0,
            "end": [len(texts[i]) for i in ids],
            "text": [texts[i] for i in ids],
            "text_sha256": [hashlib.sha256(texts[i].encode()).hexdigest() for i in ids],
        }
    )


def golden_rows(chunks: pd.DataFrame, n: int = 6) -> list[dict]:
    text = dict(zip(chunks["chunk_id"], chunks["text"]))
    return [
        {
            "qid": f"q{i}",
            "question": f"What does chunk {i} say about topic {i % 7}?",
            "gold_chunk_id": f"c{i:02d}",
            "doc_id": f"c{i:02d}",
            "start": 0,
            "end": len(text[f"c{i:02d}"]),
            "source": "hand-written",
        }
        for i in range(n)
    ]


def run_table(golden: list[dict], chunks: pd.DataFrame, depth: int = 8, gold_rank: int = 3) -> pd.DataFrame:
    """Each question: its gold at `gold_rank`, the other places from the chunk list rotated."""
    ids = chunks["chunk_id"].tolist()
    rows = []
    for q, row in enumerate(golden):
        others = [c for c in ids[q + 1 :] + ids[: q + 1] if c != row["gold_chunk_id"]][: depth - 1]
        ranked = others[: gold_rank - 1] + [row["gold_chunk_id"]] + others[gold_rank - 1 :]
        rows += [
            {"qid": row["qid"], "chunk_id": c, "rank": r, "score": float(100 - r)} for r, c in enumerate(ranked, 1)
        ]
    return pd.DataFrame(rows)


def make_project(folder: Path, chunks: pd.DataFrame | None = None, **judge) -> Path:
    (folder / paths.CHUNKS).parent.mkdir(parents=True)
    (folder / "metrics").mkdir()
    (folder / "data" / "panel" / "default").mkdir(parents=True)
    chunks = chunk_table() if chunks is None else chunks
    golden = golden_rows(chunks)
    chunks.to_parquet(folder / paths.CHUNKS, index=False)
    find_duplicates(chunks).to_parquet(folder / paths.DUPLICATES, index=False)
    (folder / "data" / "goldenset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in golden))
    run_table(golden, chunks).to_parquet(folder / "data" / "panel" / "default" / "run.parquet", index=False)
    (folder / "data" / "judge_prompt.txt").write_bytes((ROOT / "data" / "judge_prompt.txt").read_bytes())
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["judge"].update(
        {"enabled": True, "provider": "anthropic", "max_retries": 1, "batch_poll_seconds": 0.1, **judge}
    )
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return folder


def grade_by_marker(passage: str) -> str:
    return "##final score: 3" if MARKER in passage else "##final score: 0"
