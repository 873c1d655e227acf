"""`compare` names the params that differ between A and B (#28 item 17: the tutorial's sample
showed them, the tool printed only the revisions)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, git


def committed_runs(tmp_path, second_params: dict):
    """A repository with two commits: the dense panel system's per-question results with the
    committed params.yaml, then bm25's with `second_params` changed (dotted keys)."""
    repo = tmp_path / "repo"
    (repo / "metrics" / "panel" / "default").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=repo)
    shutil.copy(ROOT / "params.yaml", repo / "params.yaml")
    shutil.copy(ROOT / "metrics/panel/default/per_question.csv", repo / "metrics/panel/default/per_question.csv")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "dense", cwd=repo)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    for dotted, value in second_params.items():
        *parents, leaf = dotted.split(".")
        node = params
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = value
    (repo / "params.yaml").write_text(yaml.safe_dump(params))  # another layout: only values count
    shutil.copy(ROOT / "metrics/panel/bm25/per_question.csv", repo / "metrics/panel/default/per_question.csv")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "bm25", cwd=repo)
    return repo


def compare(repo, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "retrieval_bench.cli", "compare", *args], cwd=repo, capture_output=True, text=True
    )


def test_the_report_names_each_param_that_differs_with_both_values(tmp_path):
    repo = committed_runs(tmp_path, {"retrieval.method": "bm25", "retrieval.bm25.stemmer": "none", "score.extra": 3})
    text = compare(repo, "HEAD~1", "HEAD", "--show", "0")
    assert text.returncode == 0, text.stderr
    assert (
        "params that differ: retrieval.bm25.stemmer 'english' -> 'none'; retrieval.method 'dense' -> 'bm25'; "
        "score.extra None -> 3\n"
    ) in text.stdout
    report = json.loads(compare(repo, "HEAD~1", "HEAD", "--json").stdout)
    assert report["params_changed"] == [
        {"key": "retrieval.bm25.stemmer", "a": "english", "b": "none"},
        {"key": "retrieval.method", "a": "dense", "b": "bm25"},
        {"key": "score.extra", "a": None, "b": 3},
    ]
    markdown = compare(repo, "HEAD~1", "HEAD", "--md").stdout
    assert "params that differ: retrieval.bm25.stemmer 'english' -> 'none';" in markdown


def test_the_same_params_are_said_to_be_the_same_and_a_run_without_git_params_is_silent(tmp_path):
    repo = committed_runs(tmp_path, {})
    assert (
        "params that differ: none (params.yaml is the same at A and B; the corpus"
        in compare(repo, "HEAD~1", "HEAD").stdout
    )
    (repo / "params.yaml").unlink()  # the workspace's params are gone: nothing is claimed about them
    out = compare(repo, "HEAD", "workspace").stdout
    assert "params that differ" not in out and "questions paired by qid" in out


def test_a_params_edit_not_yet_reproduced_is_named(tmp_path):
    """`compare main workspace` after editing params.yaml without `dvc repro` said "params that
    differ: retrieval.method 'dense' -> 'bm25'" and then the old run's figures: "no difference"."""
    from conftest import ROOT

    from retrieval_bench.evaluation.compare.runs import stale_workspace_params

    for name in ("dvc.lock", "params.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    assert stale_workspace_params(tmp_path) == []  # the committed run: every recorded value as the file holds it
    text = (tmp_path / "params.yaml").read_text()
    (tmp_path / "params.yaml").write_text(text.replace("source: data/sample/sqlite", "source: data/other", 1))
    assert stale_workspace_params(tmp_path) == ["load.source"]
    # a key added under a recorded section: bm25's figures would have been dense's, unwarned
    (tmp_path / "params.yaml").write_text(
        text.replace(
            "  default: {chunking: default, embedder: default}",
            "  default: {chunking: default, embedder: default, method: bm25}",
            1,
        )
    )
    assert stale_workspace_params(tmp_path) == ["panel.default.method"]
    (tmp_path / "dvc.lock").unlink()
    assert stale_workspace_params(tmp_path) == []  # nothing recorded: nothing to say


def test_the_lock_entries_of_stages_dvc_yaml_no_longer_has_are_not_the_workspaces(tmp_path):
    """A chunking taken out of params.yaml and reproduced: DVC keeps chunk@old's entry, and compare
    warned on every run (and in every pull-request comment) that the outputs were not computed with
    params.yaml as it is."""
    from retrieval_bench.evaluation.compare.runs import stale_workspace_params

    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  check: {cmd: x, params: [{params.yaml: []}]}\n"
        "  chunk: {foreach: '${chunkings}', do: {cmd: 'x ${key}', params: ['chunkings.${key}']}}\n"
    )
    (tmp_path / "params.yaml").write_text("chunkings:\n  new: {chars: 400}\n")
    lock = {
        "schema": "2.0",
        "stages": {
            "check": {"params": {"params.yaml": {"chunkings": {"new": {"chars": 400}}}}},
            "chunk@new": {"params": {"params.yaml": {"chunkings.new": {"chars": 400}}}},
            "chunk@old": {"params": {"params.yaml": {"chunkings.old": {"chars": 800}}}},
        },
    }
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock))
    assert stale_workspace_params(tmp_path) == []
    (tmp_path / "params.yaml").write_text("chunkings:\n  new: {chars: 500}\n")  # an edit not reproduced
    assert stale_workspace_params(tmp_path) == ["chunkings.new.chars"]
    (tmp_path / "dvc.yaml").unlink()  # which entries are stale is dvc.yaml's answer: without it, every one counts
    assert stale_workspace_params(tmp_path) == ["chunkings.new.chars", "chunkings.old.chars"]


def test_a_foreach_over_a_list_names_its_mappings_by_position():
    from retrieval_bench.evaluation.compare.runs import _defined

    pipeline = {"stages": {"train": {"foreach": ["x", {"lr": 2}]}, "fit": {"foreach": ["a", 3]}}}
    assert (
        _defined("train@0", pipeline, {})
        and _defined("train@1", pipeline, {})
        and not _defined("train@2", pipeline, {})
    )
    assert _defined("fit@a", pipeline, {}) and _defined("fit@3", pipeline, {}) and not _defined("fit@0", pipeline, {})


def test_a_branch_known_only_as_a_remote_branch_is_found(tmp_path):
    """In a clone of a feature branch, `main` is origin/main: `dvc metrics diff main` found it and
    `retrieval-bench compare main` said "not a git revision"."""
    from retrieval_bench.core.errors import InputError
    from retrieval_bench.core.revisions import resolve_revision

    origin, clone = tmp_path / "origin", tmp_path / "clone"
    git("init", "-q", "-b", "main", str(origin), cwd=tmp_path)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x", cwd=origin)
    git("clone", "-q", str(origin), str(clone), cwd=tmp_path)
    git("checkout", "-q", "-b", "feature", cwd=clone)
    git("branch", "-q", "-D", "main", cwd=clone)
    head = git("rev-parse", "HEAD", cwd=origin).stdout.strip()
    assert resolve_revision("main", clone) == head
    with pytest.raises(InputError, match="^nope: not a git revision or DVC experiment name$"):
        resolve_revision("nope", clone)


def test_a_short_commit_id_two_commits_share_is_said_to_be_ambiguous(tmp_path):
    """`compare 6b0a HEAD` where two commits start with 6b0a said "not a git revision"."""
    import collections

    from retrieval_bench.core.errors import InputError
    from retrieval_bench.core.revisions import resolve_revision

    git("init", "-q", str(tmp_path), cwd=tmp_path)
    tree = git("write-tree", cwd=tmp_path).stdout.strip()
    stamp = "2020-01-01T00:00:00 +0000"
    env = {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    commits: list[str] = []
    while not (shared := [p for p, n in collections.Counter(c[:4] for c in commits).items() if n > 1]):
        made = subprocess.run(  # fixed names and dates: the same commits, so the same pair, every time
            ["git", "commit-tree", tree, "-m", f"c{len(commits)}"],
            cwd=tmp_path,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        commits.append(made.stdout.strip())
    with pytest.raises(InputError, match=f"^{shared[0]}: ambiguous, more than one commit starts with it; give more"):
        resolve_revision(shared[0], tmp_path)
    assert resolve_revision(commits[-1][:12], tmp_path) == commits[-1]
