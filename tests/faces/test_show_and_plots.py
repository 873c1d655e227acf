"""What a new user sees: `retrieval-bench show` after a run, and the plots page working offline."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pandas as pd
import pytest
from conftest import ROOT, copy_project, dvc, git

TEMPLATE = ROOT / ".dvc" / "plots" / "offline.html"
QUALITY_VS_COST = ROOT / ".dvc" / "plots" / "quality_vs_cost.json"
# metrics/plots/quality_vs_cost.csv as the leaderboard stage writes it (panel_costs.PLOT_COLUMNS),
# the sample's eight systems; bm25 searches no vectors (embedding cost 0), an external run has no costs.
QUALITY_VS_COST_CSV = """system,mrr,ci_low,ci_high,search_ms_per_question,embed_seconds_per_1000,index_mb,pareto
dense,0.517,0.457,0.576,0.41,2.95,1.751,True
dense-c400,0.49,0.43,0.55,0.7,1.9,3.1,False
dense-seq64,0.45,0.39,0.51,0.4,1.2,1.751,True
dense-c400-seq64,0.47,0.41,0.53,0.7,1.0,3.1,True
bm25,0.388,0.33,0.446,0.35,0.0,0.9,True
bm25-c400,0.36,0.3,0.42,0.5,0.0,1.5,False
hybrid,0.493,0.436,0.55,0.9,2.95,2.65,False
external-run,0.5,0.44,0.56,,,,True
"""


def test_show_prints_the_run_and_its_change_since_the_last_commit(tmp_path, monkeypatch, capsys):
    from retrieval_bench.cli import main

    (tmp_path / "metrics" / "panel" / "default").mkdir(parents=True)
    metrics = {"recall@1": 0.5, "recall@10": 0.75, "mrr": 0.6, "ndcg@10": 0.62, "n_questions": 40, "n_chunks": 300}
    (tmp_path / "metrics" / "panel" / "default" / "metrics.json").write_text(json.dumps(metrics))
    (tmp_path / "metrics" / "goldenset.json").write_text(json.dumps({"n_questions": 40, "echo_rate": 0.025}))
    git("init", "-q", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "baseline", cwd=tmp_path)
    (tmp_path / "metrics" / "panel" / "default" / "metrics.json").write_text(
        json.dumps({**metrics, "mrr": 0.65, "n_questions": 41})
    )
    monkeypatch.chdir(tmp_path)
    assert main(["show"]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"mrr\s+0\.6500  \(\+0\.0500\)", shown) and re.search(r"recall@10\s+0\.7500  \(unchanged\)", shown)
    assert re.search(r"n_questions\s+41  \(\+1\)", shown) and re.search(r"echo_rate\s+0\.0250", shown)
    assert shown.index("recall@1 ") < shown.index("recall@10")


def test_show_against_a_revision_from_before_the_panel_reads_its_single_system(tmp_path, monkeypatch, capsys):
    """HEAD holds metrics/metrics.json (the single system's, before the default panel system): the
    default system's change is shown against it; --system names another system's file."""
    from retrieval_bench.cli import main

    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "metrics.json").write_text(json.dumps({"mrr": 0.6, "n_questions": 40}))
    git("init", "-q", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "single system", cwd=tmp_path)
    for system, mrr in (("default", 0.7), ("bm25", 0.4)):
        (tmp_path / "metrics" / "panel" / system).mkdir(parents=True)
        (tmp_path / "metrics" / "panel" / system / "metrics.json").write_text(json.dumps({"mrr": mrr}))
    monkeypatch.chdir(tmp_path)
    assert main(["show"]) == 0
    assert re.search(r"mrr\s+0\.7000  \(\+0\.1000\)", capsys.readouterr().out)
    assert main(["show", "--system", "bm25"]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"mrr\s+0\.4000", shown) and "+0.1000" not in shown and "-0.2000" not in shown


def test_show_without_git_prints_the_run_without_changes(tmp_path, monkeypatch, capsys):
    """Observed: with no git on PATH, `show` ended in a FileNotFoundError traceback."""
    from retrieval_bench.cli import main

    (tmp_path / "metrics" / "panel" / "default").mkdir(parents=True)
    (tmp_path / "metrics" / "panel" / "default" / "metrics.json").write_text(
        json.dumps({"mrr": 0.6, "n_questions": 40})
    )
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
    for template in QUALITY_VS_COST.parent.glob("*.json"):  # quality_vs_cost, by_system, by_system_bars
        shutil.copy(template, project / ".dvc" / "plots" / template.name)
    dvc("config", "plots.html_template", "plots/offline.html", cwd=project)
    plots = project / "metrics" / "plots"
    plots.mkdir(parents=True)
    shutil.copy(ROOT / "metrics" / "plots" / "recall_at_k.csv", plots)
    shutil.copy(ROOT / "metrics" / "plots" / "first_relevant_rank_histogram.csv", plots)
    (plots / "quality_vs_cost.csv").write_text(QUALITY_VS_COST_CSV)
    dvc("plots", "show", "--out", "dvc_plots", cwd=project)
    page = (project / "dvc_plots" / "index.html").read_text(encoding="utf-8")
    assert "cdn.jsdelivr" not in page and page.count("vegaEmbed(") >= 3
    assert "Quality (mrr, with its interval) against cost" in page and "dense-c400-seq64" in page
    assert "Recall at k, per panel system" in page and "Rank of the first relevant chunk, per panel system" in page
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
    # The quality-vs-cost chart itself, rendered alone: its title and system names drawn as SVG text
    # (what the browser made of the spec, not the spec), its CI rules and the front's red points.
    svg, alone = rendered_svg(page, quality_vs_cost_spec(page), chromium, tmp_path / "quality_vs_cost")
    assert "Quality (mrr, with its interval) against cost" in svg
    for system in ("dense-c400-seq64", "bm25", "hybrid"):
        assert f">{system}<" in svg
    assert ">external-run<" not in svg  # no cost measured: no place on a cost axis (its row says n/a)
    assert "search_ms_per_question" in svg and "index_mb" in svg and "on the front" in svg
    chart = tmp_path / "quality_vs_cost.png"
    subprocess.run(
        [*browser(chromium, tmp_path / "profile3"), "--window-size=1000,500", f"--screenshot={chart}", alone.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    shutil.copy(chart, os.environ.get("QUALITY_VS_COST_PNG", tmp_path / "kept.png"))
    image = Image.open(chart).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 20
    assert any(r > 180 and g < 80 and b < 80 for _, (r, g, b) in colours)  # the front's red (#d62728)
    # The recall curves, one line per panel system: each system a legend entry the browser drew.
    curves, _ = rendered_svg(page, titled_spec(page, "Recall at k, per panel system"), chromium, tmp_path / "recall")
    systems = set(pd.read_csv(plots / "recall_at_k.csv")["system"])
    assert len(systems) >= 2 and all(f">{system}<" in curves for system in systems)


@pytest.mark.pipeline
def test_dvc_plots_diff_draws_each_revision_apart(tmp_path):
    """`dvc plots diff` gives every row its revision (rev); no chart encoded it, so the histogram
    added main's bars to the workspace's and each recall line zig-zagged between the two."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        assert not os.environ.get("CI"), "CI has no Chromium: `make test` should have installed it (apt-get)"
        pytest.skip("no headless Chromium here to render the page (apt-get install chromium)")
    project = copy_project(tmp_path / "project")
    (project / ".dvc" / "plots").mkdir(parents=True, exist_ok=True)
    for template in TEMPLATE.parent.glob("*.*"):
        shutil.copy(template, project / ".dvc" / "plots" / template.name)
    dvc("config", "plots.html_template", "plots/offline.html", cwd=project)
    plots = project / "metrics" / "plots"
    plots.mkdir(parents=True)
    for name in ("recall_at_k.csv", "first_relevant_rank_histogram.csv"):
        shutil.copy(ROOT / "metrics" / "plots" / name, plots)
    (plots / "quality_vs_cost.csv").write_text(QUALITY_VS_COST_CSV)
    git("init", "-q", cwd=project)
    git("add", "-A", cwd=project)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "main", cwd=project)
    recall = pd.read_csv(plots / "recall_at_k.csv")
    recall.assign(recall=recall["recall"] * 0.9).to_csv(plots / "recall_at_k.csv", index=False)
    dvc("plots", "diff", "HEAD", "--out", "dvc_plots", cwd=project)
    page = (project / "dvc_plots" / "index.html").read_text(encoding="utf-8")
    system = str(recall["system"].iloc[0])
    for title in ("Recall at k, per panel system", "Rank of the first relevant chunk, per panel system"):
        svg, _ = rendered_svg(page, titled_spec(page, title), chromium, tmp_path / title.split()[0].lower())
        assert f">{system} @ HEAD<" in svg and f">{system} @ workspace<" in svg, title
    svg, _ = rendered_svg(page, quality_vs_cost_spec(page), chromium, tmp_path / "quality")
    assert ">bm25 @ HEAD<" in svg and ">bm25 @ workspace<" in svg


def rendered_svg(page: str, spec: dict, chromium: str, folder) -> tuple[str, object]:
    """The SVG the browser made of one chart of the plots page (`spec`), rendered alone, and the
    page that holds it alone."""
    folder.mkdir()
    alone = folder / "alone.html"
    alone.write_text(
        page[: page.rindex("</head>")]
        + '</head><body><div id="chart"></div><script>vegaEmbed("#chart", '
        + json.dumps(spec)
        + ', {renderer: "svg", actions: false}).then(function () {'
        + "document.title = 'rendered';})"
        + ".catch(function (error) { document.title = 'failed: ' + error; });</script></body></html>"
    )
    dom = subprocess.run(
        [*browser(chromium, folder / "profile"), "--dump-dom", alone.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "<title>rendered</title>" in dom, dom[-2000:]
    return dom[dom.index("<svg") :], alone


def titled_spec(page: str, title: str) -> dict:
    """The Vega-Lite spec of the plots page's chart titled `title`."""
    for match in re.finditer(r"var spec = (\{.*?\});\s*vegaEmbed\(", page, re.S):
        spec = json.loads(match.group(1))
        if title in json.dumps(spec.get("title", "")):
            return spec
    raise AssertionError(f"the plots page has no chart titled {title!r}")


def browser(chromium: str, profile) -> list[str]:
    return [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=5000",
    ]


def quality_vs_cost_spec(page: str) -> dict:
    """The Vega-Lite spec DVC filled from .dvc/plots/quality_vs_cost.json, out of the plots page."""
    for match in re.finditer(r"var spec = (\{.*?\});\s*vegaEmbed\(", page, re.S):
        spec = json.loads(match.group(1))
        if "repeat" in spec:
            return spec
    raise AssertionError("the plots page has no quality-vs-cost chart")


@pytest.mark.pipeline
def test_the_pull_request_report_script_on_a_fresh_clone(reproduced, tmp_path):
    """.ci/pr-report.sh, as the CI recipe runs it: a clone with a local DVC remote reproduces the
    branch without recomputing what the remote holds, and writes the comparison as Markdown. The
    branch changes code alone: `dvc repro --pull` then pulled check_params' outputs rather than run
    it, found none (they are in no cache) and stopped the first stage that had to run on a missing stamp."""
    from conftest import run

    remote = tmp_path / "remote"
    dvc("remote", "add", "-d", "storage", str(remote), cwd=reproduced)
    dvc("push", cwd=reproduced)
    git("add", "-A", cwd=reproduced)
    git("commit", "-qm", "main: dense", cwd=reproduced)
    git("checkout", "-qb", "pr", cwd=reproduced)
    with open(reproduced / "stages" / "retrieve.py", "a") as handle:  # code only retrieve depends on
        handle.write("# a retrieval change\n")
    git("commit", "-qam", "a retrieval change", cwd=reproduced)
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", "-b", "pr", str(reproduced), str(clone)], cwd=tmp_path)
    run(["git", "branch", "-q", "main", "origin/main"], cwd=clone)
    shutil.copy(ROOT / ".ci" / "pr-report.sh", clone / "pr-report.sh")
    result = run(["bash", "pr-report.sh", "main", "report.md"], cwd=clone)
    ran = {line.split("'")[1] for line in result.stdout.splitlines() if line.startswith("Running stage")}
    assert ran <= {
        "check_params",
        "retrieve",
        "judge",
        "score",
        "leaderboard",
    }  # pulled, not recomputed: no embedding, no generation
    report = (clone / "report.md").read_text()
    assert "### Retrieval comparison: `main" in report and "| mrr |" in report


def test_show_warns_when_the_corpus_changed_since_the_last_run_stamped_it(tmp_path, monkeypatch, capsys):
    """A file of load.source edited, then plain `dvc repro`: load_chunks did not rerun, `dvc status`
    was clean, and `show` printed the old corpus's figures without a word."""
    from retrieval_bench.cli import main
    from retrieval_bench.core import paths
    from retrieval_bench.corpus.source_stamp import source_stamp

    (tmp_path / "metrics" / "panel" / "default").mkdir(parents=True)
    (tmp_path / "metrics" / "panel" / "default" / "metrics.json").write_text(json.dumps({"mrr": 0.6, "n_questions": 9}))
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "bees.md").write_text("Bees dance.\n")
    (tmp_path / "params.yaml").write_text("load:\n  source: corpus\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dvc" / "tmp").mkdir(parents=True)
    source_stamp("corpus", tmp_path / paths.SOURCE_DIGEST_MEMO)  # what check_params does in `make repro`
    assert main(["show"]) == 0 and "warning" not in capsys.readouterr().out
    (tmp_path / "corpus" / "bees.md").write_text("Bees dance to say where the flowers are.\n")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["show"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("warning: load.source corpus changed since the last run stamped it: these figures are")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # show writes nothing, the memo included


@pytest.mark.parametrize(
    ("report", "content", "named"),
    [
        (
            "metrics/panel/default/metrics.json",
            {"mrr": 0.5, "by_kind": {"single": 3}},
            "metrics/panel/default/metrics.json or",
        ),
        ("metrics/leaderboard.json", {"systems": ["x"]}, "metrics/leaderboard.json: not a report"),
        ("metrics/goldenset.json", {"kind_classifier": {"x": 1}}, "or metrics/goldenset.json: not a report"),
    ],
)
def test_show_names_a_report_of_another_shape_in_one_line_before_printing_anything(
    tmp_path, monkeypatch, capsys, report, content, named
):
    """Well-formed JSON of another shape (edited by hand, or another version's) was a traceback
    after half the report had been printed."""
    from retrieval_bench.cli import main

    for name in ("metrics/panel/default/metrics.json", "metrics/leaderboard.json", "metrics/goldenset.json"):
        shutil.copy(ROOT / name, (tmp_path / name).parent.mkdir(parents=True, exist_ok=True) or tmp_path / name)
    (tmp_path / report).write_text(json.dumps(content))
    monkeypatch.chdir(tmp_path)
    assert main(["show"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured
    assert captured.err.startswith("error: ") and named in captured.err and "rerun `dvc repro`" in captured.err


def test_show_warns_when_params_changed_since_the_run(tmp_path, monkeypatch, capsys):
    """A system's method edited (or a system added) and not reproduced: show printed the last run's
    figures as this run's, with no word (compare warned)."""
    from retrieval_bench.cli import main

    for name in ("params.yaml", "dvc.lock", "dvc.yaml", "metrics/panel/default/metrics.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    assert main(["show"]) == 0 and "not computed with params.yaml" not in capsys.readouterr().out
    params = tmp_path / "params.yaml"
    default = "  default: {chunking: default, embedder: default}"
    params.write_text(params.read_text().replace(default, default[:-1] + ", method: bm25}", 1))
    assert main(["show"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("warning: the workspace's outputs were not computed with params.yaml as it is")
    assert "panel.default.method" in first and "run `dvc repro` first" in first
