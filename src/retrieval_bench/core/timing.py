"""Costs measured so that systems compare: every task timed in one process, interleaved and
repeated. Each task runs once untimed (warm-up: loads, caches, kernels), then `repeats` rounds (the
leaderboard's: params costs.rounds) each run every task once, the order rotated by one per round
(no task always first after another); a task's cost per repeat is its wall and its CPU seconds
(this process, every thread) per unit of work. A load burst then lands on every system alike
rather than on whichever ran during it, and the spread of a task's repeats is the noise its cost
is read with (evaluation.panel.pareto)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable


def interleaved(
    tasks: dict[str, Callable[[], int]], repeats: int, after: Callable[[], object] = lambda: None
) -> dict[str, dict[str, list[float]]]:
    """{task: {"wall": [...], "cpu": [...]}}: seconds per unit (each call returns its units of
    work, e.g. questions searched), one value per round, in round order; `after` runs after each
    call, warm-ups included, outside the clocks (a progress bar's step)."""
    names = list(tasks)
    out: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in names}
    if not names:  # nothing to time (a panel of run files and external retrievers alone)
        return out
    for name in names:
        tasks[name]()
        after()
    for round_ in range(repeats):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            wall, cpu = time.perf_counter(), time.process_time()
            units = max(tasks[name](), 1)  # a task with no work (no question) is timed per call
            out[name]["wall"].append((time.perf_counter() - wall) / units)
            out[name]["cpu"].append((time.process_time() - cpu) / units)
            after()
    return out


def summary(values: list[float], scale: float = 1.0, digits: int = 4) -> dict[str, float]:
    """{median, low, high} of `values` times `scale`, rounded: the figure and its noise (the range of the repeats)."""
    scaled = [value * scale for value in values]
    return {
        "median": round(statistics.median(scaled), digits),
        "low": round(min(scaled), digits),
        "high": round(max(scaled), digits),
    }


def machine_load() -> dict[str, float | int | None]:
    """The 1-, 5- and 15-minute load averages and the CPU count: how busy the machine was."""
    one, five, fifteen = os.getloadavg()
    return {"load_1m": round(one, 2), "load_5m": round(five, 2), "load_15m": round(fifteen, 2), "cpus": os.cpu_count()}
