"""Bad input on the judge and score surfaces: judge and score params, pooled run files, the grade
cache (data/judgements.jsonl), the judged pool score reads, the judge prompt, and bad replies or
lost batches from the provider (the stub server, through the real anthropic SDK). Every case:
exit status 1, exactly one `error:` line naming where, no traceback, and the last good outputs
(the judged pool, metrics/judge.json, metrics.json, per_question.csv) intact, byte for byte."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys

import pandas as pd
import pytest
from conftest import set_params
from judge_helpers import grade_by_marker, make_project
from stage_helpers import stage_in_process
from stub_llm import StubLLM, stage_env

from retrieval_bench.core import paths

JUDGE_OUTPUTS = ["data/judged_pool.jsonl", "metrics/judge.json"]
SCORE_OUTPUTS = ["metrics/panel/default/metrics.json", "metrics/panel/default/per_question.csv"]
POOL, CACHE, PROMPT = "data/judged_pool.jsonl", "data/judgements.jsonl", "data/judge_prompt.txt"


@pytest.fixture(scope="module")
def stub():
    with StubLLM() as server:
        yield server


@pytest.fixture(scope="module")
def good(tmp_path_factory, stub):
    """A project judged (synchronously, grades by marker) and scored once: the last good outputs."""
    project = make_project(tmp_path_factory.mktemp("good") / "p")
    with pytest.MonkeyPatch.context() as patch:
        run_both(project, stub, patch)
    return project


def run_both(project, stub, patch) -> None:
    stub.reply = grade_by_marker
    use_stub(stub, patch)
    patch.chdir(project)
    from retrieval_bench.core.stage import run_stage
    from stages import judge, score

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        run_stage(judge.main)
        run_stage(lambda: score.main([paths.DEFAULT]), own_arguments=True)


def use_stub(stub, patch) -> None:
    env = stage_env(stub)
    for name in [name for name in os.environ if name.startswith(("ANTHROPIC_", "OPENAI_"))]:
        patch.delenv(name)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        patch.setenv(name, env[name])
    patch.setattr(sys, "argv", ["judge"])  # the judge stage reads its own command line


@pytest.fixture
def project(good, tmp_path, stub, monkeypatch):
    copy = tmp_path / "p"
    shutil.copytree(good, copy)
    stub.reply, stub.faults, stub.batch_outcome, stub.after_create = grade_by_marker, [], lambda c, i: "succeeded", None
    use_stub(stub, monkeypatch)
    return copy


def write(project, path: str, data: str | bytes) -> None:
    target = project / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def pool_run(project, name: str, frame: pd.DataFrame) -> None:
    (project / "runs").mkdir(exist_ok=True)
    frame.to_parquet(project / "runs" / name, index=False)
    set_params(project, **{"judge.pool": [f"runs/{name}"]})


def first_pool_line(project) -> dict:
    return json.loads((project / POOL).read_text().splitlines()[0])


def replace_pool_line(project, line: str) -> None:
    lines = (project / POOL).read_text().splitlines()
    write(project, POOL, "\n".join([line] + lines[1:]) + "\n")


def needs_new_grades(project, stub, provider: str) -> None:
    """Deeper pooling: 6 more pairs to grade, so the provider is asked (and misbehaves)."""
    set_params(project, **{"judge.depth": 6, "judge.max_retries": 0, "judge.provider": provider})


def params(**changes):
    """A change of dotted params.yaml keys ("judge__depth" for judge.depth)."""
    return lambda project, *_: set_params(project, **{key.replace("__", "."): value for key, value in changes.items()})


def pool_file(name: str, text: str):
    """judge.pool names one run file, with this content."""
    return lambda project, *_: (
        write(project, f"runs/{name}", text),
        set_params(project, **{"judge.pool": [f"runs/{name}"]}),
    )


def prepend(path: str, data: bytes):
    return lambda project, *_: write(project, path, data + (project / path).read_bytes())


def pool_line(**fields):
    """The judged pool's first line with these fields changed."""
    return lambda project: replace_pool_line(project, json.dumps({**first_pool_line(project), **fields}))


def misbehaving(provider: str = "anthropic", **stub_settings):
    """More pairs to grade, and the stub misbehaves as told (faults, batch outcomes, lost batches)."""

    def change(project, stub):
        needs_new_grades(project, stub, provider=provider)
        for name, value in stub_settings.items():
            setattr(stub, name, value)

    return change


def truncated_run(project, stub) -> None:
    write(project, "runs/cut.parquet", (project / "data" / "panel" / "default" / "run.parquet").read_bytes()[:300])
    set_params(project, **{"judge.pool": ["runs/cut.parquet"]})


NO_RANK = pd.DataFrame({"qid": ["q0"], "chunk_id": ["c01"], "score": [1.0]})
JUDGE_CASES = {
    "depth zero": (params(judge__depth=0), ["judge.depth must be a positive integer"]),
    "depth a string": (params(judge__depth="five"), ["params.yaml", "judge.depth"]),
    "empty pool": (params(judge__pool=[]), ["judge.pool must be a non-empty list"]),
    "missing pool file": (params(judge__pool=["runs/missing.trec"]), ["judge.pool runs/missing.trec: not found"]),
    "pool entry twice": (
        params(judge__pool=["data/panel/default/run.parquet"] * 2),
        ["judge.pool lists 'data/panel/default/run.parquet' twice"],
    ),
    "unknown provider": (params(judge__provider="openai"), ["judge.provider must be one of"]),
    "negative cost limit": (params(judge__max_cost_usd=-1), ["judge.max_cost_usd must be a positive number"]),
    "no attempts": (params(judge__max_attempts=0), ["judge.max_attempts"]),
    "grade 4 as the bar": (params(judge__min_grade=4), ["judge.min_grade must be 1, 2 or 3"]),
    "trec line of 3 fields": (pool_file("bad.trec", "q0 c01 1.0\n"), ["runs/bad.trec:1: expected a TREC run line"]),
    "trec score not a number": (
        pool_file("bad.trec", "q0 Q0 c01 1 high tag\n"),
        ["runs/bad.trec:1: score must be a number"],
    ),
    "jsonl run without a score": (
        pool_file("bad.jsonl", '{"qid": "q0", "chunk_id": "c01"}\n'),
        ["runs/bad.jsonl:1: expected a JSON object with qid, chunk_id and a numeric score"],
    ),
    "parquet run without rank": (
        lambda p, s: pool_run(p, "norank.parquet", NO_RANK),
        ["judge.pool runs/norank.parquet: no column 'rank'"],
    ),
    "parquet run truncated": (truncated_run, ["judge.pool runs/cut.parquet: not a readable Parquet table"]),
    "prompt without a query": (
        lambda p, s: write(p, PROMPT, "Grade <passage>\n{passage}\n</passage>\n"),
        [f"{PROMPT}: the judge prompt has no {{query}}"],
    ),
    "prompt not UTF-8": (lambda p, s: write(p, PROMPT, b"\xff {query} {passage}"), [f"{PROMPT}: not UTF-8 text"]),
    # The judge's own keys are named, not generate's: the judge shares the paid-call code.
    "model without a price": (
        params(judge__model="mystery-model"),
        ["judge.model 'mystery-model' has no known price", "set judge.price", "judge.max_cost_usd"],
    ),
    "openai-compatible without a base url": (
        misbehaving("openai-compatible"),
        ["judge.provider openai-compatible needs judge.base_url"],
    ),
    "base url without the API": (
        lambda p, s: (
            needs_new_grades(p, s, "openai-compatible"),
            set_params(p, **{"judge.base_url": f"{s.url}/nowhere"}),
        ),
        ["HTTP 404", "check judge.model and the base URL"],
    ),
    "provider refuses the key": (misbehaving(faults=["auth"] * 12), ["401", "rerun to ask for the rest"]),
    "provider spend limit": (misbehaving(faults=["spend_limit"] * 12), ["spend limit"]),
    "malformed replies": (misbehaving(faults=["malformed"] * 200), ["judging requests failed"]),
    "batch requests errored": (
        misbehaving("anthropic-batch", batch_outcome=lambda custom_id, index: "errored"),
        ["6 judging requests failed", "rerun"],
    ),
    "batch lost by the provider": (
        misbehaving("anthropic-batch", after_create=lambda server: server.batches.clear()),
        ["6 of 30 pooled pairs are unjudged", "rerun to resubmit only these"],
    ),
}

SCORE_CASES = {
    "unknown tie policy": (params(score__ties="random"), ["params.yaml", "score.ties"]),
    "k beyond the depth": (params(score__k=[1, 20], retrieval__depth=10), ["score.k 20 is beyond retrieval.depth 10"]),
    "k zero": (params(score__k=[0, 5]), ["score.k must be a non-empty list of distinct positive integers"]),
    "coverage above one": (params(score__min_coverage=1.5), ["score.min_coverage must be in (0, 1]"]),
    "min grade zero": (params(judge__min_grade=0), ["judge.min_grade must be 1, 2 or 3"]),
    "ambiguous at zero": (params(judge__ambiguous_at=0), ["judge.ambiguous_at"]),
    "pool grade 7": (pool_line(grade=7), [f"{POOL}:1: grade must be an integer 0-3 or null, got 7"]),
    "pool grade true": (pool_line(grade=True), [f"{POOL}:1: grade must be an integer 0-3 or null, got True"]),
    "pool grade a string": (pool_line(grade="3"), [f"{POOL}:1: grade must be an integer 0-3 or null, got '3'"]),
    "pool chunk unknown": (pool_line(chunk_id="zz"), [f"{POOL}:1: chunk 'zz' is not in the chunk table"]),
    "pool line not JSON": (lambda p: replace_pool_line(p, "{not json"), [f"{POOL}:1: invalid JSON"]),
    "pool line a list": (lambda p: replace_pool_line(p, "[1, 2]"), [f"{POOL}:1: expected a JSON object"]),
    "pool not UTF-8": (prepend(POOL, b"\xff\xfe\n"), [f"{POOL}:1: not UTF-8 text"]),
}


def snapshot(project, outputs: list[str]) -> dict[str, bytes]:
    return {path: (project / path).read_bytes() for path in outputs}


def assert_one_error_line(result, *fragments: str) -> None:
    """Exit 1, exactly one `error:` line holding every fragment, no traceback (a progress bar may
    have been drawn on stderr before the error)."""
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("case", list(JUDGE_CASES))
def test_bad_judge_input_is_one_line_and_keeps_the_last_good_outputs(project, stub, case, monkeypatch, capsys):
    before = snapshot(project, JUDGE_OUTPUTS + SCORE_OUTPUTS)
    change, fragments = JUDGE_CASES[case]
    change(project, stub)
    assert_one_error_line(stage_in_process("judge", project, monkeypatch, capsys), *fragments)
    assert snapshot(project, JUDGE_OUTPUTS + SCORE_OUTPUTS) == before


# A damaged line of the grade cache is named and ignored (its pair asked again, never a sound one):
# the cache is shared through a DVC remote, and one bad line must not stop every teammate's judge.
DAMAGED_CACHE_LINES = {
    "not JSON": (b"{broken\n", "invalid JSON"),
    "a list": (b"[1, 2]\n", "not a record with 'key' and 'question'"),
    "not UTF-8": (b"\xff\xfe{}\n", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(DAMAGED_CACHE_LINES))
def test_a_damaged_grade_cache_line_is_named_and_nothing_sound_is_paid_again(project, stub, case, monkeypatch, capsys):
    before = snapshot(project, JUDGE_OUTPUTS)
    asked = len(stub.generation_requests())
    line, why = DAMAGED_CACHE_LINES[case]
    prepend(CACHE, line)(project)
    result = stage_in_process("judge", project, monkeypatch, capsys)
    assert result.returncode == 0, result.stderr
    assert f"reply cache: {CACHE}:1: {why}; ignored, its question is asked again" in result.stderr, result.stderr
    assert len(stub.generation_requests()) == asked  # every pooled pair still has its sound grade
    assert snapshot(project, JUDGE_OUTPUTS)["data/judged_pool.jsonl"] == before["data/judged_pool.jsonl"]


@pytest.mark.parametrize("case", list(SCORE_CASES))
def test_bad_score_input_is_one_line_and_keeps_the_last_good_outputs(project, case, monkeypatch, capsys):
    before = snapshot(project, SCORE_OUTPUTS)
    change, fragments = SCORE_CASES[case]
    change(project)
    result = stage_in_process("score", project, monkeypatch, capsys)
    assert_one_error_line(result, *fragments)
    assert len(result.stderr.strip().splitlines()) == 1  # score draws no bar: the error is all it says
    assert snapshot(project, SCORE_OUTPUTS) == before
