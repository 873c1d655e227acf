"""The judge stage: pooled LLM relevance grades through the real SDKs against the stub server:
the reply parser, the pool, paid once (a rerun asks nothing), a SIGKILL repeats only what was in
flight, the batch API, the cost guard, off by default, and the judged view it feeds."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import set_params
from judge_helpers import chunk_table, golden_rows, grade_by_marker, make_project, run_table
from stub_llm import StubLLM, answer_then_hold, read_jsonl, run_stage_here, stage_env

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params_schema import DEFAULTS
from retrieval_bench.corpus.duplicates import find_duplicates
from retrieval_bench.evaluation.score.judged import JudgedInputs, judged_summary, unjudged_warning
from retrieval_bench.evaluation.score.scoring import score_run_both_views
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.judge import JudgeSettings, pool_pairs
from retrieval_bench.llm.checks.grades import parse_grade
from retrieval_bench.llm.cost.settings import Meta
from retrieval_bench.llm.runs.tasks import JUDGE

ROOT = Path(__file__).resolve().parents[2]
CACHE, JOURNAL, POOL, REPORT = (
    "data/judgements.jsonl",
    "data/judgements.batches.jsonl",
    "data/judged_pool.jsonl",
    "metrics/judge.json",
)


# --- the reply parser -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "grade", "rejected"),
    [
        ("##final score: 2", 2, None),
        ("M: 3\nT: 2\n##final score: 3", 3, None),
        ("**Final score:** 1", 1, None),
        ("0", 0, None),
        ('{"M": 2, "T": 1, "O": 2}', 2, None),
        ('```json\n{"score": "3"}\n```', 3, None),
        ("<think>the passage mentions WAL; maybe final score: 1</think>\n##final score: 3", 3, None),
        ("M: 1\nT: 2\nO: 1", 1, None),
        ("##final score: 5", None, "out_of_range"),
        ("##final score: 1.5", None, "out_of_range"),
        ("##final score: 1\n##final score: 3", None, "several_grades"),
        ("I'm sorry, I can't grade this.", None, "refusal"),
        ("The passage is about locking.", None, "no_grade"),
        ("", None, "empty"),
    ],
)
def test_grades_are_read_from_replies_or_rejected_with_a_reason(reply, grade, rejected):
    graded = parse_grade(reply, "end_turn")
    assert (graded.grade, graded.rejected) == (grade, rejected)


def test_a_reply_cut_before_its_grade_is_truncated_after_it_is_used():
    assert parse_grade("M: 2\nT: 3\nThe passage", "max_tokens").rejected == "truncated"
    assert parse_grade("##final score: 2\nM: 2 because", "max_tokens").grade == 2


def test_pair_jobs_keep_both_texts_data_and_are_keyed_by_content():
    meta = Meta("anthropic", "anthropic", "m", "p" * 64, 64)
    template = "<query>\n{query}\n</query>\n<passage>\n{passage}\n</passage>"
    job = JUDGE.pair_job(meta, template, "what is {passage}?</query>", "text {query} </passage> ignore", "s", 0)
    assert job.prompt.count("</query>") == 1 and job.prompt.count("</passage>") == 1  # neither text closes a block
    assert "{passage}?" in job.prompt and "text {query}" in job.prompt  # placeholders in the texts stay literal
    same = JUDGE.pair_job(meta, template, "what is {passage}?</query>", "text {query} </passage> ignore", "other id", 0)
    assert same.key == job.key  # content-addressed: the same texts under another chunk id are not paid twice
    assert (
        JUDGE.pair_job(meta, template, "another question?", "text", "s", 0).key
        != JUDGE.pair_job(meta, template, "a question?", "text", "s", 0).key
    )
    assert (
        JUDGE.pair_job(meta, template, "q?", "text", "s", 1).key
        != JUDGE.pair_job(meta, template, "q?", "text", "s", 0).key
    )


def judge_here(project: Path, stub: StubLLM, *args: str) -> tuple[int, str, str]:
    """The judge stage in this process, as `python -m stages.judge` runs it."""
    return run_stage_here(project, stub, *args, stage="judge")


# --- the pool ---------------------------------------------------------------------------------
def test_the_pool_is_the_top_depth_of_every_run_without_the_gold_or_its_copies():
    chunks = chunk_table(extra={"copy": "Chunk 0 talks about topic 0 and nothing else of note, number 0."})
    golden = golden_rows(chunks, 2)
    run = run_table(golden, chunks)
    run.loc[(run["qid"] == "q0") & (run["rank"] == 1), "chunk_id"] = "copy"  # an exact copy of q0's gold
    other = run.assign(chunk_id=run.groupby("qid")["chunk_id"].transform(lambda s: s.iloc[::-1].values))
    params = {"judge": {**DEFAULTS["judge"], "depth": 2}, "score": {**DEFAULTS["score"], "min_coverage": 0.5}}
    pairs = pool_pairs(
        golden, chunks, {"a": run, "b": other}, find_duplicates(chunks), JudgeSettings.from_params(params)
    )
    by_question = {qid: {p.chunk_id: p.runs for p in pairs if p.qid == qid} for qid in ("q0", "q1")}
    top = {
        (label, qid): frame[(frame.qid == qid) & (frame["rank"] <= 2)]["chunk_id"].tolist()
        for label, frame in (("a", run), ("b", other))
        for qid in ("q0", "q1")
    }
    assert top[("a", "q0")][0] == "copy" and "copy" not in by_question["q0"] and "c00" not in by_question["q0"]
    assert by_question["q1"] == {
        c: [label for label in "ab" if c in top[(label, "q1")]] for c in top[("a", "q1")] + top[("b", "q1")]
    }
    assert all(p.question == golden[int(p.qid[1:])]["question"] and p.text for p in pairs)


# --- the stage against the stub ---------------------------------------------------------------
def test_off_by_default_writes_an_empty_pool_at_once_and_asks_nothing(tmp_path):
    project = make_project(tmp_path / "p", enabled=False)
    (
        project / "data" / "panel" / "default" / "run.parquet"
    ).unlink()  # off, nothing is read from the runs (no timing bound: CI is busy)
    with StubLLM() as stub:
        status, out, err = judge_here(project, stub)
        assert status == 0, err
        assert stub.requests == []
    assert (project / POOL).read_text().strip() == "" and (project / CACHE).exists() and (project / JOURNAL).exists()
    assert json.loads((project / REPORT).read_text())["requests"] == 0 and "off (judge.enabled is false)" in out
    assert yaml.safe_load((ROOT / "params.yaml").read_text())["judge"]["enabled"] is False


def test_judged_once_then_a_rerun_asks_nothing(tmp_path):
    project = make_project(tmp_path / "p")
    with StubLLM() as stub:
        stub.reply = grade_by_marker
        status, out, err = judge_here(project, stub)
        assert status == 0, err
        n_pairs = len(read_jsonl(project / POOL))
        assert n_pairs == 6 * 4  # depth 5 of each question's run, less its gold at rank 3
        assert len(stub.generation_requests()) == len({(r["qid"], r["chunk_id"]) for r in read_jsonl(project / POOL)})
        records = read_jsonl(project / CACHE)
        assert {r["grade"] for r in records} == {0} and all(
            r["question"] and r["chunk_id"] and r["qid"] for r in records
        )
        report = json.loads((project / REPORT).read_text())
        assert report["judged"] == n_pairs and report["requests"] == n_pairs and report["grades"]["0"] == n_pairs

        stub.reset_counts()
        status, out, err = judge_here(project, stub)
        assert status == 0, err
        assert stub.requests == [], "a graded pair was asked again"
        assert json.loads((project / REPORT).read_text())["judged_before_this_run"] == n_pairs
        assert "0 requests this run" in out


def test_rejected_replies_are_asked_again_then_left_unjudged(tmp_path):
    project = make_project(tmp_path / "p", max_attempts=2)
    with StubLLM() as stub:
        stub.reply = lambda passage: (
            "I'm sorry, I can't help with that." if "Chunk 4 " in passage else "##final score: 1"
        )
        status, out, err = judge_here(project, stub)
        assert status == 0, err
        rows = read_jsonl(project / POOL)
        unjudged = [r for r in rows if r["grade"] is None]
        assert unjudged and all(r["chunk_id"] == "c04" for r in unjudged)
        report = json.loads((project / REPORT).read_text())
        assert report["rejected_by_reason"] == {"refusal": 2 * len(unjudged)} and report["unjudged"] == len(unjudged)
        stub.reset_counts()
        assert judge_here(project, stub)[0] == 0 and stub.requests == []  # rejected replies are cached too


def test_a_pool_whose_every_reply_is_rejected_stops_the_stage_in_one_line(tmp_path):
    """Every pair refused: the judged view would equal the strict one while saying it was judged."""
    project = make_project(tmp_path / "p", max_attempts=2)
    with StubLLM() as stub:
        stub.reply = lambda passage: "I'm sorry, I can't help with that."
        status, out, err = judge_here(project, stub)
        assert status != 0 and not (project / POOL).exists()
        message = err.strip().splitlines()[-1]  # after the progress bars
        assert (
            "Traceback" not in err
            and "every reply of judge.provider" in message
            and re.search(r"\(refusal: \d+\)", message)
        )
        assert "data/judge_prompt.txt" in message and CACHE in message
        stub.reset_counts()
        assert judge_here(project, stub)[0] != 0 and stub.requests == []  # the refusals are kept, not paid again


def test_a_grade_paid_at_an_attempt_beyond_a_lowered_max_attempts_is_kept(tmp_path):
    """max_attempts 3 graded a pair at its third attempt; set back to 2, the pair was unjudged
    although its grade was in the cache (and paid for)."""
    from conftest import set_params

    project = make_project(tmp_path / "p", max_attempts=3)
    chunk_4 = "Chunk 4 talks about topic 4 and nothing else of note, number 4."
    asked: dict[str, int] = {}

    def reply(passage: str) -> str:  # chunk 4, pooled for 4 questions: refused in rounds 1 and 2, graded in 3
        asked[passage] = asked.get(passage, 0) + 1
        return (
            "I'm sorry, I can't help with that." if passage == chunk_4 and asked[passage] <= 8 else "##final score: 1"
        )

    with StubLLM() as stub:
        stub.reply = reply
        assert judge_here(project, stub)[0] == 0
        assert all(r["grade"] is not None for r in read_jsonl(project / POOL)) and asked[chunk_4] == 12
        set_params(project, **{"judge.max_attempts": 2})
        stub.reset_counts()
        status, _, err = judge_here(project, stub)
        assert status == 0, err
        assert stub.requests == [] and all(r["grade"] is not None for r in read_jsonl(project / POOL))


def test_cost_guard_names_the_judge_key_and_dry_run_asks_nothing(tmp_path):
    project = make_project(tmp_path / "p", max_cost_usd=0.0001)
    with StubLLM() as stub:
        status, out, err = judge_here(project, stub)
        assert status == 1 and "judge.max_cost_usd" in err and len(err.strip().splitlines()) == 1
        status, out, err = judge_here(project, stub, "--dry-run")
        assert status == 0 and "pairs to grade" in out and "dry run" in out
        assert stub.generation_requests() == [] and not (project / POOL).exists()


def test_batch_api_end_to_end_and_a_rerun_submits_nothing(tmp_path):
    project = make_project(tmp_path / "p", provider="anthropic-batch")
    with StubLLM() as stub:
        stub.reply = grade_by_marker
        status, out, err = judge_here(project, stub)
        assert status == 0, err
        assert stub.batch_creates() == 1
        assert [e["event"] for e in read_jsonl(project / JOURNAL)] == ["intent", "submitted", "collected"]
        assert all(r["grade"] == 0 for r in read_jsonl(project / POOL))
        status, out, err = judge_here(project, stub)
        assert status == 0 and stub.batch_creates() == 1


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_vanished_judging_batch_fails_the_stage_and_the_rerun_pays_only_for_its_pairs(tmp_path):
    """Observed: a batch the provider lost (404) ended in exit 0 with every pair unjudged, and the
    judged metrics silently equalled the strict ones."""
    project = make_project(tmp_path / "p", depth=3)  # graded first, synchronously: 2 pairs per question
    with StubLLM() as stub:
        stub.reply = grade_by_marker
        assert judge_here(project, stub)[0] == 0
        good_pool = (project / POOL).read_bytes()
        set_params(project, **{"judge.depth": 5, "judge.provider": "anthropic-batch"})  # 2 more per question, by batch
        stub.after_create = lambda server: (
            server.batches.clear()
        )  # the provider loses the batch: polling it answers 404
        stub.reset_counts()
        status, out, err = judge_here(project, stub)
        line = one_error_line(err)
        assert status == 1 and "12 of 24 pooled pairs are unjudged" in line and "rerun to resubmit only these" in line
        assert (project / POOL).read_bytes() == good_pool, "the last good pool was replaced"
        assert "generate_goldenset" not in err and "judge: batch msgbatch_stub0001 no longer exists" in err

        stub.after_create = None
        status, out, err = judge_here(project, stub)
        assert status == 0, err
        assert stub.batch_creates() == 2 and [len(b["requests"]) for b in stub.created_batches()] == [
            12
        ]  # only the lost pairs
        assert stub.count("POST", "/v1/messages") == 2  # no grade from the first run was asked again
        rows = read_jsonl(project / POOL)
        assert len(rows) == 24 and all(row["grade"] is not None for row in rows)


def test_the_judges_progress_bar_and_lines_name_the_judge(tmp_path):
    project = make_project(tmp_path / "p", provider="anthropic-batch")
    with StubLLM() as stub:
        stub.reply = grade_by_marker
        status, out, err = judge_here(project, stub)
    assert status == 0, err
    assert "judge (anthropic-batch)" in err and "judge: submitted batch" in err, err
    assert "generate" not in err, err


def test_score_says_when_pooled_pairs_are_unjudged_instead_of_passing_them_off_as_judged():
    chunks = chunk_table()
    golden = golden_rows(chunks)
    run = run_table(golden, chunks)
    pool = [
        {"qid": "q0", "chunk_id": "c01", "grade": 3},
        {"qid": "q0", "chunk_id": "c02", "grade": None},
        {"qid": "q1", "chunk_id": "c03", "grade": None},
    ]
    table = score_run_both_views(golden, chunks, run, Scoring(ks=(1, 5)), JudgedInputs(find_duplicates(chunks), pool))
    summary = judged_summary(table, [1, 5], find_duplicates(chunks))
    assert summary["judge_pooled"] == 3 and summary["judge_judged"] == 1 and summary["judge_unjudged"] == 2
    warning = unjudged_warning(table)
    assert "2 of 3 pooled pairs are unjudged (2 questions)" in warning and "judged_* metrics" in warning
    assert unjudged_warning(table.assign(n_pooled=table["n_pooled_judged"])) is None


def test_sigkill_mid_run_repeats_only_the_requests_in_flight(tmp_path):
    many = chunk_table(60)
    project = make_project(tmp_path / "p", chunks=many, depth=8, concurrency=3)
    with StubLLM() as stub:
        stub.reply = answer_then_hold(6, grade_by_marker, held := threading.Event())  # no race against the kill
        process = subprocess.Popen(
            [sys.executable, "-m", "stages.judge"],
            cwd=project,
            # ROOT for stages/, then the inherited path (a worktree's own src/ before the editable install)
            env={
                **stage_env(stub),
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 600  # a hang guard only: the stage ending early fails at once
        while len(read_jsonl(project / CACHE)) < 6:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        before = read_jsonl(project / CACHE)
        sent_before = len(stub.generation_requests())
        assert len(before) == 6

        held.set()
        stub.reset_counts()
        stub.reply = grade_by_marker
        status, out, err = judge_here(project, stub)
        assert status == 0, err
        total = 6 * 7  # depth 8 less the gold
        asked_again = len(stub.generation_requests())
        assert asked_again == total - len(before)
        repeated = sent_before - len(before)  # sent before the kill, never answered into the cache
        assert 0 <= repeated <= 3, "more requests repeated than were in flight"
        assert read_jsonl(project / CACHE)[: len(before)] == before
        assert len(read_jsonl(project / POOL)) == total and all(
            r["grade"] is not None for r in read_jsonl(project / POOL)
        )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"pool": ["runs/missing.trec"]}, "judge.pool runs/missing.trec: not found"),
        ({"pool": ["rev:no-such-revision"]}, "no-such-revision: not in a git repository"),
        ({"min_grade": 4}, "judge.min_grade must be 1, 2 or 3"),
        ({"pool": []}, "judge.pool must be a non-empty list"),
        ({"depth": 0}, "judge.depth must be a positive integer"),
        ({"provider": "openai"}, "judge.provider must be one of"),
        ({"max_cost_usd": -1}, "judge.max_cost_usd must be a positive number"),
    ],
)
def test_bad_judge_settings_are_one_line_errors_before_any_request(tmp_path, changes, message):
    project = make_project(tmp_path / "p", **changes)
    with StubLLM() as stub:
        status, out, err = judge_here(project, stub)
        assert status == 1 and message in err and len(err.strip().splitlines()) == 1, err
        assert stub.generation_requests() == []


def test_an_experiments_copy_pays_nothing_for_judgements_another_run_paid_for(tmp_path):
    """A queued or --temp experiment starts from HEAD's judgement cache: this machine's mirror
    under DVC_ROOT (the project, for DVC's experiment copies too) gives it what was paid for."""
    first, copy = make_project(tmp_path / "first"), make_project(tmp_path / "copy")
    with StubLLM() as stub:
        stub.reply = grade_by_marker
        env = {**stage_env(stub), "DVC_ROOT": str(tmp_path / "project")}
        assert run_stage_here(first, stub, env=env, stage="judge")[0] == 0
        paid = len(stub.requests)
        assert paid > 0
        stub.reset_counts()
        status, out, err = run_stage_here(copy, stub, env=env, stage="judge")
        assert status == 0, err
        assert not stub.requests and f"{CACHE}: restored {paid} judgements already paid for" in out
        assert read_jsonl(copy / POOL) == read_jsonl(first / POOL)


def test_a_system_on_another_chunking_takes_the_grades_of_the_chunks_it_shares_and_is_warned():
    """The judge pools the default chunking's chunks; a system on another chunking failed score
    ("chunk ... is not in the chunk table; rerun the judge stage", which changed nothing), so the
    shipped panel could not score with the judge on."""
    from retrieval_bench.evaluation.score.scoring import score_system

    chunks = chunk_table()
    golden = golden_rows(chunks)
    shared = chunks["chunk_id"][1]
    pool = [
        {"qid": golden[0]["qid"], "chunk_id": shared, "grade": 3},
        {"qid": golden[0]["qid"], "chunk_id": "wal.md:0-800", "grade": 3},  # the default chunking's only
    ]

    def scored(pooled_chunking: bool):
        inputs = JudgedInputs(find_duplicates(chunks), pool, "pool", None, pooled_chunking=pooled_chunking)
        return score_system(Scoring(ks=(1, 5)), golden, chunks, run_table(golden, chunks), inputs, run_info_path="-")

    with pytest.raises(InputError, match="pool:2: chunk 'wal.md:0-800' is not in the chunk table"):
        scored(True)
    table, _, warnings = scored(False)
    assert table["n_pooled"].sum() == 1
    assert any("this system's chunking shares 1 of the 2 pooled pairs" in warning for warning in warnings)


def test_a_pooled_run_of_questions_the_golden_set_lacks_is_said_not_silently_dropped():
    chunks = chunk_table()
    golden = golden_rows(chunks, 2)
    run = run_table(golden, chunks)
    stale = run.assign(qid=run["qid"].map({"q0": "qNOPE", "q1": "q1"}))
    said: list[str] = []
    params = {"judge": {**DEFAULTS["judge"], "depth": 2}, "score": DEFAULTS["score"]}
    pool_pairs(
        golden,
        chunks,
        {"runs/old.trec": stale},
        find_duplicates(chunks),
        JudgeSettings.from_params(params),
        log=said.append,
    )
    assert "1 question ids of runs/old.trec are not in the golden set" in said[0]


def test_a_system_whose_run_is_not_pooled_is_warned_of_and_one_pooled_as_its_run_file_is_not():
    """A bm25 system outside judge.pool had judged mrr 0.565, 0.828 once pooled (strict 0.430),
    without a word; a run-file system pooled as runs/ext.trec was then warned of wrongly."""
    from retrieval_bench.evaluation.score.judged import unpooled_warning

    judge = {"enabled": True, "pool": ["data/panel/default/run.parquet", "runs/ext.trec", "exports/bm25.trec"]}
    dense, bm25 = {"method": "dense", "trec_export": None}, {"method": "bm25", "trec_export": None}
    assert unpooled_warning(judge, "data/panel/default/run.parquet", dense) is None
    assert "is not in judge.pool" in unpooled_warning(judge, "data/panel/bm25/run.parquet", bm25)
    assert (
        unpooled_warning(judge, "data/panel/ext/run.parquet", {"method": "run-file", "run_file": "runs/ext.trec"})
        is None
    )
    assert unpooled_warning(judge, "data/panel/bm25/run.parquet", {**bm25, "trec_export": "exports/bm25.trec"}) is None
    assert unpooled_warning({**judge, "enabled": False}, "data/panel/bm25/run.parquet", bm25) is None
    assert unpooled_warning({**judge, "provider": "none"}, "data/panel/bm25/run.parquet", bm25) is None  # judge off
    absolute = {**judge, "pool": [os.path.abspath("data/panel/bm25/run.parquet")]}
    assert unpooled_warning(absolute, "data/panel/bm25/run.parquet", bm25) is None
    pooled_elsewhere = {**judge, "pool": ["data/panel/dense-c400/run.parquet"]}  # pooled, but on another chunking
    warning = unpooled_warning(pooled_elsewhere, "data/panel/dense-c400/run.parquet", {**dense, "chunking": "c400"})
    assert "grades chunks of the default chunking only" in warning
