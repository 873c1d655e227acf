"""`retrieval-bench show`: the panel's decision table, then a panel system's headline metrics (`default`, or
--system), with the change against the last committed run, and the golden set's health; what `make repro` prints at the end."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import parse_json, read_text
from retrieval_bench.core.params import load_params
from retrieval_bench.core.question_sets import ALL
from retrieval_bench.core.revisions import git_show, resolve_revision
from retrieval_bench.corpus.source_stamp import edited_since_stamped
from retrieval_bench.evaluation.certificate.certify import certificate_summary
from retrieval_bench.evaluation.compare.runs import stale_params_warning
from retrieval_bench.evaluation.panel.leaderboard import left_out_lines, set_title
from retrieval_bench.evaluation.panel.reviewed import show_lines
from retrieval_bench.evaluation.panel.reweighted import headline_entry, weights_text
from retrieval_bench.evaluation.score.per_question import HEADLINE_CUTOFF, headline_column

HEADLINE = ["mrr", "ndcg@10"]
COUNTS = ["n_questions", "n_chunks", "n_questions_without_relevant_chunk", "n_questions_judged_tied"]
HEALTH = ["n_questions", "n_handwritten", "n_generated", "echo_rate", "rejected"]


def committed(path: str, revision: str, cwd: Path) -> dict | None:
    """A metrics file as committed at `revision`; None outside git (or without git) or where it is
    absent; one committed unreadable (a merge conflict) is an InputError naming it, not "nothing
    committed"."""
    shown = git_show(path, revision, cwd)
    if shown is None:
        return None
    try:
        return json.loads(shown)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{revision}:{path}: committed, but not valid JSON ({error}); commit a good one") from None


def _number(value) -> str:
    if isinstance(value, bool) or value is None:
        return "n/a" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, float):  # a hand-edited file's "0.5": shown as written, not a traceback
        return repr(value)
    return "n/a" if math.isnan(value) else f"{value:.4f}"


def read_report(path: Path) -> dict:
    """A JSON report the pipeline wrote; one that is not UTF-8 JSON holding an object (a merge
    conflict, a hand edit) is an InputError naming it."""
    try:
        report = parse_json(read_text(path), path)
    except InputError as error:
        raise InputError(
            f"{error}; rerun the stage that writes it (`dvc repro`) or restore it (`git checkout`)"
        ) from None
    if not isinstance(report, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(report).__name__}; rerun `dvc repro`")
    return report


def table(current: dict, before: dict | None, names: list[str]) -> list[str]:
    """Rows `name  value  (change)` for the names present in `current`."""
    rows = []
    for name in names:
        if name not in current:
            continue
        change = ""
        if (
            before is not None
            and isinstance(before.get(name), (int, float))
            and isinstance(current[name], (int, float))
        ):
            delta = current[name] - before[name]
            change = (
                "  (unchanged)"
                if abs(delta) < 1e-12
                else f"  ({delta:+.4f})"
                if isinstance(delta, float)
                else f"  ({delta:+d})"
            )
        rows.append(f"  {name:<38}{_number(current[name]):>10}{change}")
    return rows


def render(metrics: dict, before: dict | None, health: dict | None, revision: str) -> str:
    recalls = sorted((name for name in metrics if name.startswith("recall@")), key=lambda n: int(n.split("@")[1]))
    against = f"change against {revision}" if before is not None else "nothing committed to compare with"
    out = [f"retrieval-bench: this run ({against})", *table(metrics, before, HEADLINE + recalls + COUNTS)]
    for kind, figures in (metrics.get("by_kind") or {}).items():
        out += [f"kind {kind}:", *table(figures, (before or {}).get("by_kind", {}).get(kind), list(figures))]
    if health is not None:
        out += ["golden set:", *table(health, None, HEALTH), *mix_lines(health)]
    return "\n".join(out) + "\n"


def mix_lines(health: dict) -> list[str]:
    """Each question set's mix of kinds (metrics/goldenset.json's mix_by_question_set), a line each,
    and with generate.kind_classifier llm how many kinds the LLM told."""
    mixes, told = health.get("mix_by_question_set") or {}, health.get("kind_classifier")
    lines = ["  mix of kinds:"] * bool(mixes) + [
        f"    {name}: " + ", ".join(f"{kind} {share:.0%}" for kind, share in shares.items())
        for name, shares in mixes.items()
    ]
    if told:  # generate.kind_classifier llm: how many kinds the LLM told, and how many it changed
        changed = sum(told["changed"].values())
        lines.append(
            f"    kinds told by the LLM: {told['classified']} of {told['asked']} ({changed} changed from the rules)"
        )
    return lines


LEADERBOARD_METRICS = ["mrr", "ndcg@10", "recall@10"]
CELL = 30  # "0.123 [0.100, 0.150] (best)" and a gap


def leaderboard_lines(board: dict) -> list[str]:
    """The panel's leaderboard on its headline (score.weights real-mix: all questions reweighted to the
    real mix; else its headline question set, the reference when there is one, else all questions): each system's mean [CI] on the headline metrics, * where it differs
    significantly from the best (Holm)."""
    headline_set = board.get("headline_set", ALL)
    if not board.get("systems") or not (entry := headline_entry(board)):
        return []
    names = [name for name in LEADERBOARD_METRICS if name in entry["metrics"]]
    width = max(len(system) for system in board["systems"]) + 2
    on = "" if headline_set == ALL else f" of {set_title(board, headline_set)}"
    if "reweighted" in board:
        on = f", {weights_text(board['reweighted'])}"
    out = [
        f"panel leaderboard ({entry['n_questions']} questions{on}; {paths.LEADERBOARD_TABLE} has every question set and metric):",
        "  " + " " * width + "".join(f"{name:<{CELL}}" for name in names),
    ]
    for system in board["systems"]:
        cells = []
        for name in names:
            ranked = entry["metrics"][name]
            row = ranked["systems"][system]
            mark = " (best)" if system == ranked["best"] else " *" if row.get("differs_from_best") else ""
            cells.append(f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]{mark}".ljust(CELL))
        out.append(f"  {system:<{width}}" + "".join(cells).rstrip())
    out.append(f"  *: significantly worse than the best ({board['correction']})")
    left = board.get("left_out")
    if left and left["n_left_out"]:
        out += [f"  {line.removeprefix('- ')}" for line in left_out_lines(left)]
    return out + kind_summary_lines(board)


def kind_summary_lines(board: dict) -> list[str]:
    """The leaderboard's kinds in a line per system each: a multi-evidence kind's complete@k and
    evidence_recall@k at the headline cut-off, an answerable kind's mrr, the unanswerable
    questions' abstention AUC and false-hit rate (metrics/leaderboard.md has every figure)."""
    out = []
    for kind, entry in (board.get("kinds") or {}).items():
        if kind == "unanswerable":
            out.append(f"kind unanswerable ({entry['n_questions']} questions): abstention AUC, false-hit rate")
            for system, row in entry["systems"].items():
                figures = (_number(row.get(name)) for name in ("abstention_auc", "false_hit_rate"))
                out.append(f"  {system}: " + ", ".join(figures))
            continue
        shown = (
            "mrr",
            *(headline_column(entry["metrics"], p, HEADLINE_CUTOFF) for p in ("complete", "evidence_recall")),
        )
        names = [n for n in entry["metrics"] if n in shown] or list(entry["metrics"])[:3]
        out.append(f"kind {kind} ({entry['n_questions']} questions): {', '.join(names)}")
        for system in board["systems"]:
            out.append(
                f"  {system}: " + ", ".join(f"{entry['metrics'][n]['systems'][system]['mean']:.3f}" for n in names)
            )
    return out


def decision_lines(text: str) -> list[str]:
    """metrics/decision.md's first screen: its line (the systems to consider) and its table."""
    if not text.strip():
        return []
    line, *rest = text.splitlines()
    table = [row for row in rest if row.startswith("|")]
    return [line.strip("*"), *table, f"({paths.DECISION}: how to read the table, and the rule behind the line)", ""]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument(
        "--against",
        help="git revision or DVC experiment to show the change against (default: HEAD, where there is one)",
    )
    parser.add_argument(
        "--system", default=paths.DEFAULT, help="the panel system whose scores are shown (default: %(default)s)"
    )
    parser.set_defaults(run=run)


def _edited_source(cwd: Path) -> str | None:
    """A warning when load.source's files changed since check_params stamped them: the figures below
    are of the corpus as it was (plain `dvc repro` does not see an edit inside the source)."""
    try:
        source = load_params("load", cwd / paths.PARAMS)["source"]
    except InputError:  # no params file, or a bad one: check_params says so on the next run
        return None
    if not edited_since_stamped(source, cwd / paths.SOURCE_DIGEST_MEMO):
        return None
    return (
        f"warning: load.source {source} changed since the last run stamped it: these figures are of the corpus "
        "as it was; run `make repro` (check_params first, then dvc repro)"
    )


def _stale_params(cwd: Path) -> str | None:
    """A warning when params.yaml was edited since the run (a system added, a method changed): the
    figures below are the last run's (compare says the same)."""
    stale = stale_params_warning(cwd)
    return f"warning: {stale}" if stale else None


def run(args: argparse.Namespace) -> int:
    cwd = Path.cwd()
    current = paths.metrics_of(args.system)
    if not (cwd / current).is_file():
        hint = paths.unknown_system_hint(args.system, cwd)
        raise InputError(f"{current} not found{hint or '; run `dvc repro` first'}")
    metrics = read_report(cwd / current)
    health = read_report(cwd / paths.GOLDENSET_REPORT) if (cwd / paths.GOLDENSET_REPORT).is_file() else None
    # HEAD by default, which a project not yet committed (or outside git) lacks: then no change is
    # shown. A revision the user names must exist: else "nothing committed" would hide a typo.
    against = "HEAD" if args.against is None else resolve_revision(args.against, cwd)
    shown = (committed(path, against, cwd) for path in paths.at_revision(paths.metrics_of, args.system))
    before = next((metrics_then for metrics_then in shown if metrics_then is not None), None)
    decision = cwd / paths.DECISION
    board, cert = (
        read_report(cwd / path) if (cwd / path).is_file() else {} for path in (paths.LEADERBOARD, paths.CERTIFICATE)
    )
    # Each report read as this version writes it; one of another shape (edited, or written by
    # another version) is one line naming it, before anything is printed, not a traceback midway.
    lines = [warning for warning in (_edited_source(cwd), _stale_params(cwd)) if warning]
    reading = paths.DECISION
    try:
        lines += decision_lines(decision.read_text(encoding="utf-8") if decision.is_file() else "")
        reading = f"{current} or {paths.GOLDENSET_REPORT}"
        lines += render(metrics, before, health, args.against or against).splitlines()
        reading = paths.LEADERBOARD
        lines += leaderboard_lines(board)
        if board.get("systems"):
            reading = paths.CERTIFICATE
            lines += certificate_summary(cert)
        reading = paths.LEADERBOARD
        lines += show_lines(board["reviews"]) if "reviews" in board else []  # people's reviews and PPI
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as error:
        raise InputError(
            f"{reading}: not a report as this version writes it ({type(error).__name__}: {error}); rerun `dvc repro`"
        ) from None
    if lines:
        print("\n".join(lines))
    return 0
