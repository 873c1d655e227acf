"""The first run a team sees (issue 42), with the real DVC and an empty run-cache: only the
(chunking, embedder) pairs some panel system uses are embedded; editing a retrieval key computes
only the systems that inherit it (the others' runs are copied back: core.item_memo), and setting it
back restores the panel's runs from DVC's run-cache;
`dvc status` is clean after a run (no always-changed stage); the embed stages are run-cached too."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml
from conftest import copy_project, dvc, git, set_params

from retrieval_bench.core import paths

pytestmark = pytest.mark.pipeline

PANEL = {
    "default": {"chunking": "default", "embedder": "default"},
    "bm25": {"chunking": "default", "embedder": "default", "method": "bm25"},
}


def stages(output: str, said: str) -> set[str]:
    """The stages DVC's output says `said` of: ran ("Running stage"), or restored ("is cached")."""
    pattern = {"ran": r"^Running stage '([^']+)':", "restored": r"^Stage '([^']+)' is cached - skipping run"}[said]
    return set(re.findall(pattern, output, flags=re.MULTILINE))


def test_a_retrieval_edit_reruns_only_its_systems_and_an_unused_pair_is_never_embedded(tmp_path):
    project = copy_project(tmp_path / "project")
    set_params(project, chunkings={"default": {}, "c400": {"chars": 400, "overlap": 50}}, panel=PANEL)
    listed = dvc("stage", "list", "--name-only", cwd=project).stdout.split()
    assert [name for name in listed if name.startswith("embed_corpus@")] == ["embed_corpus@default-default"]

    first = dvc("repro", cwd=project).stdout
    assert {"chunk@c400", "retrieve"} <= stages(first, "ran") and "retrieve: 2 of 2 computed" in first
    assert not (project / "data" / "embeddings" / "corpus" / "c400").exists()  # chunked, never embedded
    assert dvc("status", cwd=project).stdout.strip() == "Data and pipelines are up to date."

    set_params(project, **{"retrieval.method": "hybrid"})  # the default system's; bm25 sets its own
    edited = dvc("repro", cwd=project).stdout
    rerun = {"check_params", "retrieve", "score", "judge", "leaderboard"}  # judge pools default's run
    assert stages(edited, "ran") == rerun, edited
    assert "retrieve: 1 of 2 computed" in edited and "retrieve bm25: unchanged since a run before" in edited
    assert "score: 1 of 2 computed" in edited  # bm25's run is the same bytes: its scores are copied back
    assert dvc("status", cwd=project).stdout.strip() == "Data and pipelines are up to date."

    set_params(project, **{"retrieval.method": "dense"})  # back: its run comes from the run-cache
    back = dvc("repro", cwd=project).stdout
    assert stages(back, "restored") == {"retrieve"}, back
    assert "retrieve" not in stages(back, "ran")
    assert dvc("status", cwd=project).stdout.strip() == "Data and pipelines are up to date."


def test_an_embed_setting_set_back_restores_both_embed_stages_from_the_run_cache(reproduced):
    """The embed stages have no persistent output (their embedding cache lives in .dvc/tmp), so DVC
    run-caches them: an embed.max_seq_length edit re-embeds corpus and questions, and setting it back
    restores both from DVC's run-cache, the local embedding cache deleted in between. (The project is
    the reproduced template: its first `dvc repro` started from an empty run-cache.)"""
    project = reproduced
    embeds = {"embed_corpus@default-default", "embed_questions@default"}
    first = {name: (project / name).read_bytes() for name in (paths.CORPUS_VECTORS, paths.QUESTION_VECTORS)}
    original = yaml.safe_load((project / "params.yaml").read_text())["embed"]["max_seq_length"]

    set_params(project, **{"embed.max_seq_length": 64})
    assert embeds <= stages(dvc("repro", cwd=project).stdout, "ran")
    shutil.rmtree(project / paths.EMBEDDING_CACHE)  # what is restored comes from DVC's run-cache alone

    set_params(project, **{"embed.max_seq_length": original})
    back = dvc("repro", cwd=project).stdout
    assert embeds <= stages(back, "restored") and not embeds & stages(back, "ran"), back
    assert {name: (project / name).read_bytes() for name in first} == first
    assert not (project / paths.EMBEDDING_CACHE).exists()  # nothing embedded


def test_a_fresh_clone_takes_the_unchanged_systems_from_the_last_run(tmp_path):
    """The outputs retrieve and score keep to copy back are local (.dvc/tmp): a clone that pulled the
    last run (a teammate, a CI runner) takes an unchanged system's run from DVC's cache and its
    scores from git, where the key written beside them is the key of its own inputs."""
    project = copy_project(tmp_path / "project")
    set_params(project, panel=PANEL)
    dvc("repro", cwd=project)
    dvc("remote", "add", "-d", "shared", str(tmp_path / "remote"), cwd=project)
    dvc("push", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-qm", "the panel's run", cwd=project)

    clone = tmp_path / "clone"
    git("clone", "-q", str(project), str(clone), cwd=tmp_path)
    dvc("pull", cwd=clone)
    assert not (clone / paths.STAGE_MEMO).exists()
    set_params(clone, **{"panel.bm25": {**PANEL["bm25"], "depth": 20}})
    edited = dvc("repro", cwd=clone).stdout
    assert "retrieve: 1 of 2 computed" in edited and "score: 1 of 2 computed" in edited, edited
    for stage in ("retrieve", "score"):
        assert f"{stage} default: unchanged since the committed run, its outputs taken from it" in edited
    for path in [*paths.run_outputs_of("default"), *paths.score_outputs_of("default"), paths.score_key_of("default")]:
        assert (clone / path).read_bytes() == (project / path).read_bytes(), path
    assert dvc("status", cwd=clone).stdout.strip() == "Data and pipelines are up to date."
