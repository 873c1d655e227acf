"""The generate_goldenset stage against the stub server: crashes (SIGKILL) and reruns, batch
resume, spend limit, cost guard and dry run, cache reuse, hygiene and echo reports, and that an
API key is never written anywhere. A process where the process is what is tested (a kill, the
exit status DVC sees, what the process writes); in this process (run_stage_here) otherwise."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import set_params
from stub_llm import (
    StubLLM,
    answer_then_hold,
    default_reply,
    read_jsonl,
    run_stage,
    run_stage_here,
    run_stage_on_openai,
    stage_env,
    stage_project,
    start_stage,
    wait_for,
)

from retrieval_bench.core import paths
from retrieval_bench.corpus.load import chunk_documents
from retrieval_bench.llm.checks.hygiene import QUESTION_SHAPE

CACHE, JOURNAL, GOLDEN = paths.QUESTION_CACHE, paths.BATCH_JOURNAL, paths.GOLDENSET


def kill(process) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL


def test_sigkill_mid_run_keeps_finished_questions_and_repeats_no_request(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 16, "generate.concurrency": 2})
    with StubLLM() as stub:
        stub.reply = answer_then_hold(4, default_reply, held := threading.Event())  # 4 replies, then the kill: no race
        process = start_stage(project, stub)
        wait_for(lambda: len(read_jsonl(project / CACHE)) >= 4, process)
        kill(process)
        before = read_jsonl(project / CACHE)
        finished = {record["passage_sha256"] for record in before}
        assert len(before) == 4 and not (project / GOLDEN).exists()

        held.set()
        stub.reset_counts()
        stub.reply = default_reply
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        asked = [request.passage_sha for request in stub.generation_requests()]
        assert not finished & set(asked), "a finished passage was asked again"
        assert len(asked) == 16 - len(before) == len(set(asked))
        after = read_jsonl(project / CACHE)
        assert after[: len(before)] == before  # append-only: every finished question kept
        assert len(read_jsonl(project / GOLDEN)) == 16


def test_batch_killed_before_results_is_collected_by_the_rerun_without_a_second_submission(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic-batch", "generate.max_questions": 12})
    with StubLLM() as stub:
        stub.batch_views = 10**9  # processing until the test ends it: the kill lands before its results, on any machine
        process = start_stage(project, stub)
        wait_for(lambda: any(e["event"] == "submitted" for e in read_jsonl(project / JOURNAL)), process)
        kill(process)
        assert stub.batch_creates() == 1 and not read_jsonl(project / CACHE)
        stub.end_batches()

        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        assert stub.batch_creates() == 1, "the journalled batch was submitted again"
        assert "resuming" in err
        events = read_jsonl(project / JOURNAL)
        submitted = {r["key"] for e in events if e["event"] == "submitted" for r in e["requests"]}
        assert [e["event"] for e in events] == ["intent", "submitted", "collected"]
        assert {record["key"] for record in read_jsonl(project / CACHE)} == submitted
        assert len(read_jsonl(project / GOLDEN)) == 12


def test_several_kinds_are_batched_each_with_its_task_and_a_rerun_collects_each_with_its_own(tmp_path):
    """generate.kinds with anthropic-batch: one batch per kind, each journalled with its task. Killed
    while the second kind's batch is processing, the rerun collects it with that kind's parser (the
    first kind's work leaves it alone) and submits nothing again: every question of both kinds kept."""
    project = stage_project(tmp_path / "p")
    kinds = {"single": 0.5, "keyword": 0.5}
    set_params(
        project, **{"generate.provider": "anthropic-batch", "generate.max_questions": 12, "generate.kinds": kinds}
    )
    with StubLLM() as stub:
        stub.after_create = lambda server: setattr(server, "batch_views", 10**9)  # the first ends, the next waits
        process = start_stage(project, stub)
        wait_for(lambda: sum(e["event"] == "submitted" for e in read_jsonl(project / JOURNAL)) == 2, process)
        kill(process)
        events = read_jsonl(project / JOURNAL)
        first_task, second_task = [e["task"] for e in events if e["event"] == "submitted"]
        assert {first_task, second_task} == {"questions", "keywords"}
        assert [e["event"] for e in events].count("collected") == 1
        stub.after_create, stub.batch_views = None, None  # a batch created again would end (and be counted)
        stub.end_batches()

        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        assert stub.batch_creates() == 2, "a journalled batch was submitted again"
        events = read_jsonl(project / JOURNAL)
        assert [e["event"] for e in events].count("collected") == 2
        records = read_jsonl(project / CACHE)
        assert not [record for record in records if record["rejected"]], "a batch's results were read by another kind"
        golden = read_jsonl(project / GOLDEN)
        assert Counter(row["kind"] for row in golden) == Counter({"single": 6, "keyword": 6})


def test_batch_errored_expired_and_canceled_requests_stay_uncached_and_are_resubmitted(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic-batch", "generate.max_questions": 12})
    with StubLLM() as stub:
        stub.batch_outcome = lambda custom_id, index: {0: "errored", 1: "expired", 2: "canceled"}.get(
            index, "succeeded"
        )
        status, out, err = run_stage_here(project, stub)
        assert status == 1 and "3 requests failed" in err and "rerun" in err
        assert len(read_jsonl(project / CACHE)) == 9
        failed = {r["custom_id"] for r in stub.batches["msgbatch_stub0001"]["requests"][:3]}

        stub.batch_outcome = lambda custom_id, index: "succeeded"
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        assert stub.batch_creates() == 2
        assert {r["custom_id"] for r in stub.batches["msgbatch_stub0002"]["requests"]} == failed
        assert len(read_jsonl(project / GOLDEN)) == 12


def test_spend_limit_stops_cleanly_and_the_rerun_pays_only_for_misses(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 12, "generate.concurrency": 2})
    with StubLLM() as stub:
        stub.spend_limit_after = 5
        status, out, err = run_stage_here(project, stub)
        assert status == 1
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "spend limit" in lines[0] and "5 replies from this run are kept" in lines[0]
        assert "Traceback" not in err
        assert len(read_jsonl(project / CACHE)) == 5 and not (project / GOLDEN).exists()

        stub.spend_limit_after = None
        stub.reset_counts()
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        assert len(stub.generation_requests()) == 7
        assert len(read_jsonl(project / GOLDEN)) == 12


def test_api_key_is_never_written_to_any_file_or_output(tmp_path):
    key = f"sk-ant-api03-LEAKCHECK-{uuid.uuid4().hex}"
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 6})
    outputs = []
    with StubLLM() as stub:
        env = stage_env(stub, key)
        stub.faults = ["rate_limit", "reset", "malformed"]
        outputs.append(run_stage(project, stub, env=env))
        assert outputs[-1][0] == 0, outputs[-1][2]
        set_params(project, **{"generate.max_questions": 9})
        stub.faults = ["auth"]
        outputs.append(run_stage(project, stub, env=env))
        set_params(project, **{"generate.provider": "anthropic-batch", "generate.max_questions": 12})
        stub.spend_limit_after = 0
        outputs.append(run_stage(project, stub, env=env))
        assert [status for status, _, _ in outputs] == [0, 1, 1]
        headers = [r.headers for r in stub.generation_requests()]
        assert any(key in h.get("x-api-key", "") + h.get("authorization", "") for h in headers)
    leaked = [path for path in project.rglob("*") if path.is_file() and key.encode() in path.read_bytes()]
    assert not leaked
    assert all(key not in out and key not in err for _, out, err in outputs)


def test_cost_guard_refuses_and_dry_run_estimates_without_calls(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(
        project, **{"generate.provider": "anthropic", "generate.max_questions": 12, "generate.max_cost_usd": 0.001}
    )
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
        assert status == 1 and err.strip().splitlines() == [err.strip()] and err.startswith("error:")
        assert "max_cost_usd" in err and not stub.requests
        assert "12 questions to generate" in out and "$" in out

        no_key = {k: v for k, v in stage_env(stub).items() if k != "ANTHROPIC_API_KEY"}
        status, out, err = run_stage_here(project, stub, "--dry-run", env=no_key)
        assert status == 0, err
        assert "dry run" in out and "anthropic-batch instead" in out and not stub.requests
        assert not (project / GOLDEN).exists() and (project / CACHE).read_text().strip() == ""
        status, out, err = run_stage(project, stub, env={**no_key, "RETRIEVAL_BENCH_DRY_RUN": "1"})
        assert status == 3 and "dry run" in out and not stub.requests


def test_cache_hits_edited_passage_and_prompt_change(tmp_path):
    project = stage_project(tmp_path / "p", docs=["inmemorydb.md", "autoinc.md"])
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 0})
    documents = pd.read_parquet(project / "data/documents.parquet")
    passages = chunk_documents(documents, 800, 100)
    n = passages["text_sha256"].nunique()
    with StubLLM() as stub:
        assert run_stage_here(project, stub)[0] == 0
        assert len(stub.generation_requests()) == n
        stub.reset_counts()
        no_key = {k: v for k, v in stage_env(stub).items() if k != "ANTHROPIC_API_KEY"}
        assert run_stage_here(project, stub, env=no_key)[0] == 0  # everything cached: no key needed
        assert not stub.requests
        status, out, _ = run_stage_here(project, stub, "--dry-run", env=no_key)  # it said nothing of the cache
        assert status == 0 and f"0 questions to generate, {n} cached: nothing to ask, $0.00" in out

        # Edit one word inside one passage (outside every overlap): exactly one question is regenerated.
        doc_id = documents["doc_id"][0]
        text = documents["text"][0]
        spans = passages[passages["doc_id"] == doc_id][["start", "end"]].to_numpy().tolist()
        target = spans[1]
        middle = (target[0] + target[1]) // 2
        assert not any(s <= middle < e for s, e in spans if [s, e] != target)
        word_start = text.rfind(" ", 0, middle) + 1
        word_end = text.find(" ", middle)
        edited = text[:word_start] + "Z" * (word_end - word_start) + text[word_end:]
        documents.loc[0, "text"] = edited
        documents.to_parquet(project / "data/documents.parquet", index=False)
        stub.reset_counts()
        assert run_stage_here(project, stub)[0] == 0
        assert len(stub.generation_requests()) == 1

        # A changed prompt regenerates every question; its sha256 is in each golden row.
        prompt = project / "data/question_prompt.txt"
        prompt.write_text(prompt.read_text() + "\nWrite in plain English.\n")
        stub.reset_counts()
        assert run_stage_here(project, stub)[0] == 0
        assert len(stub.generation_requests()) == n
        import hashlib

        sha = hashlib.sha256(prompt.read_bytes()).hexdigest()
        assert {row["prompt_sha256"] for row in read_jsonl(project / GOLDEN)} == {sha}


def test_passage_subset_is_chosen_before_generation_and_nested(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 5})
    with StubLLM() as stub:
        assert run_stage_here(project, stub)[0] == 0
        first = {request.passage_sha for request in stub.generation_requests()}
        assert len(first) == 5 == len(stub.generation_requests())
        stub.reset_counts()
        set_params(project, **{"generate.max_questions": 8})
        assert run_stage_here(project, stub)[0] == 0
        assert len(stub.generation_requests()) == 3  # the 5 chosen before are kept: only 3 new ones
        golden = read_jsonl(project / GOLDEN)
        assert first <= {row["chunk_sha256"] for row in golden} and len(golden) == 8
        stub.reset_counts()
        set_params(project, **{"generate.seed": 1, "generate.max_questions": 5})
        assert run_stage_here(project, stub)[0] == 0
        assert {request.passage_sha for request in stub.generation_requests()} != first


def test_hygiene_rejects_duplicates_and_replacement_are_reported(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 10, "generate.concurrency": 1})
    calls: Counter[str] = Counter()
    order: list[str] = []

    def reply(passage: str) -> str:
        calls[passage] += 1
        if passage not in order:
            order.append(passage)
        question = json.loads(default_reply(passage))["question"]
        if passage == order[0]:
            return "I'm sorry, but I can't write a question about this passage."
        if passage in order[1:3] and calls[passage] == 1:
            return json.dumps({"question": "How does SQLite keep my data safe?", "evidence": ""})
        return f'Here is a question a user might type:\n\n1. "{question}"'

    with StubLLM() as stub:
        stub.reply = reply
        stub.stop_reason = lambda passage: (
            "max_tokens" if len(order) > 3 and passage == order[3] and calls[passage] == 1 else "end_turn"
        )
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
    golden = read_jsonl(project / GOLDEN)
    assert len(golden) == 10
    duplicate = [row for row in golden if row["question"] == "How does SQLite keep my data safe?"]
    assert len(duplicate) == 1  # one of the two passages keeps it, the other was asked again
    cleaned = [row["question"] for row in golden if row not in duplicate]
    assert all(q.startswith("Where is topic") and q.endswith("?") for q in cleaned)  # no preamble, number, quotes
    rejects = read_jsonl(project / "metrics/generate_rejects.jsonl")
    reasons = Counter(reject["reason"] for reject in rejects)
    assert reasons == {"refusal": 2, "duplicate_question": 1, "truncated": 1}
    report = json.loads((project / "metrics/goldenset.json").read_text())
    assert report["rejected"] == 4 and report["rejected_by_reason"] == dict(reasons) and report["exhausted"] == 1
    assert "refusal" in out and "generate_rejects.jsonl" in out


def test_echo_gauge_flags_copied_questions_and_drop_echo_regenerates_them(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 6})
    calls: Counter[str] = Counter()

    def reply(passage: str) -> str:
        calls[passage] += 1
        if calls[passage] == 1:  # a question that copies ten words of its passage
            return json.dumps({"question": "Is it true that " + " ".join(passage.split()[3:13]) + "?", "evidence": ""})
        return default_reply(passage)

    with StubLLM() as stub:
        stub.reply = reply
        assert run_stage_here(project, stub)[0] == 0
        report = json.loads((project / "metrics/goldenset.json").read_text())
        golden = read_jsonl(project / GOLDEN)
        assert report["echo_rate"] == 1.0 and report["echo_flagged"] == 6
        assert all(row["echo"] and row["echo_longest_ngram"] >= 5 for row in golden)

        stub.reset_counts()
        set_params(project, **{"generate.drop_echo": True})
        assert run_stage_here(project, stub)[0] == 0
        assert len(stub.generation_requests()) == 6  # each echo asked again once
        report = json.loads((project / "metrics/goldenset.json").read_text())
        assert report["echo_rate"] == 0.0 and report["n_questions"] == 6
        assert report["rejected_by_reason"] == {"echo": 6}


def test_each_round_says_what_the_golden_sets_checks_rejected(tmp_path):
    """The round line counts the reply parser's rejects: every reply an echo under drop_echo, the
    rounds said "(0 rejected)" until the closing line."""
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 3, "generate.drop_echo": True})

    def quoting(passage: str) -> str:
        return json.dumps({"question": "Is it true that " + " ".join(passage.split()[3:13]) + "?", "evidence": ""})

    with StubLLM() as stub:
        stub.reply = quoting
        status, out, _ = run_stage_here(project, stub)
    assert status == 1  # no usable question: every reply rejected
    rounds = [line for line in out.splitlines() if "replies (0 rejected)" in line]
    checked = [line.partition(": ")[2] for line in out.splitlines() if "checked so far:" in line]
    assert len(rounds) == 4  # generate.max_attempts; each but the last is checked before the next
    assert checked == [f"checked so far: 0 usable questions, {n} replies rejected ({n} echo)" for n in (3, 6, 9)]


def test_openai_compatible_provider_through_the_stage(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.max_questions": 4})
    with StubLLM() as stub:
        status, out, err = run_stage_on_openai(project, stub, model="qwen2.5:7b")
        assert status == 0, err
        assert stub.count("POST", "/v1/chat/completions") == 4
    assert {row["source"] for row in read_jsonl(project / GOLDEN)} == {"qwen2.5:7b"}
    assert read_jsonl(project / JOURNAL) == []  # one blank line: DVC warns about empty outputs
    assert Path(project / "metrics/generate_rejects.jsonl").read_text().strip() == ""


def test_a_question_prompt_that_is_not_utf8_is_one_error_line(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 2})
    (project / "data/question_prompt.txt").write_bytes(b"Write a question about \xe9t\xe9:\n{passage}\n")
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert stub.generation_requests() == []
    assert status == 1 and "Traceback" not in err
    assert err.strip() == "error: data/question_prompt.txt: not UTF-8 text (byte 23)"


def test_a_kind_whose_units_run_out_says_so_in_the_log_and_the_report(tmp_path):
    """Three unrelated documents share no rare term, so no multi-evidence group exists: the log
    said "kinds: single 1, multi 1" then "wrote 1 questions", and metrics/goldenset.json never
    named the missing multi question."""
    project = stage_project(tmp_path / "project")
    texts = [
        "Tomatoes ripen faster beside bananas because of ethylene gas.",
        "The violin has four strings tuned in perfect fifths.",
        "Glaciers carve U-shaped valleys as they slowly advance.",
    ]
    pd.DataFrame({"doc_id": ["a.md", "b.md", "c.md"], "text": texts}).to_parquet(project / "data" / "documents.parquet")
    set_params(
        project,
        **{
            "generate.provider": "anthropic",
            "generate.max_questions": 2,
            "generate.kinds": {"single": 0.5, "multi": 0.5},
        },
    )
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
    assert status == 0, err
    assert "kind multi: 0 of 1 planned questions: the corpus has no more passage groups sharing a rare term" in out
    report = json.loads((project / paths.GOLDENSET_REPORT).read_text())
    assert report["kind_shortfall"] == {"multi": {"planned": 1, "made": 0}}


def test_an_experiments_copy_and_a_replaced_journal_pay_nothing_another_run_paid_for(tmp_path):
    """A queued or --temp experiment runs in a copy that starts from HEAD's caches, and `dvc exp
    apply` replaces them: DVC sets DVC_ROOT to the project for both, and this machine's mirror under
    it gives the copy what the other run paid for (a review paid each question three times)."""
    root = tmp_path / "project"
    first, copy = stage_project(tmp_path / "first"), stage_project(tmp_path / "copy")
    for project in (first, copy):
        set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 6})
    with StubLLM() as stub:
        env = {**stage_env(stub), "DVC_ROOT": str(root)}
        assert run_stage_here(first, stub, env=env)[0] == 0
        assert len(stub.generation_requests()) == 6
        stub.reset_counts()
        status, out, _ = run_stage_here(copy, stub, env=env)
        assert status == 0 and not stub.requests
        assert f"{CACHE}: restored 6 questions already paid for from this machine's copy" in out
        assert read_jsonl(copy / GOLDEN) == read_jsonl(first / GOLDEN)
        # without DVC (a stage run by hand) there is no mirror: nothing is written outside the project
        assert not (tmp_path / "copy" / ".dvc").exists()

        # a batch submitted, then its journal replaced (`dvc exp apply`): resumed, not submitted again
        set_params(first, **{"generate.provider": "anthropic-batch", "generate.max_questions": 9})
        stub.batch_views = 10**9
        process = start_stage(first, stub, env=env)
        mirrored = root / ".dvc/tmp/retrieval-bench/paid" / JOURNAL  # written just after the journal itself
        wait_for(lambda: mirrored.exists() and any(e["event"] == "submitted" for e in read_jsonl(mirrored)), process)
        kill(process)
        (first / JOURNAL).write_text("")
        stub.end_batches()
        status, out, err = run_stage_here(first, stub, env=env)
        assert status == 0, err
        assert stub.batch_creates() == 1 and "resuming" in err
        assert f"{JOURNAL}: restored 2 batch journal events" in out


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_a_stage_whose_dvc_is_killed_stops_as_ctrl_c_stops_it_and_pays_for_no_more(tmp_path, sigint):
    """kill -9 of `dvc repro` left the stage running detached, paying for every request left (108
    in a review's run). Under DVC (DVC_STAGE set) the stage watches its parent and, once it is gone,
    stops as Ctrl-C stops it: what was paid for kept, nothing more asked; also when DVC was started
    in the background from a script, with SIGINT ignored."""
    import subprocess
    import sys

    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 16, "generate.concurrency": 2})
    with StubLLM() as stub:
        stub.reply = answer_then_hold(4, default_reply, held := threading.Event())
        parent_code = (
            f"import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.{'SIG_IGN' if sigint == 'ignored' else 'SIG_DFL'}); "
            "child = subprocess.Popen([sys.executable, '-m', 'stages.generate_goldenset']); "
            "print(child.pid, flush=True); child.wait()"
        )
        parent = subprocess.Popen(
            [sys.executable, "-c", parent_code],
            cwd=project,
            env={**stage_env(stub), "DVC_STAGE": "generate_goldenset"},  # as `dvc repro` runs it
            stdout=subprocess.PIPE,
            text=True,
        )
        child = int(parent.stdout.readline())
        wait_for(lambda: len(read_jsonl(project / CACHE)) >= 4, parent)
        parent.kill()  # SIGKILL: DVC gets no chance to stop its stage
        parent.wait()
        deadline = time.monotonic() + 600  # a guard against a hang, not a timing margin
        while os.path.exists(f"/proc/{child}") and open(f"/proc/{child}/stat").read().split()[2] != "Z":
            assert time.monotonic() < deadline, "the stage went on after its DVC was killed"
            time.sleep(0.05)
        asked = len(stub.generation_requests())  # the 4 answered and the 2 held in flight
        held.set()
        assert asked == 6 and len(read_jsonl(project / CACHE)) == 4 and not (project / GOLDEN).exists()


def test_a_cached_question_a_limit_now_refuses_is_left_out(tmp_path):
    """A question accepted before the character limit (10 words, 6,000 characters) was kept from the
    cache, where its stored verdict was trusted: the limits are asked again of every cached reply."""
    from retrieval_bench.llm.cache.replies import CHECKSUM, record_checksum

    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 3, "generate.concurrency": 1})
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert status == 0, err
        records = read_jsonl(project / CACHE)
        long = "What does " + "x" * 6000 + " N mean in this setup?"
        old = {**{k: v for k, v in records[0].items() if k != CHECKSUM}, "question": long}
        records[0] = {**old, CHECKSUM: record_checksum(old)}  # as an earlier version accepted it
        (project / CACHE).write_text("".join(json.dumps(r) + "\n" for r in records))
        asked = len(stub.requests)
        status, _, err = run_stage_here(project, stub)
        assert status == 0, err
        assert len(stub.requests) == asked + 1  # its passage asked again, nothing else
    golden = read_jsonl(project / GOLDEN)
    assert len(golden) == 3 and all(len(row["question"]) <= QUESTION_SHAPE.max_chars for row in golden)


def test_a_question_paid_at_an_attempt_beyond_a_lowered_max_attempts_is_kept(tmp_path):
    """max_attempts 3 bought a passage's question at its third attempt; set back to 2, the passage
    counted as out of attempts: another passage was paid for and the golden set changed."""
    project = stage_project(tmp_path / "p")
    set_params(
        project,
        **{
            "generate.provider": "anthropic",
            "generate.max_questions": 4,
            "generate.concurrency": 1,
            "generate.max_attempts": 3,
        },
    )
    calls: Counter[str] = Counter()
    order: list[str] = []

    def reply(passage: str) -> str:  # the first passage refused twice, then answered
        calls[passage] += 1
        if passage not in order:
            order.append(passage)
        if passage == order[0] and calls[passage] <= 2:
            return "I'm sorry, but I can't write a question about this passage."
        return default_reply(passage)

    with StubLLM() as stub:
        stub.reply = reply
        assert run_stage_here(project, stub)[0] == 0
        assert calls[order[0]] == 3
        first = read_jsonl(project / GOLDEN)
        set_params(project, **{"generate.max_attempts": 2})
        stub.reset_counts()
        status, _, err = run_stage_here(project, stub)
        assert status == 0, err
        assert stub.generation_requests() == [] and read_jsonl(project / GOLDEN) == first
