"""Local model servers (issue 31): the request timeout (a loopback server's timeout is counted and
not retried), json_schema replies (sent, and every reply held to the schema), temperature and a
seed per attempt (sent and recorded), cache keys free of max_tokens (old records still found) and
the model alias, and the dry run's plan. Against the stub server, which records request bodies."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
import yaml
from conftest import set_params
from llm_helpers import TEMPLATE, jobs_for, settings
from stub_llm import run_stage_here, stage_project

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import load_all_params
from retrieval_bench.llm.cache.replies import CacheWriter, EarlierKeys, read_cache
from retrieval_bench.llm.cost.settings import Meta, check_llm_sections
from retrieval_bench.llm.providers.schema import GRADE_SCHEMA
from retrieval_bench.llm.runs.runner import run
from retrieval_bench.llm.runs.tasks import QUESTIONS

ROOT = Path(__file__).resolve().parents[2]
TEXT = "SQLite's write-ahead log keeps new pages until a checkpoint copies them back."
TEXT_SHA = hashlib.sha256(TEXT.encode()).hexdigest()


def local(stub, **overrides):
    return settings("openai-compatible", base_url=f"{stub.url}/v1", **overrides)


def bodies(stub) -> list[dict]:
    return [request.body for request in stub.generation_requests()]


# --- timeouts -----------------------------------------------------------------------------------------
def test_a_loopback_request_past_timeout_s_fails_once_counted_and_not_retried(stub, tmp_path):
    call = local(stub, timeout_s=0.5, concurrency=1, max_retries=3)
    assert call.timeout_s == 0.5
    stub.gate = threading.Event()  # no reply until the client has given up on every request
    meta, jobs = jobs_for(2, provider="openai-compatible")
    try:
        outcome = run(QUESTIONS, jobs, meta, call, tmp_path / "c.jsonl")
    finally:
        stub.gate.set()
    assert outcome.timed_out == 2 and len(outcome.failed) == 2 and outcome.succeeded == 0
    assert len(stub.generation_requests()) == 2  # max_retries 3, yet no request was sent twice
    assert all("generate.timeout_s 0.5s" in reason for reason in outcome.failed)
    assert read_cache(tmp_path / "c.jsonl") == {}


@pytest.mark.parametrize("value", [0, -1, 3601, True, "60", float("nan")])
def test_timeout_s_out_of_bounds_is_one_line(tmp_path, value):
    for section in ("generate", "judge"):
        path = params_with(tmp_path, **{f"{section}.timeout_s": value})
        with pytest.raises(InputError, match=rf"{section}\.timeout_s must be") as error:
            load_all_params(path)
        assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("response_format", "xml", "response_format must be one of text, json_schema"),
        ("temperature", 2.5, "temperature must be null"),
        ("temperature", True, "temperature must be a number"),
        ("temperature", "hot", "temperature must be a number"),
        ("model_alias", "", "model_alias must be null"),
        ("model_alias", 7, "model_alias must be null"),
    ],
)
def test_bad_request_settings_are_one_line(tmp_path, key, value, expected):
    for section in ("generate", "judge"):
        with pytest.raises(InputError, match=rf"{section}\.{expected}"):
            changes = {f"{section}.{key}": value, f"{section}.provider": "openai-compatible"}
            load_all_params(params_with(tmp_path, **changes))


def test_the_new_keys_default_to_the_servers_behaviour():
    params = load_all_params(ROOT / "params.yaml")
    for section in ("generate", "judge"):
        assert params[section]["timeout_s"] == 120
        assert (params[section]["response_format"], params[section]["temperature"]) == ("text", None)
        assert params[section]["model_alias"] is None


def params_with(tmp_path: Path, **changes: object) -> Path:
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    set_params(tmp_path, **changes)
    return tmp_path / "params.yaml"


# --- structured replies ---------------------------------------------------------------------------------
def test_json_schema_is_sent_and_a_reply_outside_it_is_rejected(stub, tmp_path):
    meta, jobs = jobs_for(2, provider="openai-compatible")
    meta = Meta(**{**meta.__dict__, "response_format": "json_schema"})
    jobs = [QUESTIONS.job(meta, TEMPLATE, f"Passage {i} on checkpoints.", f"s{i}", 0) for i in range(2)]
    run(QUESTIONS, jobs[:1], meta, local(stub, response_format="json_schema"), tmp_path / "c.jsonl")
    sent = bodies(stub)[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["required"] == ["question", "evidence"]
    stub.reply = lambda passage: "Where is topic checkpoint explained?"  # the server ignored the schema
    run(QUESTIONS, jobs[1:], meta, local(stub, response_format="json_schema"), tmp_path / "c.jsonl")
    cache = read_cache(tmp_path / "c.jsonl")
    assert cache[jobs[0].key]["rejected"] is None and cache[jobs[0].key]["response_format"] == "json_schema"
    assert cache[jobs[1].key]["rejected"] == "schema_mismatch"
    text_meta, _ = jobs_for(0, provider="openai-compatible")  # as text, the same reply is a usable question
    text_job = QUESTIONS.job(text_meta, TEMPLATE, "Passage 9 on checkpoints.", "s9", 0)
    run(QUESTIONS, [text_job], text_meta, local(stub), tmp_path / "c.jsonl")
    assert read_cache(tmp_path / "c.jsonl")[text_job.key]["rejected"] is None
    assert "response_format" not in bodies(stub)[-1]


def test_the_judge_schema_is_a_grade_0_to_3():
    assert GRADE_SCHEMA.mismatch('{"grade": 2}') is None
    for reply in ('{"grade": 5}', '{"grade": "2"}', '{"grade": true}', "##final score: 2", '{"grade": 1, "why": "x"}'):
        assert GRADE_SCHEMA.mismatch(reply) is not None, reply


def test_anthropic_gets_output_config_and_neither_seed_nor_temperature(stub, tmp_path):
    meta, jobs = jobs_for(1)
    run(QUESTIONS, jobs, meta, settings(response_format="json_schema"), tmp_path / "c.jsonl")
    body = bodies(stub)[0]
    assert not {"temperature", "seed"} & set(body)
    assert body["output_config"]["format"]["schema"]["required"] == ["question", "evidence"]
    run(QUESTIONS, jobs_for(2)[1][1:], meta, settings(), tmp_path / "c.jsonl")
    assert not {"temperature", "seed", "output_config"} & set(bodies(stub)[-1])  # unchanged unless set


def test_a_temperature_for_anthropic_is_refused_in_one_line(tmp_path):
    path = params_with(tmp_path, **{"judge.temperature": 0.5})  # judge.provider is anthropic by default
    params = load_all_params(path)  # the ground layer checks the shape; the LLM layer what the provider takes
    with pytest.raises(InputError, match=r"judge\.temperature is for provider openai-compatible"):
        check_llm_sections(params, str(path))


# --- re-asks differ -------------------------------------------------------------------------------------
def test_each_attempt_sends_its_own_seed_and_both_are_recorded(stub, tmp_path):
    base, _ = jobs_for(0, provider="openai-compatible")
    meta = Meta(**{**base.__dict__, "seed": 0, "temperature": 0.7})
    jobs = [QUESTIONS.job(meta, TEMPLATE, TEXT, TEXT_SHA, attempt) for attempt in range(3)]
    assert len({job.seed for job in jobs}) == 3
    assert jobs[1].seed == QUESTIONS.job(meta, TEMPLATE, TEXT, TEXT_SHA, 1).seed  # deterministic
    other_seed = Meta(**{**meta.__dict__, "seed": 1})
    assert QUESTIONS.job(other_seed, TEMPLATE, TEXT, TEXT_SHA, 0).seed != jobs[0].seed
    run(QUESTIONS, jobs, meta, local(stub, temperature=0.7, concurrency=1), tmp_path / "c.jsonl")
    sent = sorted((body["seed"], body["temperature"]) for body in bodies(stub))
    assert sent == sorted((job.seed, 0.7) for job in jobs)
    cache = read_cache(tmp_path / "c.jsonl")
    assert sorted((cache[job.key]["seed"], cache[job.key]["temperature"]) for job in jobs) == sent


# --- cache keys -----------------------------------------------------------------------------------------
def test_max_tokens_is_not_in_the_key_and_an_old_record_is_still_found(tmp_path):
    meta = Meta("openai-compatible", "openai-compatible", "smol", "p" * 64, 300)
    lower = Meta("openai-compatible", "openai-compatible", "smol", "p" * 64, 60)
    assert QUESTIONS.job(meta, TEMPLATE, TEXT, TEXT_SHA, 0).key == QUESTIONS.job(lower, TEMPLATE, TEXT, TEXT_SHA, 0).key
    # A record written before max_tokens left the key: sha256 of [family, model, prompt, passage, max_tokens].
    old_key = hashlib.sha256(json.dumps(["openai-compatible", "smol", "p" * 64, TEXT, 300]).encode()).hexdigest()
    with CacheWriter(tmp_path / "c.jsonl") as writer:
        writer.append({"key": old_key, "question": "What does the WAL keep?", "max_tokens": 300, "attempt": 0})
    earlier = EarlierKeys.of(read_cache(tmp_path / "c.jsonl"))
    now = Meta("openai-compatible", "openai-compatible", "smol", "p" * 64, 60, earlier=earlier)
    assert QUESTIONS.job(now, TEMPLATE, TEXT, TEXT_SHA, 0).key == old_key
    assert QUESTIONS.job(now, TEMPLATE, TEXT, TEXT_SHA, 1).key != old_key  # a re-ask is a new request


def test_a_model_alias_keeps_the_cache_of_a_moved_model_folder():
    def key(model: str, alias: str | None) -> str:
        meta = Meta("openai-compatible", "openai-compatible", model, "p" * 64, 300, model_alias=alias)
        return QUESTIONS.job(meta, TEMPLATE, TEXT, TEXT_SHA, 0).key

    assert key("/models/a/smollm2", "smollm2") == key("/srv/b/smollm2", "smollm2")
    assert key("/models/a/smollm2", None) != key("/srv/b/smollm2", None)
    # The old folder's path as the alias finds what was cached under it.
    assert key("/srv/b/smollm2", "/models/a/smollm2") == key("/models/a/smollm2", None)


# --- the dry run's plan ---------------------------------------------------------------------------------
def test_the_dry_run_says_max_questions_is_used_up_by_hand_written_questions(stub, tmp_path):
    project = stage_project(tmp_path / "p")
    wal = (ROOT / "data" / "sample" / "sqlite" / "wal.md").read_text(encoding="utf-8")
    sentences = [s.strip() + "." for s in wal.split(". ") if len(s.split()) > 8][:3]
    rows = [
        {"question": f"What does the WAL page say ({i})?", "doc_id": "wal.md", "evidence": s}
        for i, s in enumerate(sentences)
    ]
    rows.append(rows[0])  # an exact repeat: dropped, and said (only metrics/goldenset.json counted it)
    (project / "data" / "hw.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["generate"].update(
        handwritten="data/hw.jsonl", max_questions=2, provider="openai-compatible", base_url=f"{stub.url}/v1"
    )
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    status, out, err = run_stage_here(project, stub, "--dry-run")
    assert status == 0, err
    plan = "max_questions 2 is used up by 3 hand-written questions: 0 to generate; a sample of 2 of them is kept"
    assert plan in out and "1 hand-written questions repeat an earlier one and are dropped" in out
    assert stub.generation_requests() == []
    status, out, err = run_stage_here(project, stub)
    assert status == 0, err
    assert plan in out and stub.generation_requests() == []
    golden = [json.loads(line) for line in (project / "data" / "goldenset.jsonl").read_text().splitlines()]
    report = json.loads((project / "metrics" / "goldenset.json").read_text())
    assert len(golden) == 2 and report["handwritten_left_out"] == 1
    # counted on the 2 kept, not on the 3 read
    covered = len({row["chunk_sha256"] for row in golden})
    assert report["passages_without_question"] == report["passages"] - covered
