"""Shared fixtures: a copy of the project in a fresh git + DVC repository, and the real CLIs."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from retrieval_bench.core.params_panel import embedded_pairs
from retrieval_bench.core.params_schema import DEFAULTS

# Ray reads RAY_AUTH_MODE once, when it is first imported: every test process uses token mode (the
# module Ray instance of test_embed_ray needs it for stage processes to join it), set before any
# test imports Ray, so the order in which files run on a worker cannot matter.
os.environ.setdefault("RAY_AUTH_MODE", "token")

ROOT = Path(__file__).resolve().parents[1]
SHARED_SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
# A small slice of the bundled sample keeps pipeline tests fast: about 60 chunks, 25 questions.
SLICE_DOCS = ["wal.md", "autoinc.md", "inmemorydb.md"]
# The leaderboard's cost measurement in a test project: one timed round (params costs.rounds) runs
# every timed task as five do, at a third of the time, and each embedding call embeds 8 chunks
# (costs.embed_texts), not 64: the same code path, a fraction of the encoder's time.
TEST_COSTS = {"costs.rounds": 1, "costs.embed_texts": 8}


def pessimistic_ranks(scores, judged):
    """Rank of chunks `judged` in a full ranking by `scores`, each after every chunk tied with it:
    1 + the number of other chunks scoring at least as high (a reference computation for tests)."""
    import numpy as np

    scores, judged = np.asarray(scores), np.asarray(judged, dtype=np.int64)
    return (scores[None, :] >= scores[judged][:, None]).sum(axis=1).astype(np.int64)


def tool_env() -> dict[str, str]:
    """The environment stages run in: this interpreter's bin first, nothing from the network."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", DVC_NO_ANALYTICS="1", PYTHONUNBUFFERED="1")
    env.update(GIT_AUTHOR_NAME="test", GIT_AUTHOR_EMAIL="test@example.invalid")
    env.update(GIT_COMMITTER_NAME="test", GIT_COMMITTER_EMAIL="test@example.invalid")
    return env


def run(args: list[str], cwd: Path, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=cwd, env=env or tool_env(), capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def dvc(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "dvc", *args], cwd=cwd, check=check)


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run(["git", *args], cwd=cwd)


def copy_project(dest: Path, docs: list[str] | None = SLICE_DOCS, panel: bool = False) -> Path:
    """Copy the tracked project files (a slice of the sample when `docs` is given) into `dest`,
    then `git init`, `dvc init` and commit, as a user's fresh clone would be. Without `panel` the
    sample's panel is its `default` system alone, and its chunkings and embedders are the defaults
    alone: a single-system project (no other systems, chunkings or embedders to wait for). Its
    leaderboard times the costs as TEST_COSTS says."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in filter(None, tracked.split("\0")):
        if not (ROOT / name).is_file():  # deleted in the working tree, not yet in git
            continue
        if name.startswith((".dvc/", "tests/", "bench/")) or name == "dvc.lock":
            continue
        if name.startswith("data/sample/sqlite/") and docs is not None and Path(name).name not in docs:
            continue
        if name.startswith("metrics/"):
            continue  # produced by the run under test
        if name.startswith("data/reviews/") and name != "data/reviews/README.md":
            continue  # people's reviews of this checkout (a `.dvc` file without its data stops `dvc repro`)
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    only_default = {} if panel else {"panel": ONLY_DEFAULT, "chunkings": {"default": {}}, "embedders": {"default": {}}}
    set_params(dest, **TEST_COSTS, **only_default)
    git("init", "-q", "-b", "main", cwd=dest)
    dvc("init", "-q", cwd=dest)
    dvc("config", "core.analytics", "false", cwd=dest)
    git("add", "-A", cwd=dest)
    git("commit", "-qm", "initial", cwd=dest)
    return dest


def set_params(project: Path, **changes: object) -> None:
    """Set dotted params.yaml keys, e.g. set_params(p, **{"score.k": [1, 2]}); an edit to the panel
    writes `embedded` derived from it too, as a user must (unless `embedded` itself is set)."""
    import yaml

    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    for dotted, value in changes.items():
        node = params
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[key]
        node[last] = value
    if "embedded" not in changes and any(dotted.split(".")[0] == "panel" for dotted in changes):
        params["embedded"] = embedded_pairs(params["panel"])
    path.write_text(yaml.safe_dump(params, sort_keys=False))


ONLY_DEFAULT = copy.deepcopy(DEFAULTS["panel"])  # a panel of the default system alone


def read_metrics(project: Path, system: str = "default") -> dict:
    return json.loads((project / "metrics" / "panel" / system / "metrics.json").read_text())


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The stage scripts, params and a two-document corpus, without git or DVC."""
    shutil.copytree(ROOT / "stages", tmp_path / "stages")
    shutil.copy(ROOT / "params.yaml", tmp_path)
    (tmp_path / "data" / "docs").mkdir(parents=True)
    for name in ("question_prompt.txt", "handwritten_questions.jsonl"):
        shutil.copy(ROOT / "data" / name, tmp_path / "data")
    (tmp_path / "data" / "docs" / "a.md").write_text("SQLite is a library. " * 30)
    set_params(tmp_path, **{"load.source": "data/docs"})
    return tmp_path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A fresh repository holding the project with a slice of the bundled sample."""
    return copy_project(tmp_path / "project")


@dataclass(frozen=True)
class Reproduced:
    project: Path  # the slice project after its first `dvc repro`, outputs not committed
    output: str  # what that repro printed


@pytest.fixture(scope="session")
def reproduced_template(tmp_path_factory: pytest.TempPathFactory) -> Reproduced:
    """One cold `dvc repro` of the slice project (an empty run-cache before it) per test process;
    tests that start from a reproduced project copy it (`reproduced`) instead of each paying for
    their own, and must not change it."""
    project = copy_project(tmp_path_factory.mktemp("template") / "project")
    return Reproduced(project, dvc("repro", cwd=project).stdout)


@pytest.fixture
def reproduced(reproduced_template: Reproduced, tmp_path: Path) -> Path:
    """A copy of the reproduced slice project (git history, DVC cache, run-cache and outputs), as
    a user's repository stands after their first `dvc repro`."""
    return Path(shutil.copytree(reproduced_template.project, tmp_path / "project", symlinks=True))


@pytest.fixture
def stub(monkeypatch):
    """The LLM stub server (stub_llm.StubLLM) as the Anthropic endpoint, with a test key; no other
    provider's key or URL, and no lock wait, leaks in from the environment."""
    from stub_llm import StubLLM

    with StubLLM() as server:
        for name in ("ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "OPENAI_BASE_URL", "RETRIEVAL_BENCH_LOCK_WAIT"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """The index types retrieval.ann.build_index is called for, in order (test_ann, test_ann_integrity)."""
    from retrieval_bench.retrieval import ann

    made: list[str] = []
    build = ann.build_index

    def counted(vectors, settings, *args, **kwargs):
        made.append(settings.index)
        return build(vectors, settings, *args, **kwargs)

    monkeypatch.setattr(ann, "build_index", counted)
    return made
