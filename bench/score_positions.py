"""Where judged chunks stand in a large run: CPU seconds of `core.run_table.positions` (a join of the
judged pairs, then a comparison per question) against the per-row reference it replaced (a dict of
every run row, as score did until 2026-12-06: 22 s silent on 4 million rows), on the same run.

    python bench/score_positions.py [--questions 4000] [--depth 1000] [--rounds 3]

A synthetic run: --questions questions of --depth rows each, scores rounded to 3 digits (ties),
chunk ids from a million; each question judges two of its retrieved chunks and one absent. Both
implementations run interleaved, --rounds times, one thread; the positions must be equal. Prints
each round's CPU seconds; the last line is the median ratio (reference / positions).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from retrieval_bench.core.run_table import Positions, positions  # noqa: E402


def per_row_reference(run: pd.DataFrame, qids: list[str], judged_chunk_ids: list[list[str]]) -> list[Positions]:
    """The definition, row by row: each judged chunk's score, then the run's scores above and equal to it."""
    by_qid = {qid: group for qid, group in run.groupby("qid", sort=False)}
    placed = []
    for qid, judged in zip(qids, judged_chunk_ids, strict=True):
        group = by_qid.get(qid)
        score_of = {} if group is None else dict(zip(group["chunk_id"], group["score"], strict=True))
        scores = np.array([]) if group is None else group["score"].to_numpy()
        better = [math.inf if c not in score_of else float(np.sum(scores > score_of[c])) for c in judged]
        tied = [1 if c not in score_of else int(np.sum(scores == score_of[c])) for c in judged]
        placed.append(Positions(np.array(better, dtype=np.float64), np.array(tied, dtype=np.int64)))
    return placed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=4000)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    if arguments.questions < 1 or arguments.depth < 2 or arguments.rounds < 1:
        raise SystemExit(
            "error: --questions and --rounds at least 1, --depth at least 2 (two judged chunks a question)"
        )
    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(arguments.questions)]
    n = arguments.questions * arguments.depth
    run = pd.DataFrame(
        {
            "qid": np.repeat(qids, arguments.depth),
            "chunk_id": [f"c{j}" for j in rng.integers(0, 1_000_000, n)],
            "score": np.round(rng.random(n), 3),
        }
    ).drop_duplicates(["qid", "chunk_id"])
    starts = np.flatnonzero(np.r_[True, run["qid"].to_numpy()[1:] != run["qid"].to_numpy()[:-1]])
    ids = run["chunk_id"].to_numpy()
    judged = [[str(ids[start]), str(ids[start + 1]), "absent"] for start in starts]
    print(f"{len(run):,} run rows, {len(qids):,} questions, 3 judged chunks each")
    ratios = []
    for round_number in range(1, arguments.rounds + 1):
        timed = {}
        for name, function in (("reference", per_row_reference), ("positions", positions)):
            start = time.process_time()
            found = function(run, qids, judged)
            timed[name] = (time.process_time() - start, found)
        equal = all(
            np.array_equal(a.better, b.better) and np.array_equal(a.tied, b.tied)
            for a, b in zip(timed["reference"][1], timed["positions"][1], strict=True)
        )
        if not equal:
            raise SystemExit("error: positions differ from the per-row reference")
        ratios.append(timed["reference"][0] / timed["positions"][0])
        print(
            f"round {round_number}: reference {timed['reference'][0]:.2f} CPU-s, positions "
            f"{timed['positions'][0]:.2f} CPU-s, equal"
        )
    print(f"median ratio (reference / positions): {statistics.median(ratios):.1f}x")


if __name__ == "__main__":
    main()
