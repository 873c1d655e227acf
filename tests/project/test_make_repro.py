"""`make repro` shows each stage the moment DVC starts it (issue 42): the Makefile's recipe run
against a stand-in `dvc` that holds its second stage until the test has read the first stage's line."""

from __future__ import annotations

import io
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from retrieval_bench.repro_log import expected_time, relay

ROOT = Path(__file__).resolve().parents[2]
FAKE_DVC = """#!/bin/bash
case "$1 $2" in
  "config core.remote") exit 1 ;;
  "stage list") printf 'a\\nb@x\\n' ;;
  "repro "*)
    echo "Running stage 'a':"
    while [ ! -e "$GATE" ]; do sleep 0.05; done   # stage b waits for the test
    echo "Stage 'b@x' didn't change, skipping"
    echo 'Use `dvc push` to send your updates to remote storage.' ;;
esac
"""


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def test_make_repro_prints_a_stage_line_before_the_next_stage_ends(tmp_path):
    venv, project = tmp_path / "venv", tmp_path / "project"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()
    (venv / "bin" / "python").symlink_to(sys.executable)
    _executable(venv / "bin" / "dvc", FAKE_DVC)
    _executable(venv / "bin" / "retrieval-bench", "#!/bin/sh\n")
    (project / "stages").mkdir(parents=True)
    (project / "stages" / "__init__.py").touch()
    (project / "stages" / "check_params.py").touch()
    gate = tmp_path / "gate"
    env = {**os.environ, "GATE": str(gate), "PYTHONPATH": str(ROOT / "src")}
    make = subprocess.Popen(
        ["make", "-s", "-f", str(ROOT / "Makefile"), "repro", f"VENV={venv}", "-o", f"{venv}/.installed"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in make.stdout], daemon=True).start()
    seen = []
    try:
        while "Running stage 'a'" not in "".join(seen):  # no line before the gate opens: the test fails here
            seen.append(lines.get(timeout=120))
    finally:
        gate.touch()
    assert make.wait(timeout=120) == 0
    while not lines.empty():
        seen.append(lines.get())
    printed = "".join(seen)
    assert "[1/2] Running stage 'a':" in printed
    assert "[2/2] Stage 'b@x' didn't change, skipping" in printed
    assert "2 stages; a first run of the sample takes about" in printed
    assert "Use `dvc push`" not in printed


def test_relay_numbers_every_stage_dvc_reaches_and_keeps_push_advice_where_a_remote_is():
    out = io.StringIO()
    dvc = [
        "Running stage 'a':\n",
        "> python -m stages.a\n",
        "Stage 'b' is cached - skipping run, checking out outputs\n",
        "Pulling data for stage: 'c@x'\n",  # dvc repro --pull on a clone with a remote
        "Pulling data for stage: 'd'\n",
        "Unable to pull data for stage: 'd'\n",  # then DVC runs it: the same stage, the same number
        "Running stage 'd':\n",
        "Use `dvc push` to send your updates to remote storage.\n",
    ]
    relay(dvc, 4, out, no_remote=False)
    assert out.getvalue().splitlines() == [
        "[1/4] Running stage 'a':",
        "> python -m stages.a",
        "[2/4] Stage 'b' is cached - skipping run, checking out outputs",
        "[3/4] Pulling data for stage: 'c@x'",
        "[4/4] Pulling data for stage: 'd'",
        "Unable to pull data for stage: 'd'",
        "[4/4] Running stage 'd':",
        "Use `dvc push` to send your updates to remote storage.",
    ]
    assert "about 2 min on 4 CPU core(s)" in expected_time(27, 4)  # 5 min on 2 cores, halved, rounded
    assert "first run" not in expected_time(27, 4, first_run=False)  # a rerun: dvc.lock is there


def test_a_fresh_clone_is_a_first_run_though_dvc_lock_is_in_git(tmp_path, monkeypatch, capsys):
    """dvc.lock is committed, so "no dvc.lock" never held on a clone: its first run said "those whose
    inputs changed run again" while every stage was about to run. An empty DVC cache is the test."""
    import io

    from retrieval_bench import repro_log

    monkeypatch.chdir(tmp_path)
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n")
    monkeypatch.setattr(repro_log, "pipeline_stages", lambda: 3)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    repro_log.main([])
    assert "a first run of the sample takes about" in capsys.readouterr().out
    (tmp_path / ".dvc" / "cache" / "files").mkdir(parents=True)
    repro_log.main([])
    assert "those whose inputs changed since the last run (dvc.lock) run again" in capsys.readouterr().out


def test_ctrl_c_leaves_the_relay_running_to_the_end_of_dvcs_output(tmp_path):
    """Ctrl-C in `make repro` reached the line filter too: a KeyboardInterrupt traceback, printed
    before the stage's own "interrupted; ..." line, which it then never relayed."""
    import signal

    _executable(tmp_path / "dvc", FAKE_DVC)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}", "PYTHONUNBUFFERED": "1"}
    relay_process = subprocess.Popen(
        [sys.executable, "-m", "retrieval_bench.repro_log", "--no-remote"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert relay_process.stdin is not None and relay_process.stdout is not None
    relay_process.stdin.write("Running stage 'a':\n")
    relay_process.stdin.flush()
    relay_process.stdout.readline()  # the expected-time line: main runs, so SIGINT is already ignored
    relay_process.send_signal(signal.SIGINT)
    out, err = relay_process.communicate("interrupted; no output was half-written\n", timeout=60)
    assert relay_process.returncode == 0 and "Traceback" not in err
    assert "interrupted; no output was half-written" in out
