"""Commands' options and files that are not what they expect: one `error:` line naming the option
or file and what was expected (exit 1), never a traceback, a hint that sends the user to the wrong
stage, or a silently wrong result; and output cut short by its reader ends quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import tool_env
from test_echo import ROOT, sample_tables

from retrieval_bench.cli import main

HANDWRITTEN = ROOT / "data" / "handwritten_questions.jsonl"


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """The sample's documents and 800-character chunks where gauge and export-beir look for them."""
    documents, chunks = sample_tables()
    (tmp_path / "data" / "chunkings" / "default").mkdir(parents=True)
    documents.to_parquet(tmp_path / "data" / "documents.parquet", index=False)
    chunks.to_parquet(tmp_path / "data" / "chunkings" / "default" / "chunks.parquet", index=False)
    (tmp_path / "data" / "not_parquet.parquet").write_text("plain text\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def one_error(capsys, argv: list[str]) -> str:
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--min-coverage", "2"], "--min-coverage must be a share in (0, 1], as score.min_coverage, got 2.0"),
        (["--min-coverage", "0"], "--min-coverage must be a share in (0, 1]"),
        (["--chunks", "data/documents.parquet"], "--chunks data/documents.parquet: no column 'chunk_id'"),
        (["--chunks", "data/not_parquet.parquet"], "--chunks data/not_parquet.parquet: not a readable Parquet table"),
        (["--chunks", "data/nope.parquet"], "--chunks data/nope.parquet: not found (run `dvc repro chunk@default`"),
        (["--documents", "data/nope.parquet"], "--documents data/nope.parquet: not found (run `dvc repro load_chunks`"),
        (["--chunks", "data"], "data: expected a file, found a folder"),  # said "not found"
        (
            ["--documents", "data/chunkings/default/chunks.parquet"],
            "is in it twice (a chunk table?); expected the documents, one row per doc_id",
        ),
    ],
)
def test_gauge_refuses_bad_options_in_one_line(workdir, capsys, options, expected):
    assert expected in one_error(capsys, ["gauge", str(HANDWRITTEN), "--out", "gauge.csv", *options])
    assert not (workdir / "gauge.csv").exists()


def test_export_beir_refuses_a_coverage_outside_the_unit_interval(workdir, capsys):
    golden = workdir / "goldenset.jsonl"
    golden.write_text(json.dumps({"qid": "q1", "question": "What?", "doc_id": "a", "start": 0, "end": 1}) + "\n")
    err = one_error(capsys, ["export-beir", "out", "--goldenset", str(golden), "--min-coverage", "5"])
    assert "--min-coverage must be a share in (0, 1], as score.min_coverage, got 5.0" in err
    assert not (workdir / "out").exists()


def test_export_questions_refuses_what_is_not_a_golden_set_and_an_unknown_format(workdir, capsys):
    err = one_error(capsys, ["export-questions", "q.jsonl", "--goldenset", str(HANDWRITTEN)])
    assert f"{HANDWRITTEN}:1: no qid and question; export-questions --goldenset expects a golden set" in err
    golden = workdir / "goldenset.jsonl"
    golden.write_text(json.dumps({"qid": "q1", "question": "What?"}) + "\n")
    err = one_error(capsys, ["export-questions", "q.csv", "--goldenset", str(golden)])
    assert "q.csv: expected a .jsonl, .tsv or queries.jsonl (BEIR) file to write" in err
    assert not (workdir / "q.jsonl").exists() and not (workdir / "q.csv").exists()
    assert main(["export-questions", "q.tsv", "--goldenset", str(golden)]) == 0
    assert (workdir / "q.tsv").read_text() == "q1\tWhat?\n"
    err = one_error(capsys, ["export-questions", "q2.jsonl", "--goldenset", str(workdir)])  # said "not found"
    assert f"{workdir}: expected a file, found a folder" in err
    (workdir / "empty.jsonl").write_text("")
    err = one_error(capsys, ["export-questions", "q3.jsonl", "--goldenset", "empty.jsonl"])  # wrote 0 questions
    assert "empty.jsonl: empty; a golden set holds at least one question" in err and not (workdir / "q3.jsonl").exists()


def test_a_mistyped_system_is_named_with_the_systems_there_are(workdir, capsys):
    for system in ("default", "bm25"):
        (workdir / "metrics" / "panel" / system).mkdir(parents=True)
        (workdir / "metrics" / "panel" / system / "metrics.json").write_text("{}")
    systems = "no panel system 'Default' here (systems: bm25, default)"
    assert systems in one_error(capsys, ["show", "--system", "Default"])
    assert systems in one_error(capsys, ["compare", "workspace", "workspace", "--system", "Default"])


def test_output_cut_short_by_its_reader_ends_quietly(workdir):
    """`retrieval-bench gauge ... | head -1`: the shell's 141 (SIGPIPE), no BrokenPipeError traceback.
    The reader is gone before the first write (a pipe whose read end is closed), so the test does
    not depend on whether the output outgrows the pipe's buffer before `head` exits."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "retrieval_bench.cli", "gauge", str(HANDWRITTEN), "--show", "200"],
            cwd=workdir,
            env=tool_env(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr, result.stderr


def test_show_names_a_report_that_is_not_json_instead_of_a_traceback(workdir, capsys):
    (workdir / "metrics" / "panel" / "default").mkdir(parents=True)
    (workdir / "metrics" / "panel" / "default" / "metrics.json").write_text("<<<<<<< HEAD\n")
    err = one_error(capsys, ["show"])
    assert "metrics/panel/default/metrics.json:1: invalid JSON" in err and "`git checkout`" in err


@pytest.mark.parametrize("command", [["gauge", str(HANDWRITTEN)], ["compare"]])
def test_a_negative_show_is_argparses_one_usage_error(workdir, capsys, command):
    with pytest.raises(SystemExit) as stopped:
        main([*command, "--show", "-1"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "argument --show: '-1': expected a whole number, 0 or more" in err


def test_a_system_in_params_not_yet_scored_is_told_to_run_dvc(workdir, capsys):
    """A system added to params.yaml's panel and not yet run was "no panel system here"."""
    (workdir / "metrics" / "panel" / "default").mkdir(parents=True)
    (workdir / "metrics" / "panel" / "default" / "metrics.json").write_text("{}")
    panel = {"default": {"chunking": "default", "embedder": "default"}, "dense-d20": {"depth": 20}}
    (workdir / "params.yaml").write_text(yaml.safe_dump({"panel": panel}))
    said = "panel system 'dense-d20' is in params.yaml but not scored yet: run `dvc repro`"
    assert said in one_error(capsys, ["show", "--system", "dense-d20"])


def test_an_output_naming_an_input_is_refused_before_anything_is_read_or_written(workdir, capsys):
    """`gauge Q --out Q` replaced the question set (and `--out` a DVC-tracked chunk table) with its
    CSV, and `export-questions data/goldenset.jsonl` the golden set with bare questions; exit 0."""
    questions = workdir / "q.jsonl"
    questions.write_bytes(HANDWRITTEN.read_bytes())
    chunks = workdir / "data" / "chunkings" / "default" / "chunks.parquet"
    before = {path: path.read_bytes() for path in (questions, chunks)}
    for out, named in (
        (questions, "FILE"),
        (chunks, "--chunks"),
        (Path("data/./chunkings/default/chunks.parquet"), "--chunks"),
    ):
        err = one_error(capsys, ["gauge", str(questions), "--out", str(out)])
        assert f"--out {out}: the file {named} reads; write the output to another path" in err
    golden = workdir / "golden.jsonl"
    golden.write_text(json.dumps({"qid": "q1", "question": "Does WAL block readers?"}) + "\n")
    before[golden] = golden.read_bytes()
    err = one_error(capsys, ["export-questions", "golden.jsonl", "--goldenset", str(golden)])
    assert "OUT golden.jsonl: the file --goldenset reads" in err
    assert {path: path.read_bytes() for path in before} == before
