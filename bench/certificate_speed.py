"""What the agreement certificate costs: CPU seconds of `panel_certificate` for one synthetic set at
4 and 8 systems on the bundled sample (issue 45: at most 1 CPU-s at 8 systems).

    python bench/certificate_speed.py [--rounds 3] [--seed 0]

Reads the committed run (metrics/panel/<system>/per_question.csv of params.yaml's 8-system panel,
data/goldenset.jsonl) and makes a synthetic set of it: half the single-passage hand-written
questions, drawn with --seed, relabelled `generated` (in the tables and the golden rows, so the
style gap is computed too); the other questions stay the reference. Then times the certificate
(the leaderboard stage's call, the params' validity section) on the first 4 and on all 8 systems,
one thread (set OMP_NUM_THREADS=1 and the like before starting), --rounds times each, and prints
each round's CPU seconds (after one untimed warm-up call), their median and the verdict. The last line is the median at 8 systems.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from retrieval_bench.core import paths  # noqa: E402
from retrieval_bench.core.files import read_jsonl  # noqa: E402
from retrieval_bench.core.params import load_all_params  # noqa: E402
from retrieval_bench.evaluation.certificate.certify import panel_certificate  # noqa: E402
from retrieval_bench.evaluation.panel.leaderboard import scorable  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    params = load_all_params(ROOT / "params.yaml")
    systems = list(params["panel"])
    if not (ROOT / paths.GOLDENSET).is_file():  # a DVC output: not in a fresh clone until a repro
        raise SystemExit(f"error: {paths.GOLDENSET} is missing: run `make repro` (or `dvc repro`) first")
    golden = read_jsonl(ROOT / paths.GOLDENSET)
    tables = {system: pd.read_csv(ROOT / paths.per_question_of(system)) for system in systems}
    single = sorted(str(row["qid"]) for row in golden if row.get("kind") == "single")
    rng = np.random.default_rng(arguments.seed)
    generated = set(rng.choice(single, len(single) // 2, replace=False))
    for table in tables.values():
        table["question_set"] = np.where(table["qid"].astype(str).isin(generated), "generated", "hand-written")
    golden = [{**row, "question_set": "generated"} if str(row["qid"]) in generated else row for row in golden]
    aligned = scorable(tables)
    print(
        f"{len(generated)} generated questions, {len(single) - len(generated)} single-passage hand-written beside the rest"
    )
    median = 0.0
    for size in (4, 8):
        chosen = {system: aligned[system] for system in systems[:size]}
        seconds, verdict = [], None
        panel_certificate(chosen, golden=golden, validity=params["validity"])  # warm-up: imports, caches
        for _ in range(arguments.rounds):
            started = time.process_time()
            certificate = panel_certificate(chosen, golden=golden, validity=params["validity"])
            seconds.append(time.process_time() - started)
            verdict = certificate["sets"]["generated"]["verdict"]
        median = statistics.median(seconds)
        rounds = ", ".join(f"{value:.2f}" for value in seconds)
        print(f"{size} systems: {rounds} CPU-s (median {median:.2f}); verdict {verdict}")
    print(f"{median:.2f}")


if __name__ == "__main__":
    from common import run_main  # a bad argument or a missing extra: one line

    run_main(main)
