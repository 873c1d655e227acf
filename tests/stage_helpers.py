"""Stages run as the tests that check their wiring run them: as a subprocess, or in this process
(no interpreter start-up), and the one-line error every bad input must end in."""

from __future__ import annotations

import subprocess
import sys

from conftest import run

from retrieval_bench.core import paths

# The arguments of the stages that take them (a chunking, an embedder): the single system's.
STAGE_ARGUMENTS = {
    "chunk": [paths.DEFAULT],
    "embed_corpus": [paths.DEFAULT, paths.DEFAULT],
    "embed_questions": [paths.DEFAULT],
    "retrieve": [paths.DEFAULT],
    "score": [paths.DEFAULT],
}


def stage(name, cwd):
    """A stage as a subprocess: the wiring (exit status, stderr) is what these tests check."""
    return run([sys.executable, "-m", f"stages.{name}", *STAGE_ARGUMENTS.get(name, [])], cwd=cwd, check=False)


def stage_in_process(name, cwd, monkeypatch, capsys):
    """The same stage run in this process (no interpreter start-up): its exit status and output."""
    import importlib
    import inspect

    from retrieval_bench.core.stage import run_stage

    monkeypatch.chdir(cwd)
    capsys.readouterr()
    main = importlib.import_module(f"stages.{name}").main
    try:
        if inspect.signature(main).parameters:  # a stage that reads its command line
            run_stage(lambda: main(list(STAGE_ARGUMENTS.get(name, []))), own_arguments=True)
        else:
            run_stage(main)
        status = 0
    except SystemExit as stop:
        status = stop.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([name], status, out, err)


def assert_one_line_error(result, *fragments):
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
