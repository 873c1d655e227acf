"""A panel's cost per system beyond the system's own work: CPU seconds of `dvc repro` for 0, 1, 4
and 16 panel systems that do cheap, equal work.

    python bench/panel_overhead.py [--sizes 0,1,4,16] [--embedding-cache DIR] [--keep DIR] [--no-prune]

Method. Copies the project with the whole bundled sample (bench/common.copy_project; the copy's own
src/ is imported: PYTHONPATH), with the embedding cache of --embedding-cache copied in when it has
one (default: this checkout's .dvc/tmp/retrieval-bench/embeddings, or a 0.2.0 data/embedding_cache:
the same layout; then the warm-up embeds nothing new), and runs
`dvc repro` once with a panel of the default system and one more to build everything up to the
embeddings and the default system's retrieve/score. Then for each size n: the default system and
n dense systems on chunking default and embedder default at depth 20, alike but for their names
(p<n>-<i>: new systems each round, nothing of them kept from a round before; until 2026-12-05 the
i-th had depth 20 + i, so a 64-system panel's systems each did more work than the one whose own
work is timed, which the per-system figure then counted as overhead), the run cache emptied
(.dvc/cache/runs), then what `make repro` runs: `retrieval-bench lock prune` (stale lock entries
go) and `dvc repro`; the CPU seconds (user + sys) of both and of
every process they waited for (getrusage RUSAGE_CHILDREN before and after); --no-prune: `dvc
repro` alone, the earlier rounds' entries left in the lock. Size 0 is the fixed
part (check_params, which is always_changed, the leaderboard of the default system alone, DVC's graph). Every engine
is pinned to one thread (BLAS, OpenMP, numba), in the stages as in the measurement below.

A system's own work: in one process in the copy, stages.retrieve's retrieve_system and
stages.score's score_one (what each stage computes for one system whose inputs changed) for one
system of the last panel, each called once to warm up (imports, page cache) and then timed
(time.process_time) on a second call: reading its inputs, retrieving, scoring, writing its outputs,
without interpreter start, imports, the stage's kept-outputs check or DVC.

Per system for size n: (CPU(n) - CPU(0)) / n; beyond its own work: that minus the own work. The
last line of stdout is the JSON report.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from common import ROOT, copy_project, machine, project_env, run_main, thread_env

from retrieval_bench.core import paths
from retrieval_bench.core.params_panel import embedded_pairs

OWN_WORK = """
import json, sys, time
from retrieval_bench.core import paths
from retrieval_bench.core.files import read_jsonl
from retrieval_bench.core.params import load_all_params
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.reviews import golden_reviews
import stages.retrieve as retrieve, stages.score as score
system, params = sys.argv[1], load_all_params()
golden = read_jsonl(paths.GOLDENSET)
reviews = golden_reviews(paths.REVIEWS, {str(row["qid"]) for row in golden})
work = {
    "retrieve": lambda: retrieve.retrieve_system(params, system),
    "score": lambda: score.score_one(
        params, Scoring.from_params(params), golden, read_jsonl(paths.JUDGED_POOL), reviews, system
    ),
}
own = {}
for name, call in work.items():
    call()  # warm: lazy imports, the page cache
    start = time.process_time()
    call()
    own[name] = time.process_time() - start
print(json.dumps(own))
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list[str], project: Path, env: dict[str, str]) -> tuple[float, str]:
    """(CPU seconds of `command` and its waited-for children, its stdout)."""
    before = children_cpu()
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    cpu = children_cpu() - before
    if result.returncode:
        sys.exit(
            f"panel_overhead: {' '.join(command)} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return cpu, result.stdout


def set_panel(project: Path, systems: dict[str, dict]) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["panel"] = systems
    params["embedded"] = embedded_pairs(systems)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def panel_of(n: int, prefix: str = "p") -> dict[str, dict]:
    """The default system (unchanged in every round: cached, part of the fixed part) and n more."""
    return {"default": {"chunking": "default", "embedder": "default"}} | {
        f"{prefix}{n}-{i}": {"chunking": "default", "embedder": "default", "method": "dense", "depth": 20}
        for i in range(n)
    }


def prepare(project: Path, env: dict[str, str], embedding_cache: Path | None) -> None:
    copy_project(project, env)
    shutil.copytree(ROOT / "data" / "sample", project / "data" / "sample")
    if embedding_cache is not None and any(p.is_file() and p.name != ".gitignore" for p in embedding_cache.rglob("*")):
        shutil.copytree(embedding_cache, project / paths.EMBEDDING_CACHE, dirs_exist_ok=True)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["chunkings"] = {"default": {}}
    params["embedders"] = {"default": {}}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    set_panel(project, panel_of(1, prefix="warm"))  # a name no measured panel has


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0,1,4,16", help="panel sizes, comma-separated (0: the fixed part; needed)")
    parser.add_argument("--embedding-cache", type=Path, default=ROOT / paths.EMBEDDING_CACHE)
    parser.add_argument("--keep", type=Path, help="build the project copy here and leave it")
    parser.add_argument("--no-prune", action="store_true", help="do not run `retrieval-bench lock prune` first")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if 0 not in sizes:
        sys.exit("panel_overhead: --sizes needs 0 (the fixed part every per-system figure subtracts)")
    folder = args.keep or Path(tempfile.mkdtemp(prefix="panel-overhead-"))
    project = folder / "project"
    env = project_env(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        DVC_NO_ANALYTICS="1",
        PYTHONPATH=f"{project / 'src'}:{project}",
        **thread_env(1),
    )
    print(machine(1), flush=True)
    try:
        prepare(project, env, args.embedding_cache.resolve())
        dvc = [sys.executable, "-m", "dvc", "repro"]
        prune = [sys.executable, "-m", "retrieval_bench.cli", "lock", "prune"]
        started = time.monotonic()
        warm_cpu, _ = run(dvc, project, env)
        print(
            f"warm-up dvc repro (1 system): {warm_cpu:.1f} CPU-s, {time.monotonic() - started:.0f} s wall", flush=True
        )
        cpu: dict[int, float] = {}
        for n in sizes:
            set_panel(project, panel_of(n))
            shutil.rmtree(project / ".dvc" / "cache" / "runs", ignore_errors=True)
            pruning = 0.0 if args.no_prune else run(prune, project, env)[0]
            cpu[n] = pruning + run(dvc, project, env)[0]
            print(f"{n} systems: dvc repro {cpu[n]:.1f} CPU-s", flush=True)
        last = max(sizes)
        own_cpu, out = run([sys.executable, "-c", OWN_WORK, f"p{last}-0"], project, env) if last else (0.0, "{}")
        own = json.loads(out.strip().splitlines()[-1])
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    own_total = sum(own.values())
    rows = []
    for n in sizes:
        if n == 0:
            continue
        per_system = (cpu[n] - cpu[0]) / n
        rows.append(
            {
                "systems": n,
                "repro_cpu_s": round(cpu[n], 2),
                "per_system_cpu_s": round(per_system, 2),
                "beyond_own_work_cpu_s": round(per_system - own_total, 2),
            }
        )
    print(
        f"\nfixed part (0 systems): {cpu[0]:.1f} CPU-s; one system's own work: retrieve {own.get('retrieve', 0):.2f} + score "
        f"{own.get('score', 0):.2f} = {own_total:.2f} CPU-s\n"
    )
    print("| systems | dvc repro (CPU-s) | per system (CPU-s) | per system beyond its own work (CPU-s) |")
    print("|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['systems']} | {row['repro_cpu_s']:.1f} | {row['per_system_cpu_s']:.2f} | {row['beyond_own_work_cpu_s']:.2f} |"
        )
    print(
        json.dumps(
            {"fixed_cpu_s": round(cpu[0], 2), "own_work_cpu_s": {k: round(v, 3) for k, v in own.items()}, "rows": rows}
        ),
        flush=True,
    )


if __name__ == "__main__":
    run_main(main)
