"""What a new user sees: `retrieval-bench show` after a run, and the plots page working offline."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
from conftest import ROOT, copy_project, dvc, git

TEMPLATE = ROOT / ".dvc" / "plots" / "offline.html"


def test_show_prints_the_run_and_its_change_since_the_last_commit(tmp_path, monkeypatch, capsys):
    from retrieval_bench.cli import main

    (tmp_path / "metrics").mkdir()
    metrics = {"recall@1": 0.5, "recall@10": 0.75, "mrr": 0.6, "ndcg@10": 0.62, "n_questions": 40, "n_chunks": 300}
    (tmp_path / "metrics" / "metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "metrics" / "goldenset.json").write_text(json.dumps({"n_questions": 40, "echo_rate": 0.025}))
    git("init", "-q", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "baseline", cwd=tmp_path)
    (tmp_path / "metrics" / "metrics.json").write_text(json.dumps({**metrics, "mrr": 0.65, "n_questions": 41}))
    monkeypatch.chdir(tmp_path)
    assert main(["show"]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"mrr\s+0\.6500  \(\+0\.0500\)", shown) and re.search(r"recall@10\s+0\.7500  \(unchanged\)", shown)
    assert re.search(r"n_questions\s+41  \(\+1\)", shown) and re.search(r"echo_rate\s+0\.0250", shown)
    assert shown.index("recall@1 ") < shown.index("recall@10")


def test_show_without_git_prints_the_run_without_changes(tmp_path, monkeypatch, capsys):
    """Observed: with no git on PATH, `show` ended in a FileNotFoundError traceback."""
    from retrieval_bench.cli import main

    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "metrics.json").write_text(json.dumps({"mrr": 0.6, "n_questions": 40}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools-here"))
    assert main(["show"]) == 0
    assert re.search(r"mrr\s+0\.6000", capsys.readouterr().out)


def test_the_plots_page_loads_nothing_from_the_network():
    page = TEMPLATE.read_text(encoding="utf-8")
    assert "{plot_divs}" in page and "{scripts}" not in page  # DVC's CDN script tags have nowhere to go
    assert not re.search(r"<script[^>]+src=", page)
    assert "vegaEmbed" in page and "vega-lite" in page.lower()


@pytest.mark.pipeline
def test_dvc_plots_show_writes_an_offline_page_that_renders(tmp_path):
    project = copy_project(tmp_path / "project")
    (project / ".dvc" / "plots").mkdir(parents=True, exist_ok=True)
    shutil.copy(TEMPLATE, project / ".dvc" / "plots" / "offline.html")
    dvc("config", "plots.html_template", "plots/offline.html", cwd=project)
    plots = project / "metrics" / "plots"
    plots.mkdir(parents=True)
    shutil.copy(ROOT / "metrics" / "plots" / "recall_at_k.csv", plots)
    shutil.copy(ROOT / "metrics" / "plots" / "first_relevant_rank_histogram.csv", plots)
    dvc("plots", "show", "--out", "dvc_plots", cwd=project)
    page = (project / "dvc_plots" / "index.html").read_text(encoding="utf-8")
    assert "cdn.jsdelivr" not in page and page.count("vegaEmbed(") >= 2
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        # `make test` installs Chromium where it can (root with apt-get): CI must render the page.
        assert not os.environ.get("CI"), "CI has no Chromium: `make test` should have installed it (apt-get)"
        pytest.skip("no headless Chromium here to render the page (apt-get install chromium)")
    shot = tmp_path / "plots.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=900,1400",
            "--virtual-time-budget=5000",
            f"--screenshot={shot}",
            (project / "dvc_plots" / "index.html").as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    # A page whose scripts failed to load is blank: the rendered charts leave many distinct colours.
    from PIL import Image

    colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 20


@pytest.mark.pipeline
def test_the_pull_request_report_script_on_a_fresh_clone(tmp_path):
    """.ci/pr-report.sh, as the CI recipe runs it: a clone with a local DVC remote reproduces the
    branch without recomputing what the remote holds, and writes the comparison as Markdown."""
    from conftest import run, set_params

    project = copy_project(tmp_path / "project")
    remote = tmp_path / "remote"
    dvc("remote", "add", "-d", "storage", str(remote), cwd=project)
    dvc("repro", cwd=project)
    dvc("push", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-qm", "main: dense", cwd=project)
    git("checkout", "-qb", "pr", cwd=project)
    set_params(project, **{"retrieval.method": "bm25"})
    git("commit", "-qam", "try bm25", cwd=project)
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", "-b", "pr", str(project), str(clone)], cwd=tmp_path)
    run(["git", "branch", "-q", "main", "origin/main"], cwd=clone)
    shutil.copy(ROOT / ".ci" / "pr-report.sh", clone / "pr-report.sh")
    result = run(["bash", "pr-report.sh", "main", "report.md"], cwd=clone)
    ran = {line.split("'")[1] for line in result.stdout.splitlines() if line.startswith("Running stage")}
    assert ran <= {"check_params", "retrieve", "judge", "score"}  # pulled, not recomputed: no embedding, no generation
    report = (clone / "report.md").read_text()
    assert "### Retrieval comparison: `main" in report and "| mrr |" in report
