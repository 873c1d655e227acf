"""A small project the review tests run in, written by hand (no pipeline run): params.yaml, three
documents, one chunking, two panel systems' runs and a golden set of every kind (single, multi,
unanswerable) in two question sets; one chunk repeats another's text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from conftest import ROOT, set_params

WORDS = "page cache journal wal checkpoint index vacuum pragma lock reader writer schema table row".split()
CHUNK = 120


def make_review_project(root: Path, questions: int = 8, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "params.yaml", root)
    panel = {
        "default": {"chunking": "default", "embedder": "default"},
        "bm25": {"chunking": "default", "embedder": "default", "method": "bm25"},
    }
    set_params(
        root,
        panel=panel,
        chunkings={"default": {}},
        embedders={"default": {}},
        **{"review.sample": questions - 2, "review.seed": 0, "review.depth": 3},
    )
    texts = {f"d{i}.md": " ".join(rng.choice(WORDS, size=120)) for i in range(3)}
    texts["d2.md"] = texts["d1.md"][:CHUNK] + texts["d2.md"][CHUNK:]  # d2's first chunk repeats d1's
    data = root / "data"
    (data / "chunkings" / "default").mkdir(parents=True)
    pd.DataFrame({"doc_id": list(texts), "text": list(texts.values())}).to_parquet(data / "documents.parquet")
    chunks = [
        {
            "chunk_id": f"{doc}:{start}-{min(start + CHUNK, len(text))}",
            "doc_id": doc,
            "text": text[start : start + CHUNK],
        }
        for doc, text in texts.items()
        for start in range(0, len(text), CHUNK)
    ]
    pd.DataFrame(chunks).to_parquet(data / "chunkings" / "default" / "chunks.parquet")
    golden = []
    for i in range(questions):
        kind = "unanswerable" if i == 1 else "multi" if i == 2 else None
        row = {
            "qid": f"q{i}",
            "question": f"What does question {i} ask about {WORDS[i % len(WORDS)]}?",
            "source": "hand-written" if i % 2 else "claude-haiku-4-5",
            "doc_id": "d0.md",
            "start": 10 * i,
            "end": 10 * i + 30,
        }
        if kind:
            row["kind"] = kind
        if kind == "multi":
            row["evidence_spans"] = [
                {"doc_id": "d0.md", "start": 5, "end": 25},
                {"doc_id": "d1.md", "start": 40, "end": 70},
            ]
        golden.append(row)
    (data / "goldenset.jsonl").write_text("".join(json.dumps(row) + "\n" for row in golden))
    for system in panel:
        rows = []
        for row in golden:
            order = rng.permutation(len(chunks))
            rows += [
                {"qid": row["qid"], "chunk_id": chunks[j]["chunk_id"], "rank": rank, "score": 1.0 / rank}
                for rank, j in enumerate(order, 1)
            ]
        (data / "panel" / system).mkdir(parents=True)
        pd.DataFrame(rows).to_parquet(data / "panel" / system / "run.parquet")
    return root
