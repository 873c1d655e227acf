"""What each panel system is and what it costs, for the leaderboard a team decides with: its
chunking, embedder (model, max_seq_length), method and chunk count, its index size on disk
(retrieve's run_info.json) and two measured costs, each the median of its repeats in wall time,
with their range (the noise) and the CPU time beside: the search milliseconds per question,
timed by the leaderboard stage in one process, every system interleaved with the others and
repeated (core.timing), with the machine's load; and the embedding seconds per 1,000 chunks of
its chunking x embedder (none for a system that searches no vectors), measured by that pair's
embed stage as it embedded them (embedding.embed_cost: once per embedding, not per leaderboard).
Then the Pareto front of quality (mrr over the compared questions) against the three costs, cost
differences within the noise not told apart (evaluation.panel.pareto)."""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from retrieval_bench.core import paths
from retrieval_bench.core.params_panel import reads_stored_vectors
from retrieval_bench.core.timing import interleaved, machine_load, summary
from retrieval_bench.corpus.chunk import takes_source_chunks
from retrieval_bench.evaluation.panel.pareto import dominated_by, unmeasured
from retrieval_bench.retrieval.inputs import questions_and_corpus
from retrieval_bench.retrieval.methods import needs_vectors, search_task
from retrieval_bench.retrieval.settings import RetrievalSettings

MEASURED = ("embed_seconds_per_1000", "search_ms_per_question")  # timed: a median with its range
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


def _embeds(params: dict, settings: dict) -> bool:
    """Whether the system's corpus vectors were embedded here (not read from a store: not measured)."""
    searches_vectors = needs_vectors(RetrievalSettings.from_params(settings))
    return searches_vectors and not reads_stored_vectors(params, settings["chunking"], settings["embedder"])


def measure(params: dict, root: Path = Path(".")) -> dict:
    """Every panel system's search timed here, all together in params costs.rounds rounds
    (core.timing.interleaved) on the saved vectors and indexes, and the embedding cost of every
    chunking x embedder a vector system uses, as its embed stage measured it (embedding.embed_cost:
    data/costs/embed/<chunking>/<embedder>.json): {repeats, embed_texts, load_before,
    load_after, search: {system: {wall, cpu}}, embed: {"chunking/embedder": {wall, cpu, ...}}},
    each {median, low, high} in ms per question (search) or s per 1,000 chunks (embed)."""
    tasks, loaded, repeats = {}, {}, params["costs"]["rounds"]
    before = machine_load()
    with tempfile.TemporaryDirectory() as scratch:
        for system, settings in params["panel"].items():
            retrieval = RetrievalSettings.from_params(settings, f"panel.{system}")
            inputs = (settings["chunking"], settings["embedder"], needs_vectors(retrieval))  # loaded once, shared
            if inputs not in loaded:
                loaded[inputs] = questions_and_corpus(retrieval, settings["chunking"], settings["embedder"])
            task = search_task(retrieval, *loaded[inputs], Path(scratch))
            if task is not None:
                tasks[system] = task
        timed = interleaved(tasks, repeats)
    return {
        "repeats": repeats,
        "embed_texts": params["costs"]["embed_texts"],
        "load_before": before,
        "load_after": machine_load(),
        "search": {
            system: {clock: summary(values, 1000) for clock, values in figures.items()}
            for system, figures in timed.items()
        },
        "embed": embed_costs(params, root),
    }


def embed_costs(params: dict, root: Path = Path(".")) -> dict[str, dict]:
    """{"chunking/embedder": its embed stage's cost} of every pair a vector system embeds here, read
    once per pair. Two pairs that embed alike (c400 and a load.chunking of 400/50) get one figure:
    each was timed by its own stage, at another time and load (80 against 15 s per 1,000 chunks
    made "5.3x cheaper to embed" of one system twice)."""
    embed: dict[str, dict] = {}
    alike: dict[str, str] = {}  # what a pair embeds -> the first pair that embeds it
    given = _source_chunks(root)
    for settings in params["panel"].values():
        pair = f"{settings['chunking']}/{settings['embedder']}"
        if pair in embed or not _embeds(params, settings):
            continue
        twin = alike.setdefault(_embeds_alike(params, settings, given), pair)
        own = twin == pair
        embed[pair] = (
            _read(root / paths.embed_cost_of(settings["chunking"], settings["embedder"])) if own else embed[twin]
        )
    return {pair: cost for pair, cost in embed.items() if cost}


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


@dataclass(frozen=True)
class Timings:
    """One system's timings, measure's figures ({wall, cpu}: {median, low, high}; {} when not
    measured): its search, and the embedding of its chunking x embedder."""

    search: dict
    embed: dict


def system_row(
    system: str, settings: dict, embedder: dict, run_info: dict, timings: Timings, *, chunk_chars: int | None
) -> dict:
    """One system's description and costs (None: not measured, e.g. an external run's search)."""
    # a system that searches no vectors embeds nothing: cost 0
    vectors = needs_vectors(RetrievalSettings.from_params(settings))
    index_bytes = run_info.get("index_bytes")
    search = timings.search
    embed = timings.embed if vectors else {"wall": {"median": 0.0, "low": 0.0, "high": 0.0}, "cpu": {"median": 0.0}}
    row = {
        "system": system,
        "chunking": settings["chunking"],
        "chunk_chars": chunk_chars,
        "embedder": settings["embedder"],
        "model": embedder.get("model") if vectors else None,
        "max_seq_length": embedder.get("max_seq_length") if vectors else None,
        "method": run_info.get("method", settings["method"]),
        "n_chunks": run_info.get("n_chunks"),
        "searches_vectors": vectors,
        "index_bytes": index_bytes,
        "index_mb": None if index_bytes is None else round(index_bytes / 1e6, 3),
    }
    for cost, timing in zip(MEASURED, (embed, search), strict=True):
        wall = timing.get("wall", {})
        row[cost] = wall.get("median")
        row[f"{cost}_range"] = [wall["low"], wall["high"]] if wall else None
        row[f"{cost}_cpu"] = timing.get("cpu", {}).get("median")
    return row


def cost_rows(params: dict, measured: dict, root: Path = Path(".")) -> dict[str, dict]:
    """Every panel system's row: its size from its run_info.json, its times from `measured` (measure)."""
    rows = {}
    given = _source_chunks(root)
    for system, settings in params["panel"].items():
        run_info = _read(root / paths.run_info_of(system))
        embedder = params.get("embedders", {}).get(settings["embedder"], {})
        search = measured.get("search", {}).get(system, {})
        embed = measured.get("embed", {}).get(f"{settings['chunking']}/{settings['embedder']}", {})
        # the default chunking of ready chunks, BEIR or a store is the source's own: load.chunking cut nothing
        own = takes_source_chunks(settings["chunking"], given)
        chars = None if own else params.get("chunkings", {}).get(settings["chunking"], {}).get("chars")
        rows[system] = system_row(system, settings, embedder, run_info, Timings(search, embed), chunk_chars=chars)
    return rows


def _embeds_alike(params: dict, settings: dict, given: int) -> str:
    """What a system's chunking x embedder embeds, as a key: the chunking's resolved settings (the
    source's own chunks for the default chunking of ready chunks) and the embedder's."""
    chunking, embedder = settings["chunking"], settings["embedder"]
    chunks = "source" if takes_source_chunks(chunking, given) else params["chunkings"][chunking]
    return json.dumps([chunks, params["embedders"][embedder]], sort_keys=True, default=str)


def _source_chunks(root: Path) -> int:
    """How many chunks of its own the source gave load_chunks (data/source_chunks.parquet's rows)."""
    path = root / paths.SOURCE_CHUNKS
    return pq.ParquetFile(path).metadata.num_rows if path.is_file() else 0


def cost_point(row: dict) -> dict:
    """A row's costs for evaluation.panel.pareto: the measured ones as their (low, high) range."""
    return {cost: tuple(row[f"{cost}_range"]) if row.get(f"{cost}_range") else row[cost] for cost in COSTS}


def with_pareto(rows: dict[str, dict], quality: dict[str, float]) -> dict[str, dict]:
    """The rows with quality (mrr), pareto (on the front), dominated_by and costs_measured."""
    points = {name: {"quality": quality.get(name), "costs": cost_point(rows[name])} for name in rows}
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


def timed_text(row: dict, cost: str, digits: int) -> str:
    """A measured cost: its median [low, high] over the repeats, or n/a."""
    if row[cost] is None:
        return "n/a"
    low, high = row[f"{cost}_range"]
    return f"{row[cost]:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def embedder_text(row: dict) -> str:
    if not row["searches_vectors"]:
        return "none"
    length = row["max_seq_length"] if row["max_seq_length"] is not None else "model's own"
    return f"{row['embedder']} ({row['model']}, max_seq_length {length})"


def load_text(measured: dict) -> str:
    """How the costs were measured (measure's repeats and load), in words."""
    before, after = measured["load_before"], measured["load_after"]
    if not measured["repeats"]:
        return "not measured"
    return (
        f"search in {measured['repeats']} interleaved repeats on {before['cpus']} CPUs, load average "
        f"{before['load_1m']:.2f} before, {after['load_1m']:.2f} after (1 min); embedding by each embed stage"
    )


def front_text(row: dict) -> str:
    if not row["pareto"]:
        return f"no (beaten by {', '.join(row['dominated_by'])})"
    return "yes" if row["costs_measured"] else "yes (a cost not measured)"


PARETO_RULE = (
    "Pareto front: no other system has mrr >= and no cost higher beyond noise, with a higher mrr or a cost "
    "lower beyond noise; two measured costs are within noise when the ranges [low, high] of their repeats "
    "overlap. A system with a cost not measured (n/a, e.g. an external run) is never dominated."
)


def cost_lines(rows: dict[str, dict], conditions: str) -> list[str]:
    """metrics/costs.md: the cost table with the Pareto mark (rows as with_pareto makes them);
    `conditions`: load_text's."""
    lines = [
        f"### Systems and their costs (measured on {MACHINE}: {conditions})",
        "",
        "| system | chunking | embedder | method | n_chunks | mrr | embedding s / 1,000 chunks [range] | CPU s "
        "| index MB | search ms / question [range] | CPU ms | Pareto front |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, row in rows.items():
        embed = timed_text(row, "embed_seconds_per_1000", 2) if row["searches_vectors"] else "none"
        lines.append(
            f"| {name} | {row['chunking']} | {embedder_text(row)} | {row['method']} | {_value(row['n_chunks'], 0)} "
            f"| {_value(row['mrr'], 3)} | {embed} | {_value(row['embed_seconds_per_1000_cpu'], 2)} "
            f"| {_value(row['index_mb'], 2)} | {timed_text(row, 'search_ms_per_question', 3)} "
            f"| {_value(row['search_ms_per_question_cpu'], 3)} | {front_text(row)} |"
        )
    lines += [
        "",
        f"{PARETO_RULE} Costs are this machine's, each the median of the repeats in wall time [its range], "
        "CPU time (this process, every thread) beside: the warm encoder's seconds per 1,000 chunks, measured by "
        "the embed stage of the system's chunking and embedder as it embedded them (its batches dealt into "
        "costs.rounds repeats, else a timed sample: data/costs/embed/ says which, when and at what load; timed apart "
        "from the other pairs, so a load that changed between them shows), the searched index's size on disk "
        "(MB = 10^6 bytes), the search time per question (every system timed together).",
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
