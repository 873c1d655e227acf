"""Review stays readable: on the sample, `dvc metrics show` (and `dvc metrics diff main`) lists at
most 80 keys, every one a number. Counted as DVC flattens them, on the committed metrics files the
dvc.yaml declares; metrics/headline.json as the leaderboard stage writes it for params.yaml's panel."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import yaml
from conftest import ROOT

from retrieval_bench.core import paths
from retrieval_bench.core.params import load_all_params
from retrieval_bench.evaluation.panel.headline import headline
from retrieval_bench.evaluation.score.metrics import summary_names

MAX_KEYS = 80


def flat(data, prefix: str = "") -> dict:
    """DVC's view of a metrics file: nested keys joined by '.', leaves only."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            out.update(flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: data}


def declared_metrics() -> list[str]:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    declared = []
    for name, stage in stages.items():
        body = stage.get("do", stage)
        for entry in body.get("metrics", []):
            path = next(iter(entry)) if isinstance(entry, dict) else entry
            assert "${" not in path, f"{name}: a metrics file per panel system would grow with the panel: {path}"
            declared.append(path)
    return declared


def sample_headline() -> dict:
    """metrics/headline.json for the sample's panel (the figures synthetic; the keys are the point)."""
    params = load_all_params(ROOT / "params.yaml")
    score = params["score"]
    columns = {column: np.full(10, 0.5) for _, column in summary_names(score["k"], score["budgets"])}
    aligned = {system: pd.DataFrame(columns) for system in params["panel"]}
    reports = [json.loads((ROOT / path).read_text()) for path in (paths.GOLDENSET_REPORT, paths.JUDGE_REPORT)]
    available = {"available": True, "metrics": {"mrr": {"kendall_tau": {"value": 0.9}}}}
    return headline(aligned, *reports, available)


def test_the_declared_metrics_of_the_sample_are_few_and_numbers_only():
    declared = declared_metrics()
    assert paths.HEADLINE in declared and paths.LEADERBOARD not in declared
    keys = {}
    for path in declared:
        data = sample_headline() if path == paths.HEADLINE else json.loads((ROOT / path).read_text())
        keys.update({f"{path}:{key}": value for key, value in flat(data).items()})
    assert len(keys) <= MAX_KEYS, f"{len(keys)} keys: {sorted(keys)}"
    not_numbers = {
        key: value
        for key, value in keys.items()
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
    }
    assert not not_numbers


def test_a_committed_headline_holds_numbers_only():
    path = ROOT / paths.HEADLINE
    if not path.is_file():  # written by the next `dvc repro` of the leaderboard stage
        return
    values = flat(json.loads(path.read_text())).values()
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)
