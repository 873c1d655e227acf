"""The first hour of a new user (issue 16), in process: every observation, as a test that failed
before it was dealt with. The clean clone against a DVC remote and the whole `make repro` are in
test_first_hour_pipeline.py.

A  a teammate never pays twice: the question cache is fetched from the default remote first
B  progress that tells the truth; what needs no network is checked before any bar; Ctrl-C in one line
C  money printed true; the price of the model actually used, or a refusal
D  `python -m stages.<name> --help` on every stage; the reason behind "no usable question"
E  the SciFact reproduction's own params; no empty outputs for DVC to warn about; duplicate qrels
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import runpy
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, set_params
from llm_helpers import jobs_for
from stub_llm import StubLLM, read_jsonl, run_stage_here, stage_project, start_stage

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError, Interrupted
from retrieval_bench.core.files import read_jsonl as read_rows
from retrieval_bench.core.files import touch_jsonl, write_jsonl
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.stage import progress, run_stage
from retrieval_bench.goldenset import remote
from retrieval_bench.goldenset.generate_settings import GenerationRun
from retrieval_bench.llm.cache.replies import read_cache
from retrieval_bench.llm.cost.guard import check_cost, estimate
from retrieval_bench.llm.cost.prices import usd
from retrieval_bench.llm.cost.settings import Settings
from retrieval_bench.llm.runs.runner import run
from retrieval_bench.llm.runs.tasks import QUESTIONS
from retrieval_bench.llm.transport.errors import StopGeneration

STAGES = sorted(path.stem for path in (ROOT / "stages").glob("*.py") if path.stem != "__init__")


def settings(provider: str = "anthropic", **overrides) -> Settings:
    return Settings.from_params({"provider": provider, "concurrency": 1, "max_retries": 0, **overrides})


def bar_counts(err: str, total: int) -> list[int]:
    """Every count the progress bars printed of `total` (tqdm redraws with \\r)."""
    return [int(n) for n in re.findall(rf"(\d+)/{total}\b", err)]


# --- A: the question cache a teammate pushed is fetched before paying ---------------------------------------
def cache_line(key: str) -> bytes:
    return json.dumps({"key": key, "question": f"What is {key}?", "model": "m"}).encode() + b"\n"


def dvc_repo(tmp_path: Path, pushed: bytes, remote_has_it: bool = True) -> tuple[Path, Path]:
    """A DVC repository whose dvc.lock records the question cache `pushed`, with a default
    local-directory remote holding it (or not)."""
    from dvc.repo import Repo

    root, store = tmp_path / "repo", tmp_path / "remote"
    root.mkdir()
    Repo.init(str(root), no_scm=True).close()
    (root / ".dvc" / "config").write_text(
        f"[core]\n    no_scm = true\n    remote = store\n['remote \"store\"']\n    url = {store}\n"
    )
    md5 = hashlib.md5(pushed).hexdigest()
    store.mkdir()
    if remote_has_it:
        (store / "files" / "md5" / md5[:2]).mkdir(parents=True)
        (store / "files" / "md5" / md5[:2] / md5[2:]).write_bytes(pushed)
    outs = [{"path": "data/question_cache.jsonl", "hash": "md5", "md5": md5, "size": len(pushed)}]
    (root / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"generate_goldenset": {"outs": outs}}}))
    (root / "data").mkdir()
    return root, store


def fetch(root: Path, paying: bool = True, dry_run: bool = False) -> list[str]:
    said: list[str] = []
    remote.fetch_shared_cache(
        GenerationRun("data/question_cache.jsonl", dry_run, said.append),
        "data/question_cache.batches.jsonl",
        "dvc.lock",
        paying,
        root=root,
    )
    return said


def test_a_missing_cache_is_fetched_from_the_default_remote_byte_for_byte(tmp_path):
    pushed = cache_line("k1") + cache_line("k2")
    root, _ = dvc_repo(tmp_path, pushed)
    said = fetch(root)
    assert (root / "data/question_cache.jsonl").read_bytes() == pushed  # the version dvc.lock records
    assert "fetched 2 questions already paid for from DVC remote 'store'" in said[0]
    assert fetch(root) == []  # now it is that version: nothing to do


def test_a_cache_behind_the_pushed_one_gets_only_the_records_it_lacks(tmp_path):
    root, _ = dvc_repo(tmp_path, cache_line("k1") + cache_line("k2") + cache_line("k3"))
    (root / "data/question_cache.jsonl").write_bytes(cache_line("k0") + cache_line("k2"))
    fetch(root)
    assert list(read_cache(root / "data/question_cache.jsonl")) == ["k0", "k2", "k1", "k3"]


def test_a_pushed_cache_that_cannot_be_read_stops_a_paying_run_with_one_line(tmp_path, monkeypatch):
    root, _ = dvc_repo(tmp_path, cache_line("k1"), remote_has_it=False)
    with pytest.raises(InputError) as refused:
        fetch(root)
    message = str(refused.value)
    assert "\n" not in message and "dvc repro --pull" in message and "was `dvc push` run" in message
    assert "going on without it" in fetch(root, paying=False)[0]  # provider none pays nothing: a note
    assert "a real run first fetches" in fetch(root, dry_run=True)[0]
    monkeypatch.setenv(remote.PULL_ENV, "0")
    assert fetch(root) == []  # the user's explicit choice


def test_without_a_default_remote_nothing_is_fetched_or_refused(tmp_path):
    root, _ = dvc_repo(tmp_path, cache_line("k1"), remote_has_it=False)
    (root / ".dvc" / "config").write_text("[core]\n    no_scm = true\n")
    assert fetch(root) == []
    assert not (root / "data/question_cache.jsonl").exists()


# --- B: progress bars that tell the truth; checks before bars; Ctrl-C --------------------------------------
def test_a_missing_key_is_reported_before_any_bar_appears(stub, monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    meta, jobs = jobs_for(3)
    with pytest.raises(InputError, match="ANTHROPIC_API_KEY"):
        run(QUESTIONS, jobs, meta, settings(), tmp_path / "cache.jsonl")
    assert "generate_goldenset (anthropic)" not in capsys.readouterr().err


def test_the_bar_counts_replies_not_failed_requests(stub, capsys, tmp_path):
    stub.faults = ["server_error"] * 2
    meta, jobs = jobs_for(4)
    outcome = run(QUESTIONS, jobs, meta, settings(), tmp_path / "cache.jsonl")
    assert outcome.succeeded == 2 and len(outcome.failed) == 2
    err = capsys.readouterr().err
    assert max(bar_counts(err, 4)) == 2 and "2 failed" in err


def test_a_server_that_is_down_shows_no_progress(stub, capsys, tmp_path):
    """Observed: with the server down the bar reached 61% with no reply received."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    meta, jobs = jobs_for(6, provider="openai-compatible")
    with pytest.raises(StopGeneration, match="refused"):
        run(
            QUESTIONS,
            jobs,
            meta,
            settings("openai-compatible", base_url=f"http://127.0.0.1:{port}/v1", concurrency=2, max_retries=3),
            tmp_path / "c.jsonl",
        )
    assert set(bar_counts(capsys.readouterr().err, 6)) == {0}


def test_a_bar_ends_at_its_total_and_prints_the_last_count_once(capsys):
    with progress(5, "retrieve (run-file)") as bar:  # a method that reports nothing as it goes
        bar.update(2)
    err = capsys.readouterr().err
    assert bar_counts(err, 5) == [0, 5] and "q/s]" in err and re.search(r"\[\d\d:\d\d<\d\d:\d\d", err)  # rate, ETA
    # in a log (stderr not a terminal) each count is a whole line: a reader of the log sees it at once
    lines = [line for line in err.split("\n") if line]
    assert "\r" not in err and [line.split(":")[0] for line in lines] == ["retrieve (run-file)"] * 2
    with progress(5, "generate") as bar:  # a message beside the bar (a failure, a pause): a clean line too
        bar.write("generate: HTTP 429 asked to wait 100000s", file=sys.stderr)
    err = capsys.readouterr().err
    assert "\r" not in err and "\ngenerate: HTTP 429 asked to wait 100000s\n" in err
    with pytest.raises(RuntimeError), progress(5, "score") as bar:
        bar.update(3)
        raise RuntimeError("a failing step")
    assert bar_counts(capsys.readouterr().err, 5) == [0, 3]  # the truth, not n/n


def test_a_bar_that_stands_still_shows_it_is_alive_until_it_closes(capsys, monkeypatch):
    """A local LLM taking 40 s a reply left `0/3 [00:00<?` on screen, its clock frozen, and a log
    (make repro) without a line: the bar is drawn again while its count stands still."""
    import time

    from retrieval_bench.core import stage

    monkeypatch.setattr(stage, "HEARTBEAT_SECONDS", {"terminal": 0.02, "log": 0.02})
    err = ""
    with progress(3, "generate"):
        for _ in range(500):  # until two heartbeats are in, however slow the machine
            err += capsys.readouterr().err
            if len(bar_counts(err, 3)) >= 3:
                break
            time.sleep(0.01)
    assert bar_counts(err, 3)[:3] == [0, 0, 0]  # the first draw, then heartbeats, each a whole line
    capsys.readouterr()
    time.sleep(0.1)
    assert capsys.readouterr().err == ""  # closed: no beat after it


def test_sigterm_stops_a_stage_as_ctrl_c_does_with_its_line():
    """Stopped by `timeout`, a cancelled CI job or `docker stop`, a stage exited 143 at once with
    no "interrupted; ..." line (a generation's kept replies unsaid) and its bar left open."""
    import signal
    import subprocess

    script = (
        "import time\n"
        "from retrieval_bench.core.stage import run_stage\n"
        "def main():\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(120)\n"
        "run_stage(main)\n"
    )
    stage = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert stage.stdout.readline() == "ready\n"
    stage.send_signal(signal.SIGTERM)
    _, err = stage.communicate(timeout=60)
    assert stage.returncode == 143
    assert (
        err.strip() == "interrupted; no output was half-written (each is replaced whole or not at all): rerun to finish"
    )


def test_ctrl_c_in_any_stage_is_one_line(capsys):
    def main():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exited:
        run_stage(main)
    assert exited.value.code == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interrupted; no output was half-written")

    def generating():
        raise Interrupted(
            "interrupted; 3 replies are kept in data/question_cache.jsonl, a rerun asks only for the rest"
        )

    with pytest.raises(SystemExit):
        run_stage(generating)
    assert (
        capsys.readouterr().err.strip()
        == "interrupted; 3 replies are kept in data/question_cache.jsonl, a rerun asks only for the rest"
    )


def test_ctrl_c_while_generating_says_what_is_kept_and_the_rerun_asks_only_for_the_rest(tmp_path):
    """Observed: Ctrl-C printed a raw traceback."""
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 16, "generate.concurrency": 2})
    cache = project / "data/question_cache.jsonl"
    with StubLLM() as stub:
        stub.latency = 0.5  # 12 replies still to come take 3 s: time for the signal on a loaded machine
        process = start_stage(project, stub)
        while len(read_jsonl(cache)) < 4:
            assert process.poll() is None, process.communicate()
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=600)
        assert process.returncode == 130 and "Traceback" not in err, err
        kept = len(read_jsonl(cache))
        assert (
            err.strip()
            .splitlines()[-1]
            .startswith(f"interrupted; {kept} replies are kept in data/question_cache.jsonl ($")
        ), err
        assert "a rerun asks only for the rest" in err
        stub.reset_counts()
        status, _, err = run_stage_here(project, stub)
        assert status == 0, err
        assert len(stub.generation_requests()) == 16 - kept


# --- C: money and prices ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (0.001, "$0.001"),
        (5.0, "$5.00"),
        (0.0094, "$0.0094"),
        (19.1845, "$19.18"),
        (1234.5, "$1,234.50"),
        (0.0, "$0.00"),
        (0.00104, "$0.00104"),
    ],
)
def test_money_is_printed_with_the_digits_it_takes_to_be_true(amount, shown):
    assert usd(amount) == shown


def test_a_limit_of_a_tenth_of_a_cent_is_not_printed_as_zero():
    """Observed: a limit of $0.001 printed as "$0.00"."""
    est = estimate(["x" * 3500] * 3, settings(max_cost_usd=0.001))
    with pytest.raises(InputError) as refused:
        check_cost(est, settings(max_cost_usd=0.001))
    assert "generate.max_cost_usd $0.001;" in str(refused.value) and "$0.00 " not in str(refused.value)
    assert usd(5.001, against=5.0) == "$5.001"  # two amounts compared never print alike


@pytest.mark.parametrize(
    ("provider", "model", "base_url", "prices"),
    [
        ("anthropic", "claude-haiku-4-5", None, (1, 5)),
        ("anthropic", "claude-sonnet-4-5", None, (3, 15)),
        ("anthropic-batch", "claude-opus-4-1", None, (15, 75)),
        ("anthropic", "claude-sonnet-4-5-20250929", None, (3, 15)),
        ("openai-compatible", "qwen2.5:7b", "http://localhost:11434/v1", (0, 0)),
        ("openai-compatible", "qwen2.5:7b", "http://127.0.0.1:8000/v1", (0, 0)),
    ],
)
def test_the_price_is_the_model_in_uses(provider, model, base_url, prices):
    """Observed: Haiku's prices were applied silently to claude-sonnet-4-5, claude-opus-4-1 and qwen2.5:7b."""
    chosen = settings(provider, model=model, base_url=base_url)
    assert (chosen.input_per_mtok, chosen.output_per_mtok) == prices
    assert chosen.cost(1e6, 1e6) == pytest.approx(sum(prices) * (0.5 if provider == "anthropic-batch" else 1))
    line = estimate(["x" * 350], chosen).describe(chosen)
    assert f"{usd(prices[0])}/{usd(prices[1])} per million" in line
    assert ("local server" if not prices[0] else f"price table for {model}") in line


@pytest.mark.parametrize(
    ("provider", "model", "base_url"),
    [
        ("anthropic", "claude-3-7-sonnet-latest", None),
        ("openai-compatible", "gpt-4o", None),
        ("openai-compatible", "qwen2.5:7b", "http://gpu-box.internal:8000/v1"),
    ],
)
def test_an_unknown_paid_model_needs_an_explicit_price(provider, model, base_url):
    with pytest.raises(InputError) as refused:
        settings(provider, model=model, base_url=base_url)
    assert "set generate.price" in str(refused.value) and model in str(refused.value)
    chosen = settings(provider, model=model, base_url=base_url, price={"input_per_mtok": 2.5, "output_per_mtok": 10})
    assert (chosen.input_per_mtok, chosen.output_per_mtok, chosen.batch_discount, chosen.price_source) == (
        2.5,
        10,
        0.5,
        "generate.price",
    )


def test_an_explicit_price_wins_over_the_table():
    chosen = settings(
        model="claude-sonnet-4-5", price={"input_per_mtok": 2.0, "output_per_mtok": 8.0, "batch_discount": 0.4}
    )
    assert (chosen.input_per_mtok, chosen.output_per_mtok, chosen.batch_discount) == (2.0, 8.0, 0.4)


@pytest.mark.parametrize(
    ("price", "message"),
    [
        (None, None),
        ({"input_per_mtok": 3, "output_per_mtok": 15}, None),
        (
            {"input": 3, "output_per_mtok": 15},
            "unknown key params.generate.price.input; did you mean params.generate.price.input_per_mtok?",
        ),
        ({"input_per_mtok": 3}, "params.generate.price needs output_per_mtok"),
        ("cheap", "params.generate.price must be null (the price table) or a mapping"),
        ({"input_per_mtok": -1, "output_per_mtok": 1}, "generate.price needs prices >= 0"),
    ],
)
def test_generate_price_is_null_or_a_price(tmp_path, price, message):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"generate": {"price": price}}))
    if message is None:
        assert load_all_params(path)["generate"]["price"] == price
    else:
        with pytest.raises(InputError, match=re.escape(message)):
            load_all_params(path)


# --- D: the command line ----------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
@pytest.mark.parametrize("name", STAGES)
def test_every_stage_prints_its_help_and_exits_0_without_running(name, tmp_path, monkeypatch, capsys):
    """Observed: `python -m stages.score --help` ran the stage; generate_goldenset's help stopped mid-sentence."""
    monkeypatch.chdir(tmp_path)  # no params.yaml here: a stage that ran would fail
    monkeypatch.setattr(sys, "argv", ["python", "--help"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module(f"stages.{name}", run_name="__main__", alter_sys=True)
    out = capsys.readouterr().out
    assert exited.value.code == 0 and out.startswith(f"usage: python -m stages.{name}")
    doc = importlib.import_module(f"stages.{name}").__doc__.strip()
    assert " ".join(doc.split()) in " ".join(out.split())  # the whole description, to its last sentence
    assert list(tmp_path.iterdir()) == []


def test_a_stage_run_as_a_command_prints_help_and_refuses_unknown_arguments_in_one_line(tmp_path):
    import subprocess

    command = [sys.executable, "-m", "stages.check_params"]
    shown = subprocess.run([*command, "--help"], cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0 and "Stage 0" in shown.stdout
    refused = subprocess.run([*command, "--bogus"], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 2
    assert (
        refused.stderr.strip() == "error: python -m stages.check_params: unrecognized arguments: --bogus (see --help)"
    )


def test_export_beir_documents_its_options(capsys):
    from retrieval_bench.cli import main

    with pytest.raises(SystemExit):
        main(["export-beir", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"--chunks CHUNKS chunk table (default: {paths.CHUNKS})" in out
    assert "--goldenset GOLDENSET golden set (default: data/goldenset.jsonl)" in out


def test_no_usable_question_with_ready_chunks_says_the_hand_written_ones_were_for_other_ids(
    tmp_path, monkeypatch, capsys
):
    """Observed: with ready chunks, "no usable question" without saying that the 180 hand-written
    questions were skipped because their doc_id was not a chunk id."""
    import shutil

    shutil.copytree(ROOT / "stages", tmp_path / "stages")
    shutil.copy(ROOT / "params.yaml", tmp_path)
    (tmp_path / "data").mkdir()
    for name in ("question_prompt.txt", "handwritten_questions.jsonl"):
        shutil.copy(ROOT / "data" / name, tmp_path / "data")
    (tmp_path / "data" / "chunks.jsonl").write_text('{"id": "c1", "text": "SQLite is a library."}\n')
    set_params(tmp_path, **{"load.source": "data/chunks.jsonl"})
    monkeypatch.chdir(tmp_path)
    run_stage(importlib.import_module("stages.load_chunks").main)
    with pytest.raises(SystemExit):
        run_stage(lambda: importlib.import_module("stages.generate_goldenset").main([]))
    err = capsys.readouterr().err
    n = len(read_rows(ROOT / "data" / "handwritten_questions.jsonl"))
    assert f"{n} hand-written questions were skipped because their doc_id is not a document id of this corpus" in err
    assert "doc_id must be a chunk id" in err


# --- E: reproducibility and noise -------------------------------------------------------------------------
def test_reproduce_scifact_pins_its_own_params(tmp_path, monkeypatch):
    """Observed: `make reproduce-scifact` took score.k and embed.model from the workspace."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # where the script finds bench/common.py
    spec = importlib.util.spec_from_file_location("reproduce_scifact", ROOT / "bench" / "reproduce_scifact.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({"embed": {"model": "BAAI/bge-small-en-v1.5"}, "score": {"k": [1, 5]}})
    )
    monkeypatch.chdir(tmp_path)  # a workspace with an experiment left in it, wherever the script looks for it
    monkeypatch.setattr(sys.modules["common"], "ROOT", tmp_path)
    monkeypatch.setattr(script, "ROOT", tmp_path, raising=False)
    params = script.scifact_params(Path("/data/scifact"))
    assert (
        params["embed"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
        and params["embed"]["max_seq_length"] == 256
    )
    assert (
        10 in params["score"]["k"]
        and params["retrieval"]["method"] == "dense"
        and params["generate"]["max_questions"] == 0
    )
    assert params["load"]["source"] == "/data/scifact"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    # complete and valid: loading adds nothing but the resolved default chunking, embedder and
    # system (each the pinned load.chunking, embed and retrieval as they are)
    assert params["chunkings"] == {"default": {}} and params["embedders"] == {"default": {}}
    assert load_all_params(tmp_path / "params.yaml") == {
        **params,
        "chunkings": {"default": params["load"]["chunking"]},
        "embedders": {"default": params["embed"]},
        "panel": {"default": {**params["retrieval"], "chunking": "default", "embedder": "default"}},
    }


def test_jsonl_outputs_are_never_empty_files(tmp_path):
    """Observed: every run printed "WARNING: '<output>' is empty." six times (DVC, for empty outputs)."""
    write_jsonl(tmp_path / "labels.jsonl", [])
    assert (tmp_path / "labels.jsonl").stat().st_size > 0 and read_rows(tmp_path / "labels.jsonl") == []
    touch_jsonl(tmp_path / "data" / "cache.jsonl")
    assert (tmp_path / "data" / "cache.jsonl").read_text() == "\n" and read_cache(
        tmp_path / "data" / "cache.jsonl"
    ) == {}
    (tmp_path / "kept.jsonl").write_text('{"key": "k", "question": "q?"}\n')
    touch_jsonl(tmp_path / "kept.jsonl")
    assert (tmp_path / "kept.jsonl").read_text() == '{"key": "k", "question": "q?"}\n'


def test_a_duplicate_qrels_line_is_an_error_naming_both_lines(tmp_path):
    """Observed: a second judgement of the same (query, chunk) silently overwrote the first."""
    from retrieval_bench.corpus.load import read_qrels

    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t1\nq1\td1\t2\n")
    with pytest.raises(InputError) as refused:
        read_qrels(qrels)
    assert f"{qrels}:4" in str(refused.value) and "line 2" in str(refused.value)


def test_a_bench_that_copies_the_project_outside_a_git_checkout_says_so(tmp_path, monkeypatch):
    """Observed: `python bench/reproduce_scifact.py` in an extracted archive gave git's
    CalledProcessError as a traceback."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    common = importlib.import_module("common")
    (tmp_path / "src").mkdir()
    monkeypatch.setattr(common, "ROOT", tmp_path / "src")  # no .git above it
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(
        InputError, match=r"src: not a git checkout; the benchmark copies the project's git-listed files"
    ):
        common.copy_project(tmp_path / "copy", dict(os.environ))
