"""Issue 41, the faces: a resample count that would never finish, `lock prune` beside a running
`dvc repro` or killed mid-write or given a lock that is not UTF-8, `show --against` a revision that
does not exist, an empty golden set, an embedder's model that cannot be found. Each is one line
naming what the user gave and what was expected, and nothing is lost or left behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from conftest import dvc, git, run, tool_env

import retrieval_bench as rb
from retrieval_bench.cli import main as cli_main
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import atomic_path
from retrieval_bench.core.params_panel import embedded_pairs
from retrieval_bench.evaluation.stats import MAX_RESAMPLES
from retrieval_bench.lockfile import prune

QRELS = {f"q{i}": {f"c{i}": 1} for i in range(30)}
HANG_GUARD_S = 60  # fires only when a call runs on (the unbounded resampling): the test fails instead


@contextmanager
def hang_guard() -> Iterator[None]:
    def give_up(*_):
        raise TimeoutError(f"still running after {HANG_GUARD_S}s")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(HANG_GUARD_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def differing_runs() -> tuple[rb.Scores, rb.Scores]:
    """Two scored runs of 30 questions that differ on most of them (so nothing is exact or zero)."""
    first = {qid: {next(iter(judged)): 0.9, "other": 0.5} for qid, judged in QRELS.items()}
    second = {
        qid: {next(iter(judged)): 0.1 if int(qid[1:]) % 3 else 0.9, "other": 0.5} for qid, judged in QRELS.items()
    }
    return rb.score(QRELS, first), rb.score(QRELS, second)


# --- unbounded resampling -------------------------------------------------------------------------------
def test_the_api_refuses_more_resamples_than_the_maximum_at_once():
    a, b = differing_runs()
    with hang_guard(), pytest.raises(InputError) as error:
        rb.compare(a, b, resamples=10**9)
    assert str(error.value) == f"resamples must be a whole number from 1 to {MAX_RESAMPLES}, got 1000000000"
    assert rb.compare(a, b, resamples=MAX_RESAMPLES).resamples == MAX_RESAMPLES  # the maximum itself is accepted


def test_compare_refuses_more_resamples_than_the_maximum_in_one_line(tmp_path, monkeypatch, capsys):
    a, b = differing_runs()
    table = tmp_path / "metrics" / "panel" / "default" / "per_question.csv"
    table.parent.mkdir(parents=True)
    a.per_question.to_csv(table, index=False)
    git("init", "-q", "-b", "main", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "A", cwd=tmp_path)
    b.per_question.to_csv(table, index=False)
    monkeypatch.chdir(tmp_path)
    with hang_guard():
        status = cli_main(["compare", "main", "workspace", "--resamples", "200000000"])
    assert status == 1
    said = capsys.readouterr().err
    assert said == f"error: --resamples must be between 1 and {MAX_RESAMPLES}, got 200000000\n"


# --- the Python API and `show` --------------------------------------------------------------------------
def test_an_empty_golden_set_is_named_not_an_empty_list_of_qids(tmp_path):
    """rb.score([]) said "no question of the labels is in the run (qids such as )"."""
    with pytest.raises(InputError, match=r"^labels: no question; expected golden-set rows, each with a qid"):
        rb.score([], {"q1": {"c1": 0.5}})
    empty = tmp_path / "goldenset.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match=rf"^{empty}: no question; expected golden-set rows"):
        rb.score(empty, {"q1": {"c1": 0.5}})


def test_show_against_a_revision_that_does_not_exist_fails_naming_it(tmp_path, monkeypatch, capsys):
    """It printed the run with "nothing committed to compare with" and exited 0."""
    metrics = tmp_path / "metrics" / "panel" / "default" / "metrics.json"
    metrics.parent.mkdir(parents=True)
    metrics.write_text(json.dumps({"mrr": 0.6, "n_questions": 40}))
    git("init", "-q", "-b", "main", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "baseline", cwd=tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli_main(["show", "--against", "no-such-rev"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: no-such-rev: not a git revision or DVC experiment name\n"
    assert cli_main(["show", "--against", "main"]) == 0
    assert "change against main" in capsys.readouterr().out


def test_a_project_command_below_the_root_names_the_root(tmp_path, monkeypatch, capsys):
    """From data/, `show` said "metrics.json not found; run `dvc repro` first" of a project whose
    run was there, and `compare HEAD workspace` "no per_question.csv committed" of a committed one."""
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path / "data")
    assert cli_main(["show"]) == 1
    assert (
        capsys.readouterr()
        .err.rstrip()
        .endswith(f"(this is {tmp_path / 'data'}, below the project root {tmp_path}: run `retrieval-bench show` there)")
    )
    monkeypatch.chdir(tmp_path)
    assert cli_main(["show"]) == 1
    assert "below the project root" not in capsys.readouterr().err


def test_ctrl_c_in_a_command_is_one_line_and_status_130(monkeypatch, capsys):
    """`retrieval-bench compare` and `gauge` interrupted printed KeyboardInterrupt's traceback."""
    from retrieval_bench import show

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(show, "run", interrupted)
    assert cli_main(["show"]) == 130
    assert capsys.readouterr().err == "\ninterrupted\n"


# --- an embedder's model --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("embedders", "embed_model", "named"),
    [
        pytest.param({"e5": {"model": "no/such-model"}}, None, "embedders.e5.model 'no/such-model'", id="its-own"),
        pytest.param({"e5": {"max_seq_length": 64}}, "no/such-model", "embed.model 'no/such-model'", id="embeds"),
    ],
)
def test_a_model_that_cannot_be_found_is_named_by_the_key_that_set_it(
    workdir, monkeypatch, embedders, embed_model, named
):
    """An embedder's own model that could not be found was reported as embed.model."""
    from stages import embed_questions

    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["embedders"] = {"default": {}, **embedders}
    params["panel"] = {"default": {"chunking": "default", "embedder": "default"}}
    params["embedded"] = embedded_pairs(params["panel"])
    if embed_model is not None:
        params["embed"]["model"] = embed_model
    (workdir / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (workdir / "data").mkdir(exist_ok=True)
    (workdir / "data" / "goldenset.jsonl").write_text(json.dumps({"qid": "q1", "question": "what is a WAL?"}) + "\n")
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError) as error:
        embed_questions.main(["e5"])
    assert str(error.value).startswith(f"{named}: not a local path"), error.value


# --- `retrieval-bench lock prune` -------------------------------------------------------------------------
# A foreach stage over the panel whose command waits while the file `hold` exists: a `dvc repro`
# held in the middle, as a long stage holds it.
PIPELINE = """
stages:
  system:
    foreach: ${panel}
    do:
      cmd: python system.py ${key}
      params:
        - panel.${key}.depth
      outs:
        - out/${key}.txt
"""
SYSTEM = """import os, sys, time
open(f"started-{sys.argv[1]}", "w").close()
while os.path.exists("hold"):
    time.sleep(0.05)
open(f"out/{sys.argv[1]}.txt", "w").write(sys.argv[1])
"""
# dvc.lock as DVC writes it for systems a and b, when dvc.yaml defines only a: b's entry is stale.
LOCK_WITH_A_STALE_ENTRY = """schema: '2.0'
stages:
  system@a:
    cmd: python system.py a
    outs:
    - path: out/a.txt
      hash: md5
      md5: 0cc175b9c0f1b6a831c399e269772661
      size: 1
  system@b:
    cmd: python system.py b
    outs:
    - path: out/b.txt
      hash: md5
      md5: 92eb5ffee6ae2fec3ad71c777531578f
      size: 1
"""


def set_panel(project: Path, names: list[str]) -> None:
    (project / "params.yaml").write_text(yaml.safe_dump({"panel": {name: {"depth": 1} for name in names}}))


def dvc_project(root: Path, names: list[str], scm: bool = True) -> Path:
    root.mkdir()
    (root / "dvc.yaml").write_text(PIPELINE)
    (root / "system.py").write_text(SYSTEM)
    (root / "out").mkdir()
    set_panel(root, names)
    if scm:
        git("init", "-q", "-b", "main", cwd=root)
    dvc("init", "-q", *(() if scm else ("--no-scm",)), cwd=root)
    return root


def lock_stages(project: Path) -> set[str]:
    return set(yaml.safe_load((project / "dvc.lock").read_text())["stages"])


def lock_prune(project: Path, *args: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "retrieval_bench.cli", "lock", "prune", *args], cwd=project, check=False)


def prune_in_a_process(project: Path, dry_run: bool = False) -> list[str]:
    """lockfile.prune run as a command runs it: in a process of its own. After a killed prune, DVC
    logs that it removed the dead process's lock entry, through a handler an earlier in-process DVC
    call may have bound to a stream pytest has since closed."""
    code = "import json, sys; from pathlib import Path; from retrieval_bench.lockfile import prune; "
    code += f"print(json.dumps(prune(Path.cwd(), dry_run={dry_run})))"
    return json.loads(run([sys.executable, "-c", code], cwd=project).stdout.splitlines()[-1])


def wait_for(path: Path, process: subprocess.Popen, limit_s: float = 300) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


@pytest.mark.pipeline
def test_prune_refuses_while_a_repro_runs_and_no_entry_is_lost(tmp_path):
    """A prune between two stages of a `dvc repro` wrote back a dvc.lock without the entry DVC had
    just added: the repro exited 0, then `dvc status` showed those stages changed."""
    project = dvc_project(tmp_path / "project", ["a", "b"])
    dvc("repro", "-q", cwd=project)
    set_panel(project, ["a", "c"])  # b's entry is now stale; c is new
    (project / "hold").touch()
    repro = subprocess.Popen(
        [sys.executable, "-m", "dvc", "repro", "-q"],
        cwd=project,
        env=tool_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(project / "started-c", repro)  # the repro in the middle: a done, c running
        refused = lock_prune(project)
    finally:
        (project / "hold").unlink(missing_ok=True)
        out, err = repro.communicate(timeout=300)
    assert repro.returncode == 0, out + err
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr.startswith("error: dvc.lock: not pruned: another DVC process")
    assert refused.stderr.count("\n") == 1 and "(.dvc/tmp/rwlock)" in refused.stderr, refused.stderr
    assert lock_stages(project) == {"system@a", "system@b", "system@c"}
    assert dvc("status", "--json", cwd=project).stdout.strip() == "{}"
    done = lock_prune(project)  # the repro over, the stale entry goes and every other stays
    assert done.returncode == 0 and done.stdout == "dvc.lock: dropped 1 stale entry: system@b\n", done.stderr
    assert dvc("status", "--json", cwd=project).stdout.strip() == "{}"


def test_a_prune_killed_mid_write_leaves_a_temporary_file_the_next_prune_removes(tmp_path):
    project = dvc_project(tmp_path / "project", ["a"], scm=False)
    (project / "dvc.lock").write_text(LOCK_WITH_A_STALE_ENTRY)
    killed = run(
        [
            sys.executable,
            "-c",
            "import os, signal\n"
            "from pathlib import Path\n"
            "import dvc.utils.serialize\n"
            "import retrieval_bench.lockfile as lockfile\n"
            "def write_then_die(data):\n"  # called with the temporary file open, before it is renamed
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
            "dvc.utils.serialize.dumps_yaml = write_then_die\n"
            "lockfile.prune(Path.cwd())\n",
        ],
        cwd=project,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (project / "dvc.lock").read_text() == LOCK_WITH_A_STALE_ENTRY  # untouched by the killed prune
    assert prune_in_a_process(project, dry_run=True) == ["system@b"]  # a dry run changes nothing
    leftovers = [path.name for path in project.glob(".dvc.lock.*.tmp")]
    assert len(leftovers) == 1, leftovers  # the trap: what a killed prune leaves
    assert prune_in_a_process(project) == ["system@b"]
    assert not list(project.glob(".dvc.lock.*")), "the killed prune's temporary file is still there"
    assert lock_stages(project) == {"system@a"}


def test_a_lock_that_is_not_utf8_is_one_line_naming_it(tmp_path):
    project = dvc_project(tmp_path / "project", ["a"], scm=False)
    (project / "dvc.lock").write_bytes(LOCK_WITH_A_STALE_ENTRY.encode().replace(b"system@b", b"system@\xff"))
    before = (project / "dvc.lock").read_bytes()
    failed = lock_prune(project)
    assert failed.returncode == 1
    line = LOCK_WITH_A_STALE_ENTRY.splitlines().index("  system@b:") + 1
    assert failed.stderr == f"error: {project / 'dvc.lock'}:{line}: not UTF-8 text\n", failed.stderr
    assert (project / "dvc.lock").read_bytes() == before


def test_a_lock_whose_stage_is_no_mapping_is_named_not_dvc_yaml(tmp_path):
    """DVC's check said "dvc.yaml: './dvc.lock' validation failed" for `stages: {foo: 3}`."""
    project = dvc_project(tmp_path / "project", ["a"], scm=False)
    (project / "dvc.lock").write_text("schema: '2.0'\nstages:\n  foo: 3\n")
    failed = lock_prune(project)
    assert failed.returncode == 1
    assert failed.stderr == f"error: {project / 'dvc.lock'}: stage 'foo' is 3, not a mapping as DVC writes it\n"


def test_a_lock_that_is_a_folder_is_one_line_naming_it(tmp_path):
    """`lock prune` with dvc.lock a folder exited 0 and said nothing."""
    project = dvc_project(tmp_path / "project", ["a"], scm=False)
    (project / "dvc.lock").mkdir()
    failed = lock_prune(project)
    assert failed.returncode == 1
    assert failed.stderr.startswith(f"error: {project / 'dvc.lock'}: not a regular file;"), failed.stderr


def test_prune_refuses_while_another_dvc_process_holds_the_repository_lock(tmp_path):
    """The lock a running `dvc repro` holds, taken here as DVC takes it."""
    from dvc.repo import Repo

    project = dvc_project(tmp_path / "project", ["a"], scm=False)
    (project / "dvc.lock").write_text(LOCK_WITH_A_STALE_ENTRY)
    with Repo(str(project)) as repo, repo.lock:
        with pytest.raises(InputError, match=r"^dvc\.lock: not pruned: another DVC process .*\(\.dvc/tmp/lock\)"):
            prune(project)
        assert (project / "dvc.lock").read_text() == LOCK_WITH_A_STALE_ENTRY
    assert prune(project) == ["system@b"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["compare", "--resamples", "abc"],
            "error: retrieval-bench compare: argument --resamples: invalid int value: 'abc'",
        ),
        (["cache"], "error: retrieval-bench cache: the following arguments are required: cache_command"),
        (["nosuch"], "error: retrieval-bench: argument command: invalid choice: 'nosuch'"),
        (["compare", "--bogus"], "error: retrieval-bench: unrecognized arguments: --bogus"),
        (["export-beir", ""], "error: retrieval-bench export-beir: argument out: an empty path"),
    ],
)
def test_a_command_line_argparse_refuses_is_one_error_line_and_status_2(argv, expected, capsys):
    """cli.md: "an unknown option gives one `error:` line and exit status 2" (it was argparse's usage
    block, and export-beir '' wrote its files into the working folder)."""
    with pytest.raises(SystemExit) as stop:
        cli_main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith(expected), err


def test_an_os_error_of_a_command_is_one_line(tmp_path, monkeypatch, capsys):
    """A path that is a folder, or under no folder: one line naming it, exit 1 (tracebacks before)."""
    monkeypatch.chdir(tmp_path)
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"qid": "q", "question": "Why?", "doc_id": "d", "start": 0, "end": 3}) + "\n")
    chunks = tmp_path / "chunks.parquet"
    import pandas as pd

    pd.DataFrame({"chunk_id": ["c"], "text": ["abc"], "doc_id": ["d"], "start": [0], "end": [3]}).to_parquet(chunks)
    (tmp_path / "taken").write_text("a file\n")
    cases = [
        (
            ["export-beir", "taken", "--chunks", str(chunks), "--goldenset", str(golden), "--min-coverage", "0.5"],
            "error: taken: a file; export-beir writes a folder",
        ),
        (
            [
                "export-beir",
                "/proc/nope/x",
                "--chunks",
                str(chunks),
                "--goldenset",
                str(golden),
                "--min-coverage",
                "0.5",
            ],
            "error: No such file or directory (/proc/nope)",
        ),
    ]
    for argv, expected in cases:
        assert cli_main(argv) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(expected), err
    # gauge --out a folder: its rename failed at the end, naming the temporary file
    with pytest.raises(InputError, match=f"^{tmp_path}: a folder; name a file to write$"):
        with atomic_path(tmp_path):
            pass
