"""Importing a large question set: generate_goldenset (in this process, provider none) on the
sample corpus with one imported set of N synthetic questions, timed; it must grow linearly with N.

Each question's evidence is 12-30 consecutive words of a random sample document, its text a
question made of words of that evidence (questions share content words, as a real set's do,
so a near-duplicate index that compares every pair shows). Formats: hand-written JSONL (each
question names its doc_id) and a ragas CSV (no doc_id: the evidence is looked for in every
document). Wall-clock and CPU seconds (process_time, the steadier on a shared machine) per run.

    .venv/bin/python bench/import_scale.py --sizes 10000 100000 --formats handwritten ragas
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml
from common import ROOT, run_main

SAMPLE = ROOT / "data" / "sample" / "sqlite"


def make_questions(texts: dict[str, str], n: int, seed: int = 0) -> list[dict]:
    """`n` questions, each with an evidence excerpt (as its document has it) it was made from."""
    rng = random.Random(seed)
    names = sorted(texts)
    spans = {name: [m.span() for m in re.finditer(r"\S+", texts[name])] for name in names}
    questions = []
    for i in range(n):
        doc_id = rng.choice(names)
        words = spans[doc_id]
        first = rng.randrange(max(1, len(words) - 30))
        last = min(len(words), first + rng.randint(12, 30)) - 1
        evidence = texts[doc_id][words[first][0] : words[last][1]]
        asked = rng.sample(evidence.split(), min(4, last - first + 1))
        question = f"How does {' '.join(asked)} relate to case {i}?"
        questions.append({"qid": f"b{i}", "question": question, "doc_id": doc_id, "evidence": evidence})
    return questions


def write_set(questions: list[dict], folder: Path, fmt: str) -> Path:
    if fmt == "handwritten":
        path = folder / "imported.jsonl"
        path.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
        return path
    path = folder / "imported.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["qid", "user_input", "reference_contexts"])
        for q in questions:
            writer.writerow([q["qid"], q["question"], json.dumps([q["evidence"]])])
    return path


def make_project(folder: Path, texts: dict[str, str]) -> None:
    """What generate_goldenset reads: params.yaml, the prompt, the documents, no labels."""
    (folder / "data").mkdir(parents=True)
    shutil.copy2(ROOT / "data" / "question_prompt.txt", folder / "data" / "question_prompt.txt")
    names = sorted(texts)
    pd.DataFrame({"doc_id": names, "text": [texts[n] for n in names]}).to_parquet(folder / "data" / "documents.parquet")
    (folder / "data" / "labels.jsonl").write_text("")


def run_stage(folder: Path, set_path: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, golden rows) of generate_goldenset with the set imported."""
    from retrieval_bench.core.stage import run_stage as run_main
    from stages import generate_goldenset

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["generate"].update(
        provider="none", handwritten="data/none.jsonl", imported={"big": str(set_path.relative_to(folder))}
    )
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (folder / "data" / "none.jsonl").write_text("")  # no hand-written questions: an empty file, not a missing one
    saved = os.getcwd()
    os.chdir(folder)
    out = io.StringIO()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(out):
            run_main(lambda: generate_goldenset.main([]), own_arguments=True)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        os.chdir(saved)
    rows = sum(1 for _ in open(folder / "data" / "goldenset.jsonl", encoding="utf-8"))
    return wall, cpu, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--formats", nargs="+", choices=["handwritten", "ragas"], default=["handwritten", "ragas"])
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # stages/
    texts = {path.name: path.read_text(encoding="utf-8") for path in sorted(SAMPLE.glob("*.md"))}
    print(f"sample corpus: {len(texts)} documents, {sum(map(len, texts.values())):,} characters")
    for fmt in args.formats:
        for size in args.sizes:
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                make_project(folder, texts)
                set_path = write_set(make_questions(texts, size), folder / "data", fmt)
                wall, cpu, rows = run_stage(folder, set_path)
            print(
                f"{fmt:12} {size:>8,} questions: {wall:7.1f} s wall, {cpu:7.1f} s CPU, {rows:,} golden rows", flush=True
            )


if __name__ == "__main__":
    run_main(main)
