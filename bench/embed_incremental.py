"""P2: incrementality of the embed stages under the real `dvc repro`.

    python bench/embed_incremental.py [--chunks 20000] [--edit 0.01] [--add-questions 10]

Copies the project into a temporary git + DVC repository with a synthetic corpus of ready chunks
(and queries with qrels, so no question is generated), then:
  1. full run: `dvc repro embed_corpus embed_questions` (one chunking and one embedder, the
     defaults: `embed_corpus@default-default`, `embed_questions@default`) on an empty embedding cache;
  2. edits the text of --edit of the chunks and reruns;
  3. adds --add-questions queries and reruns.
For each run it reports the texts each stage embedded (the stages' own count) and the seconds
spent embedding, beside the wall time of the whole `dvc repro`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import InputError, copy_project, project_env, run_main

from retrieval_bench.core import paths
from retrieval_bench.core.params_panel import embedded_pairs

WORDS = (
    "page cache journal index btree vacuum checkpoint writer reader lock schema table column row query planner "
    "statistics trigger view transaction savepoint rollback commit pragma wal blob collation virtual module "
    "extension backup restore integrity foreign key constraint"
).split()
# The stages' lines for the default chunking and embedder: `embed_corpus default with default: ...`
# and `embed_questions with default: ...`.
STAGE_LINE = re.compile(
    r"^(embed_corpus|embed_questions)(?: default)? with default: .*?(\d+) from the cache, (\d+) embedded(?: in ([\d.]+)s)?",
    re.MULTILINE,
)
# embed_corpus embeds the golden set's questions too, ahead of embed_questions (one model load):
# `embed_corpus: ahead of embed_questions@default, ...`; embed_questions then finds them cached.
AHEAD_LINE = re.compile(
    r"^embed_corpus: ahead of embed_questions@default, .*?(\d+) from the cache, (\d+) embedded", re.MULTILINE
)


def write_corpus(folder: Path, chunks: dict[str, str], queries: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    n = len(chunks)
    (folder / "chunks.jsonl").write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in chunks.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (folder / "qrels.tsv").write_text("".join(f"{q}\tc{int(q[1:]) * 7919 % n:06d}\t1\n" for q in queries))


def repro(project: Path, env: dict) -> tuple[dict, float]:
    """`make repro`'s steps for the embed stages: check_params (which stamps load.source, so DVC
    sees a corpus edited in place), then `dvc repro`; each stage's texts embedded and seconds, the
    questions embed_corpus embedded ahead counted as embed_questions'."""
    started = time.monotonic()
    output = ""
    for command in (["-m", "stages.check_params"], ["-m", "dvc", "repro", "embed_corpus", "embed_questions"]):
        result = subprocess.run([sys.executable, *command], cwd=project, env=env, capture_output=True, text=True)
        if result.returncode:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise InputError(f"{' '.join(command)} failed in {project}: {' / '.join(tail)}")
        output += result.stdout
    wall = time.monotonic() - started
    stages = {m.group(1): (int(m.group(3)), float(m.group(4) or 0)) for m in STAGE_LINE.finditer(output)}
    ahead = sum(int(m.group(2)) for m in AHEAD_LINE.finditer(output))
    if ahead or "embed_questions" in stages:
        embedded, seconds = stages.get("embed_questions", (0, 0.0))
        stages["embed_questions"] = (embedded + ahead, seconds)
    return stages, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--edit", type=float, default=0.01)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--add-questions", type=int, default=10)
    args = parser.parse_args()
    rng = random.Random(0)
    chunks = {
        f"c{i:06d}": f"Note {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(15, 30))) + "."
        for i in range(args.chunks)
    }
    queries = {
        f"q{i}": f"what does note {i * 7919 % args.chunks} say about {rng.choice(WORDS)}" for i in range(args.questions)
    }
    env = project_env(HF_HUB_OFFLINE="1")
    rows = []
    with tempfile.TemporaryDirectory(prefix="embed-incremental-") as tmp:
        project = Path(tmp)
        copy_project(project, env)
        params = yaml.safe_load((project / "params.yaml").read_text())
        params["load"]["source"] = "data/synthetic"
        params["generate"]["max_questions"] = 0
        # A single system: the default system alone on the default chunking and embedder (as tests/conftest.py).
        panel = {"default": {"chunking": "default", "embedder": "default"}}
        params.update(panel=panel, chunkings={"default": {}}, embedders={"default": {}}, embedded=embedded_pairs(panel))
        (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        source = project / "data" / "synthetic"

        write_corpus(source, chunks, queries)
        rows.append(("full run (empty cache)", *repro(project, env)))
        edited = rng.sample(sorted(chunks), int(round(args.chunks * args.edit)))
        for key in edited:
            chunks[key] = chunks[key].replace("Note", "Edited note", 1)
        write_corpus(source, chunks, queries)
        rows.append((f"{len(edited)} chunks edited ({args.edit:.0%})", *repro(project, env)))
        for i in range(args.questions, args.questions + args.add_questions):
            queries[f"q{i}"] = f"which note first mentions {rng.choice(WORDS)} and {rng.choice(WORDS)}"
        write_corpus(source, chunks, queries)
        rows.append((f"{args.add_questions} questions added", *repro(project, env)))
        cache_mb = sum(p.stat().st_size for p in (project / paths.EMBEDDING_CACHE).rglob("*") if p.is_file()) / 1e6

    full_texts, full_seconds = rows[0][1]["embed_corpus"]
    print(
        f"P2: {args.chunks} synthetic chunks, {args.questions} questions, torch fp32, {os.cpu_count()} CPUs; cache {cache_mb:.1f} MB after the runs"
    )
    print(
        "| change | embed_corpus: texts embedded | embed_corpus: embedding s | embed_questions: texts embedded | `dvc repro` wall s |"
    )
    print("|---|---:|---:|---:|---:|")
    for label, stages, wall in rows:
        corpus = stages.get("embed_corpus")
        questions = stages.get("embed_questions")
        corpus_cell = f"{corpus[0]} ({corpus[0] / full_texts:.1%})" if corpus else "not run"
        seconds_cell = f"{corpus[1]:.1f} ({corpus[1] / full_seconds:.1%})" if corpus else "—"
        print(f"| {label} | {corpus_cell} | {seconds_cell} | {questions[0] if questions else 'not run'} | {wall:.0f} |")
    return 0


if __name__ == "__main__":
    run_main(main)
