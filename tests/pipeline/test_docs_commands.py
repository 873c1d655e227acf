"""Documented DVC commands do what the docs say, run with the real DVC: the `dvc exp show` of
docs/how-to/experiments.md shows the headline metrics and the changed params, and `dvc exp run -S`
rewrites only the lines it sets in params.yaml."""

from __future__ import annotations

import difflib
import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import yaml
from conftest import ROOT, dvc, git, run

EXPERIMENTS_PAGE = ROOT / "docs" / "how-to" / "experiments.md"
HEADLINE = ["mrr", "ndcg@10", "recall@10"]  # per panel system in metrics/headlines/SYSTEM.json
SYSTEMS = ("default", "bm25")

# A stage that writes the pipeline's declared metrics, each panel system's
# metrics/headlines/SYSTEM.json, from one param: DVC names the columns as it does there, and in seconds.
WRITE_METRICS = """
import json, os, yaml
method = yaml.safe_load(open("params.yaml"))["retrieval"]["method"]
value = {"dense": 0.5, "hybrid": 0.6}[method]
os.makedirs("metrics/headlines", exist_ok=True)
for system in ("default", "bm25"):
    json.dump({"mrr": value, "ndcg@10": value, "recall@10": value}, open(f"metrics/headlines/{system}.json", "w"))
"""


def documented_exp_show() -> list[str]:
    """The `dvc exp show ... --drop ...` command docs/how-to/experiments.md gives."""
    for line in EXPERIMENTS_PAGE.read_text(encoding="utf-8").splitlines():
        if line.startswith("dvc exp show") and "--drop" in line:
            return shlex.split(line, comments=True)
    raise AssertionError(f"{EXPERIMENTS_PAGE}: no `dvc exp show ... --drop` command")


def metric_project(folder: Path) -> Path:
    """A DVC project with the real params.yaml and one stage writing the metrics files."""
    folder.mkdir()
    shutil.copy(ROOT / "params.yaml", folder)
    (folder / "write_metrics.py").write_text(WRITE_METRICS)
    stage = {
        "cmd": f"{shlex.quote(sys.executable)} write_metrics.py",
        "deps": ["write_metrics.py"],
        "params": ["retrieval"],
        "metrics": [{"metrics/headlines": {"cache": False}}],  # as dvc.yaml's score declares them: the folder
    }
    (folder / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"score": stage}}, sort_keys=False))
    git("init", "-q", "-b", "main", cwd=folder)
    dvc("init", "-q", cwd=folder)
    dvc("config", "core.analytics", "false", cwd=folder)
    dvc("repro", "-q", cwd=folder)
    git("add", "-A", cwd=folder)
    git("commit", "-qm", "baseline", cwd=folder)
    return folder


def test_the_documented_exp_show_shows_the_headline_metrics_and_the_changed_param(tmp_path):
    """The documented --drop keeps each panel system's headline columns
    (metrics/headlines/SYSTEM.json:mrr) and the changed param."""
    project = metric_project(tmp_path / "project")
    dvc("exp", "run", "-q", "-n", "hybrid", "-S", "retrieval.method=hybrid", cwd=project)
    shown = run([sys.executable, "-m", "dvc", *documented_exp_show()[1:]], cwd=project).stdout
    header = [cell.strip() for cell in shown.splitlines()[0].strip("|").split("|")]
    metrics = [f"metrics/headlines/{system}.json:{name}" for system in SYSTEMS for name in HEADLINE]
    assert set(metrics) <= set(header) and "retrieval.method" in header and header[0] == "Experiment", shown
    row = next(line for line in shown.splitlines() if "hybrid" in line.split("|")[1])
    cells = dict(zip(header, (cell.strip() for cell in row.strip("|").split("|"))))
    assert cells["retrieval.method"] == "hybrid" and float(cells["metrics/headlines/default.json:mrr"]) == 0.6


def test_the_documented_drop_pattern_keeps_the_headline_and_the_params():
    """DVC names a column of one of several metrics files FILE:NAME: the pattern keeps each system's
    headline file and the params, and drops any other file's (an undeclared one given with --targets)."""
    command = documented_exp_show()
    pattern = command[command.index("--drop") + 1]
    kept = [
        "Experiment",
        "metrics/headlines/default.json:mrr",
        "metrics/headlines/bm25.json:ndcg@10",
        "retrieval.method",
        "chunkings.c400.chars",
    ]
    dropped = ["metrics/panel/default/metrics.json:mrr", "hit@1"]
    assert [name for name in kept + dropped if not re.match(pattern, name)] == kept


def test_dvc_exp_run_set_param_rewrites_only_the_lines_it_sets(tmp_path):
    """params.yaml is kept in the layout DVC's `-S` writer produces (its comments kept), so an
    experiment's diff is the lines it changed, not the whole file."""
    from dvc.utils.hydra import apply_overrides

    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    before = params.read_text(encoding="utf-8").splitlines()
    apply_overrides(str(params), ["retrieval.method=hybrid", "load.chunking.chars=400", "judge.enabled=true"])
    after = params.read_text(encoding="utf-8").splitlines()
    changed = [line for line in difflib.unified_diff(before, after, lineterm="", n=0) if line[:1] in "+-"]
    changed = [line for line in changed if not line.startswith(("+++", "---"))]
    assert len(changed) == 6, "\n".join(changed)
    assert yaml.safe_load("\n".join(after))["retrieval"]["method"] == "hybrid"
    assert json.dumps(yaml.safe_load("\n".join(before))["score"]) == json.dumps(
        yaml.safe_load("\n".join(after))["score"]
    )
