"""What each panel system is and what it cost, for the leaderboard a team decides with: its
chunking, embedder (model, max_seq_length), method and chunk count, and the costs measured in
its run on this machine: the embedding seconds per 1,000 chunks (embed_corpus's info.json; none
for a system that searches no vectors), the index size on disk and the median search time per
question (retrieve's run_info.json). Then the Pareto front of quality (mrr over the
compared questions) against those three costs (evaluation.panel.pareto)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from retrieval_bench.core import paths
from retrieval_bench.evaluation.panel.pareto import dominated_by, unmeasured

# The methods that search vectors (retrieval.methods.USES_VECTORS; tests/evaluation/test_panel_costs.py keeps
# the two equal): their embedding is part of their cost. A bm25 system embeds nothing (cost 0).
SEARCHES_VECTORS = {"dense", "hybrid", "ann", "store"}
COSTS = ("embed_seconds_per_1000", "index_mb", "search_ms_per_question")
PLOT_COLUMNS = (
    "system",
    "mrr",
    "ci_low",
    "ci_high",
    "search_ms_per_question",
    "embed_seconds_per_1000",
    "index_mb",
    "pareto",
)
MACHINE = "this machine"  # where every cost was measured: compare costs across machines at your peril


def searches_vectors(settings: dict) -> bool:
    method = settings["method"]
    return method in SEARCHES_VECTORS or (method == "rerank" and settings["rerank"]["first_stage"] in SEARCHES_VECTORS)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def system_row(system: str, settings: dict, embedder: dict, run_info: dict, embed_info: dict, timing: dict) -> dict:
    """One system's description and costs (None: not measured, e.g. an external run's search)."""
    vectors = searches_vectors(settings)
    index_bytes = run_info.get("index_bytes")
    return {
        "system": system,
        "chunking": settings["chunking"],
        "embedder": settings["embedder"],
        "model": embedder.get("model") if vectors else None,
        "max_seq_length": embedder.get("max_seq_length") if vectors else None,
        "method": run_info.get("method", settings["method"]),
        "n_chunks": run_info.get("n_chunks"),
        "searches_vectors": vectors,
        "embed_seconds_per_1000": embed_info.get("seconds_per_1000") if vectors else 0.0,
        "index_bytes": index_bytes,
        "index_mb": None if index_bytes is None else round(index_bytes / 1e6, 3),
        "search_ms_per_question": timing.get("search_ms_per_question"),
    }


def read_costs(params: dict, root: Path = Path(".")) -> dict[str, dict]:
    """Every panel system's row: its size from run_info.json, its measured times from the timing
    files of its search and of its chunking x embedder's embedding (paths.TIMINGS)."""
    rows = {}
    for system, settings in params["panel"].items():
        run_info = _read(root / paths.run_info_of(system))
        embed_info = _read(root / paths.embedding_info(settings["chunking"], settings["embedder"]))
        embedder = params.get("embedders", {}).get(settings["embedder"], {})
        timing = _read(root / paths.search_timing(system))
        rows[system] = system_row(system, settings, embedder, run_info, embed_info, timing)
    return rows


def with_pareto(rows: dict[str, dict], quality: dict[str, float]) -> dict[str, dict]:
    """The rows with quality (mrr), pareto (on the front), dominated_by and costs_measured."""
    points = {
        name: {"quality": quality.get(name), "costs": {cost: rows[name][cost] for cost in COSTS}} for name in rows
    }
    by = dominated_by(points)
    missing = set(unmeasured(points))
    return {
        name: {
            **row,
            "mrr": quality.get(name),
            "pareto": not by[name],
            "dominated_by": by[name],
            "costs_measured": name not in missing,
        }
        for name, row in rows.items()
    }


def _value(value, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def embedder_text(row: dict) -> str:
    if not row["searches_vectors"]:
        return "none"
    length = row["max_seq_length"] if row["max_seq_length"] is not None else "model's own"
    return f"{row['embedder']} ({row['model']}, max_seq_length {length})"


def cost_lines(rows: dict[str, dict]) -> list[str]:
    """The markdown cost table with the Pareto mark (rows as with_pareto makes them)."""
    lines = [
        f"### Systems and their costs (measured on {MACHINE})",
        "",
        "| system | chunking | embedder | method | n_chunks | mrr | embedding s / 1,000 chunks | index MB "
        "| search ms / question | Pareto front |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, row in rows.items():
        embed = _value(row["embed_seconds_per_1000"], 2) if row["searches_vectors"] else "none"
        front = "yes" if row["pareto"] else f"no (beaten by {', '.join(row['dominated_by'])})"
        if row["pareto"] and not row["costs_measured"]:
            front = "yes (a cost not measured)"
        lines.append(
            f"| {name} | {row['chunking']} | {embedder_text(row)} | {row['method']} | {_value(row['n_chunks'], 0)} "
            f"| {_value(row['mrr'], 3)} | {embed} | {_value(row['index_mb'], 2)} "
            f"| {_value(row['search_ms_per_question'], 3)} | {front} |"
        )
    lines += [
        "",
        "Pareto front: no other system has mrr >= and every cost <= with one strict; a system with a cost "
        "not measured (n/a, e.g. an external run) is never dominated. Costs are this machine's: the warm "
        "encoder's seconds per 1,000 chunks, the searched index's size on disk (MB = 10^6 bytes), the median "
        "search time per question.",
    ]
    return lines


def plot_rows(rows: dict[str, dict], mrr: dict[str, dict]) -> list[dict]:
    """metrics/plots/quality_vs_cost.csv: mrr with its interval against each cost, per system."""
    return [
        {
            "system": name,
            "mrr": mrr[name]["mean"],
            "ci_low": mrr[name]["ci_low"],
            "ci_high": mrr[name]["ci_high"],
            "search_ms_per_question": row["search_ms_per_question"],
            "embed_seconds_per_1000": row["embed_seconds_per_1000"],
            "index_mb": row["index_mb"],
            "pareto": row["pareto"],
        }
        for name, row in rows.items()
    ]
