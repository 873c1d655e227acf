"""The runs `retrieval-bench compare` reads: a panel system's metrics/panel/SYSTEM/per_question.csv
at a git revision, a DVC experiment or the working tree (metrics/per_question.csv for the default
system at revisions from before the panel held every system), and the golden set and gold texts of the compared runs."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params_sections import parse_yaml, read_yaml_file
from retrieval_bench.core.paths import (
    CHUNKS,
    DEFAULT,
    DOCUMENTS,
    DVC_LOCK,
    GOLDENSET,
    PARAMS,
    at_revision,
    per_question_of,
    unknown_system_hint,
)
from retrieval_bench.core.revisions import WORKSPACE, git_show, read_artefact, resolve_revision
from retrieval_bench.evaluation.score.per_question import read_per_question


def read_run(rev: str, cwd: Path, system: str = DEFAULT) -> tuple[pd.DataFrame, str | None]:
    """Panel system `system`'s per-question results at a revision/experiment (or the working tree)
    and its commit."""
    table = per_question_of(system)
    if rev == WORKSPACE:
        path = cwd / table
        if not path.is_file():
            hint = unknown_system_hint(system, cwd)
            raise InputError(f"{table} not found in the workspace{hint or '; run `dvc repro` first'}")
        return read_per_question(path, f"{WORKSPACE}:{table}"), None
    commit = resolve_revision(rev, cwd)
    for revision_path in at_revision(per_question_of, system):
        committed = git_show(revision_path, commit, cwd)
        if committed is not None:
            return read_per_question(committed, f"{rev}:{revision_path}"), commit
    hint = unknown_system_hint(system, cwd)
    raise InputError(f"{rev}: no {table} committed there{hint or ' (run `dvc repro` and commit its outputs)'}")


def question_context(cwd: Path, commits: list[str | None]) -> tuple[list[dict] | None, dict[str, str] | None]:
    """The golden set and each question's gold text (the evidence span of a span-anchored question,
    else its gold chunk) as they were in the compared runs (`commits`, None = the working tree;
    the later run wins where both know a question); None where unavailable."""
    golden: list[dict] = []
    gold_text: dict[str, str] = {}
    for commit in commits:
        try:
            rows, texts = _context_at(cwd, commit)
        except Exception:  # a missing column or a broken file only costs the context lines
            continue
        golden += rows
        gold_text.update(texts)
    return golden or None, gold_text or None


def _flat_params(node: object, prefix: str = "") -> dict[str, object]:
    if isinstance(node, dict) and node:
        return {
            key: value for name, child in node.items() for key, value in _flat_params(child, f"{prefix}{name}.").items()
        }
    return {prefix.rstrip("."): node}


def params_changed(cwd: Path, a_commit: str | None, b_commit: str | None) -> list[dict] | None:
    """The params.yaml keys whose values differ between the compared runs (dotted names, with
    each side's value; a key only one side has is None on the other), as `dvc params diff` would
    list them; None where either side's params.yaml cannot be read (no git, not committed there)."""
    sides = []
    for commit in (a_commit, b_commit):
        raw = read_artefact(PARAMS, commit, cwd)
        try:
            sides.append(_flat_params(parse_yaml(raw, PARAMS) or {}) if raw is not None else None)
        except InputError:
            sides.append(None)
    a, b = sides
    if a is None or b is None:
        return None
    return [
        {"key": key, "a": a.get(key), "b": b.get(key)}
        for key in sorted(a.keys() | b.keys())
        if a.get(key) != b.get(key)
    ]


def stale_workspace_params(cwd: Path) -> list[str]:
    """The params.yaml keys (dotted, to the leaf) whose values differ from those dvc.lock recorded
    for a stage: the workspace's outputs were computed with other params than the file holds (an
    edit not yet run with `dvc repro`, which compare would otherwise credit to the edit). Read as
    params_changed reads them; [] where either file cannot be read. The entries of stages dvc.yaml
    no longer defines (a chunking taken out of params.yaml: DVC keeps them) say nothing of it."""
    try:
        lock, params = (read_yaml_file(cwd / name) for name in (DVC_LOCK, PARAMS))
    except InputError:
        return []
    try:
        pipeline = read_yaml_file(cwd / "dvc.yaml")
    except InputError:
        pipeline = None  # every entry counts
    if not isinstance(lock, dict) or not isinstance(params, dict) or not isinstance(lock.get("stages"), dict):
        return []
    held = _flat_params(params)
    stale = set()
    for name, stage in lock["stages"].items():
        if not _defined(str(name), pipeline, params):
            continue
        recorded = (stage.get("params") or {}).get(PARAMS) if isinstance(stage, dict) else None
        for key, value in (recorded or {}).items():  # a key DVC recorded: a section, or one dotted key
            then = _flat_params(value, f"{key}.")
            # both ways: a key added under a recorded section (panel.default.method) is an edit too
            now = {name: leaf for name, leaf in held.items() if name == key or name.startswith(f"{key}.")}
            stale |= {name for name in then.keys() | now.keys() if then.get(name, _MISSING) != now.get(name, _MISSING)}
    return sorted(stale)


_MISSING = object()


def stale_params_warning(cwd: Path) -> str | None:
    """What compare and show say when the workspace's outputs were computed with other params than
    params.yaml holds (stale_workspace_params); None when they were not."""
    stale = stale_workspace_params(cwd)
    if not stale:
        return None
    shown = ", ".join(stale[:5]) + (f" and {len(stale) - 5} more" if len(stale) > 5 else "")
    return (
        f"the workspace's outputs were not computed with params.yaml as it is ({shown} differ from dvc.lock): "
        "run `dvc repro` first; these figures are the last run's, not the edit's"
    )


def _defined(lock_name: str, pipeline: object, params: dict) -> bool:
    """Whether dvc.yaml still defines the stage dvc.lock names `lock_name` ("chunk@c400": a foreach
    item, over a params section as this project's are, or a list); True where it cannot tell."""
    stages = pipeline.get("stages") if isinstance(pipeline, dict) else None
    if not isinstance(stages, dict):
        return True
    stage_name, at, item = lock_name.partition("@")
    stage = stages.get(stage_name)
    if not isinstance(stage, dict):
        return False
    if not at:
        return "foreach" not in stage and "matrix" not in stage
    foreach = stage.get("foreach")
    section = re.fullmatch(r"\$\{\s*([\w.-]+)\s*\}", foreach) if isinstance(foreach, str) else None
    items = params.get(section.group(1)) if section else foreach
    if isinstance(items, dict):  # a section's keys
        return item in map(str, items)
    if isinstance(items, list):  # as DVC names them: by position once any item is a mapping or list
        composite = any(isinstance(value, dict | list) for value in items)
        return item in {str(position) if composite else str(value) for position, value in enumerate(items)}
    return True  # a matrix, an interpolation of another kind: as DVC expands it


def _context_at(cwd: Path, commit: str | None) -> tuple[list[dict], dict[str, str]]:
    raw = read_artefact(GOLDENSET, commit, cwd)
    if raw is None:
        return [], {}
    golden = [json.loads(line) for line in raw.decode("utf-8").split("\n") if line.strip()]
    gold_text: dict[str, str] = {}
    spans = [row for row in golden if row.get("doc_id") is not None and row.get("start") is not None]
    documents_raw = read_artefact(DOCUMENTS, commit, cwd) if spans else None
    if documents_raw is not None:
        documents = pd.read_parquet(io.BytesIO(documents_raw), columns=["doc_id", "text"])
        texts = dict(zip(documents["doc_id"].astype(str), documents["text"], strict=True))
        for row in spans:
            if str(row["doc_id"]) in texts:
                gold_text[str(row["qid"])] = texts[str(row["doc_id"])][int(row["start"]) : int(row["end"])]
    chunks_raw = read_artefact(CHUNKS, commit, cwd) if len(gold_text) < len(golden) else None
    if chunks_raw is not None:
        chunks = pd.read_parquet(io.BytesIO(chunks_raw), columns=["chunk_id", "text"])
        chunk_text = dict(zip(chunks["chunk_id"].astype(str), chunks["text"].astype(str), strict=True))
        for row in golden:
            qid, gold = str(row.get("qid")), str(row.get("gold_chunk_id"))
            if qid not in gold_text and gold in chunk_text:
                gold_text[qid] = chunk_text[gold]
    return golden, gold_text
