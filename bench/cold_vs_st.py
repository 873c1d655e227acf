"""The cold pipeline against sentence-transformers' InformationRetrievalEvaluator: CPU seconds of a
first `dvc repro` on SciFact (600 documents and every judged test query by default) against the
evaluator on the same model and data, side by side.

    python bench/cold_vs_st.py [SCIFACT] [--docs 600] [--rounds 3] [--threads 1]

Data. A BEIR folder cut from SciFact's test split: every document a test query judges relevant,
then the corpus's other documents in file order up to --docs (0: the whole corpus, 5,183), and the
300 test queries; both sides read exactly these. --docs below the 283 judged abstracts is raised
to them; and below about 350 texts the embed stage's own batches cannot fill the leaderboard's
cost rounds (costs.rounds x 64 chunks), so it times a 64-chunk sample again and again: the ratio
then counts that extra embedding (2.2x at --docs 30) and is no measure of the pipeline at scale.

Pipeline side. A fresh copy of the project each round (bench/common.copy_project: git + DVC, no
DVC cache, no embedding cache: cold), the reproduction's own params (reproduce_scifact.PINNED over
the code's defaults: all-MiniLM-L6-v2 at 256 tokens, exact dense search, the default panel of one
system, the leaderboard's cost measurement as a user gets it), then `dvc repro`: the CPU seconds
(user + sys) of it and every process it waited for (getrusage RUSAGE_CHILDREN before and after).

Evaluator side. A child process (interpreter start and imports count, as they do for the stages)
that loads the same model files, builds InformationRetrievalEvaluator(queries, corpus,
relevant_docs) with title + " " + text as the corpus (as BEIR, MTEB and the pipeline embed it),
batch size 32 as the pipeline's, and calls it; its CPU seconds likewise.

Both sides pinned to --threads (OMP/MKL/OpenBLAS/numba variables: torch and FAISS read them at
start), interleaved pipeline, evaluator, pipeline, ... so a load that comes and goes falls on both.
Each round checks nDCG@10 equal (to 1e-9). Prints a Markdown table of the rounds, then the median
CPU seconds of each side; the last line of stdout is the ratio (pipeline / evaluator, medians).

--breakdown: first, where the pipeline's CPU goes, in one more cold copy: its `dvc repro` with a
`python` first on PATH that runs the venv's interpreter and records each stage command's CPU
seconds, so each stage is timed in the run itself; DVC's own share is the rest of the run (with
the timing `python`'s own start, about 0.02 CPU-s a stage). Then
the evaluator once, a `dvc repro` of as many chained stages that only start Python and import
numpy and pyarrow (the floor of that many stage processes under DVC), and what every stage pays
before its work (the interpreter with pandas and pyarrow; torch with sentence-transformers): CPU
seconds each, one table.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import SCIFACT, copy_project, machine, project_env, run_main, scifact_folder, thread_env
from reproduce_scifact import scifact_params

NDCG_TOLERANCE = 1e-9


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cut_scifact(scifact: Path, docs: int, dest: Path) -> tuple[int, int]:
    """Write the BEIR folder both sides read into `dest`: (documents, queries)."""
    with open(scifact / "qrels" / "test.tsv", encoding="utf-8") as handle:
        qrels = [row for row in csv.DictReader(handle, delimiter="\t") if int(row["score"]) > 0]
    judged_queries = {row["query-id"] for row in qrels}
    relevant_docs = {row["corpus-id"] for row in qrels}
    rows = [json.loads(line) for line in (scifact / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    if docs:
        others = [row for row in rows if row["_id"] not in relevant_docs]
        keep = relevant_docs | {row["_id"] for row in others[: max(docs - len(relevant_docs), 0)]}
        rows = [row for row in rows if row["_id"] in keep]
    (dest / "qrels").mkdir(parents=True)
    (dest / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    queries = [
        line
        for line in (scifact / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        if line and json.loads(line)["_id"] in judged_queries
    ]
    (dest / "queries.jsonl").write_text("".join(line + "\n" for line in queries), encoding="utf-8")
    (dest / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{r['query-id']}\t{r['corpus-id']}\t{r['score']}\n" for r in qrels),
        encoding="utf-8",
    )
    return len(rows), len(queries)


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU seconds of `command` and its waited-for children, wall seconds, its stdout); exits on failure."""
    before, started = children_cpu(), time.monotonic()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    cpu, wall = children_cpu() - before, time.monotonic() - started
    if result.returncode:
        sys.exit(
            f"cold_vs_st: {' '.join(command)} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return cpu, wall, result.stdout


def cold_repro(project: Path, data: Path, env: dict[str, str]) -> tuple[float, float]:
    """Copy the project into `project` with the reproduction's params on `data`, then a timed
    cold `dvc repro`: (CPU, wall) seconds."""
    copy_project(project, env)
    (project / "params.yaml").write_text(yaml.safe_dump(scifact_params(data), sort_keys=False))
    cpu, wall, _ = timed([sys.executable, "-m", "dvc", "repro", "--quiet"], project, env)
    return cpu, wall


def pipeline_round(data: Path, env: dict[str, str]) -> dict:
    """A cold `dvc repro` in a fresh copy of the project: CPU, wall and nDCG@10."""
    with tempfile.TemporaryDirectory(prefix="cold-pipeline-") as tmp:
        project = Path(tmp)
        cpu, wall = cold_repro(project, data, env)
        metrics = json.loads((project / "metrics" / "panel" / "default" / "metrics.json").read_text())
    return {"cpu": cpu, "wall": wall, "ndcg@10": metrics["ndcg@10"]}


# The `python` the breakdown's `dvc repro` finds first on PATH: it runs the venv's interpreter
# with the same arguments and appends its command and CPU seconds to a log (one JSON line).
TIMING_SHIM = """#!{python}
import json, resource, subprocess, sys
code = subprocess.call([{python!r}, *sys.argv[1:]])
used = resource.getrusage(resource.RUSAGE_CHILDREN)
with open({log!r}, "a", encoding="utf-8") as log:
    log.write(json.dumps({{"command": sys.argv[1:], "cpu": used.ru_utime + used.ru_stime}}) + "\\n")
sys.exit(code)
"""


def floor_repro(project: Path, stages: int, env: dict[str, str]) -> float:
    """CPU seconds of a cold `dvc repro` of `stages` chained stages that only start the interpreter,
    import numpy and pyarrow (what a stage reading a Parquet table pays first) and write one file:
    the least any pipeline of that many stage processes costs under DVC."""
    project.mkdir()
    for command in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(command, cwd=project, check=True, env=env)
    write = "import numpy, pyarrow.parquet, pathlib; pathlib.Path('out{0}').write_text('{0}')"
    pipeline = {
        f"s{i}": {
            "cmd": f'python -c "{write.format(i)}"',
            "outs": [f"out{i}"],
            **({"deps": [f"out{i - 1}"]} if i else {}),
        }
        for i in range(stages)
    }
    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": pipeline}, sort_keys=False))
    return timed([sys.executable, "-m", "dvc", "repro", "--quiet"], project, env)[0]


def breakdown(data: Path, env: dict[str, str]) -> None:
    """Print each stage's CPU seconds in a cold `dvc repro`, DVC's own, the evaluator's (see --breakdown)."""
    with tempfile.TemporaryDirectory(prefix="cold-breakdown-") as tmp:
        project, shim, log = Path(tmp) / "project", Path(tmp) / "shim", Path(tmp) / "stages.jsonl"
        shim.mkdir()
        (shim / "python").write_text(TIMING_SHIM.format(python=sys.executable, log=str(log)))
        (shim / "python").chmod(0o755)
        project.mkdir()
        repro, _ = cold_repro(project, data, dict(env, PATH=f"{shim}{os.pathsep}{env['PATH']}"))
        stages = [json.loads(line) for line in log.read_text().splitlines()]
        rows = [(f"`python {' '.join(stage['command'])}`", stage["cpu"]) for stage in stages]
        rows.append(("DVC itself (the rest of the run)", repro - sum(stage["cpu"] for stage in stages)))
        rows.insert(0, ("`dvc repro`, all of it", repro))
        rows.append(("the evaluator (for scale)", evaluator_round(data, env)["cpu"]))
        rows.append(
            (
                f"`dvc repro` of {len(stages)} chained stages that only start Python and import numpy, pyarrow",
                floor_repro(Path(tmp) / "floor", len(stages), env),
            )
        )
        for what, imports in (
            ("pandas, pyarrow", "import pandas, pyarrow.parquet"),
            ("torch, sentence-transformers", "import sentence_transformers"),
        ):
            rows.append((f"an interpreter importing {what}", timed([sys.executable, "-c", imports], project, env)[0]))
    print("| what | CPU s |\n|---|---|")
    for what, cpu in rows:
        print(f"| {what} | {cpu:.2f} |", flush=True)


def evaluator_round(data: Path, env: dict[str, str]) -> dict:
    cpu, wall, stdout = timed([sys.executable, __file__, "--child", str(data)], data, env)
    return {"cpu": cpu, "wall": wall, "ndcg@10": json.loads(stdout.strip().splitlines()[-1])["ndcg@10"]}


def evaluator_child(data: Path) -> None:
    """The evaluator side, in its own process: prints {"ndcg@10": ...}."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.evaluation import InformationRetrievalEvaluator

    from retrieval_bench.embedding.model_source import resolve_model

    corpus = {}
    for line in (data / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        corpus[row["_id"]] = f"{row.get('title') or ''} {row['text']}".strip()
    queries = {row["_id"]: row["text"] for row in map(json.loads, (data / "queries.jsonl").read_text().splitlines())}
    relevant: dict[str, set[str]] = {}
    with open(data / "qrels" / "test.tsv", encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            relevant.setdefault(row["query-id"], set()).add(row["corpus-id"])
    model = SentenceTransformer(
        str(resolve_model("sentence-transformers/all-MiniLM-L6-v2", "embed.model")), device="cpu"
    )
    model.max_seq_length = 256
    evaluator = InformationRetrievalEvaluator(queries, corpus, relevant, batch_size=32, name="scifact")
    scores = evaluator(model)
    print(json.dumps({"ndcg@10": scores["scifact_cosine_ndcg@10"]}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "scifact", nargs="?", default=str(SCIFACT), help=f"the BEIR SciFact folder (default: {SCIFACT})"
    )
    parser.add_argument("--docs", type=int, default=600, help="documents (the judged ones first); 0: all")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds; the ratio is of medians (0: --breakdown alone)"
    )
    parser.add_argument("--threads", type=int, default=1, help="threads of every engine on both sides")
    parser.add_argument("--breakdown", action="store_true", help="first, each stage's CPU seconds (one more cold copy)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.rounds < 1 and not arguments.breakdown:
        parser.error("--rounds must be at least 1 (0 only with --breakdown)")
    if arguments.child:
        evaluator_child(Path(arguments.child))
        return 0
    scifact = scifact_folder(arguments.scifact, "cold_vs_st")
    if scifact is None:
        return 0
    env = project_env(**thread_env(arguments.threads), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TQDM_DISABLE="1")
    with tempfile.TemporaryDirectory(prefix="cold-scifact-") as tmp:
        data = Path(tmp) / "scifact"
        documents, queries = cut_scifact(scifact, arguments.docs, data)
        print(f"SciFact test split: {documents} documents, {queries} queries; {machine(arguments.threads)}", flush=True)
        if arguments.breakdown:
            breakdown(data, env)
            if not arguments.rounds:
                return 0
        print("| round | side | CPU s | wall s | nDCG@10 |\n|---|---|---|---|---|", flush=True)
        sides = {"pipeline": pipeline_round, "evaluator": evaluator_round}
        cpu: dict[str, list[float]] = {side: [] for side in sides}
        for round_ in range(arguments.rounds):
            ndcg = {}
            for side, measure in sides.items():
                report = measure(data, env)
                cpu[side].append(report["cpu"])
                ndcg[side] = report["ndcg@10"]
                print(
                    f"| {round_ + 1} | {side} | {report['cpu']:.1f} | {report['wall']:.1f} | {report['ndcg@10']:.16f} |",
                    flush=True,
                )
            if abs(ndcg["pipeline"] - ndcg["evaluator"]) > NDCG_TOLERANCE:
                print(f"cold_vs_st: nDCG@10 differs: {ndcg}", file=sys.stderr)
                return 2
    medians = {side: statistics.median(values) for side, values in cpu.items()}
    print(f"median CPU s: pipeline {medians['pipeline']:.1f}, evaluator {medians['evaluator']:.1f}")
    print(f"{medians['pipeline'] / medians['evaluator']:.3f}")
    return 0


if __name__ == "__main__":
    run_main(main)
