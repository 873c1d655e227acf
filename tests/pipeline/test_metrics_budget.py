"""Review stays readable: on the sample, `dvc metrics show` (and `dvc metrics diff main`) fits a
120-column terminal, a row per panel system of a few flat numbers: the metrics files dvc.yaml
declares are score's metrics/headlines/NAME.json; everything else is `retrieval-bench show`'s."""

from __future__ import annotations

import math
import shutil
import sys

import numpy as np
import pandas as pd
import yaml
from conftest import ROOT, run

from retrieval_bench.core import paths
from retrieval_bench.core.files import write_json
from retrieval_bench.core.params import load_all_params
from retrieval_bench.evaluation.panel.headline import system_headline
from retrieval_bench.evaluation.score.metrics import summary_names

MAX_KEYS = 4  # mrr, ndcg@C, recall@C, recall_budget@B


def flat(data, prefix: str = "") -> dict:
    """DVC's view of a metrics file: nested keys joined by '.', leaves only."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            out.update(flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: data}


def declared_metrics() -> list[str]:
    """The metrics files dvc.yaml declares, ${key} left as written."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    return [
        next(iter(entry)) if isinstance(entry, dict) else entry
        for stage in stages.values()
        for entry in stage.get("do", stage).get("metrics", [])
    ]


def sample_headlines() -> dict[str, dict]:
    """Each sample panel system's headline file as score writes it (the figures synthetic; the keys are the point)."""
    params = load_all_params(ROOT / "params.yaml")
    score = params["score"]
    table = pd.DataFrame({column: np.full(10, 0.123456) for _, column in summary_names(score["k"], score["budgets"])})
    return {paths.headline_of(system): system_headline(table) for system in params["panel"]}


def test_the_declared_metrics_are_each_systems_few_headline_numbers():
    """Observed: `dvc metrics show` on the sample was one row 1,132 columns wide (every system's
    numbers as columns of metrics/headline.json): now a row per system, a few flat numbers each."""
    assert declared_metrics() == [paths.PANEL_HEADLINES]  # a file per system: headline_of
    for path, data in sample_headlines().items():
        assert data == flat(data) and 0 < len(data) <= MAX_KEYS, path
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in data.values())


def test_dvc_metrics_show_fits_a_120_column_terminal_on_the_sample(tmp_path):
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    for path, data in sample_headlines().items():
        write_json(tmp_path / path, data)
    run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=tmp_path)
    shown = run([sys.executable, "-m", "dvc", "metrics", "show"], cwd=tmp_path).stdout.splitlines()
    assert len(shown) == 1 + len(sample_headlines()), shown
    assert max(map(len, shown)) <= 120, "\n".join(shown)
