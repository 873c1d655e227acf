"""generate.kind_classifier llm: real and hand-written questions' kinds asked of the LLM (the real
anthropic and openai SDKs against the stub server), cached in the question cache, priced and paid
once, driving generate.kinds match; the reply parser and schema; the params check."""

from __future__ import annotations

import json
import re

import pytest
from conftest import set_params
from stub_llm import StubLLM, read_jsonl, run_stage_here, run_stage_on_openai, stage_project

from retrieval_bench.core.errors import InputError
from retrieval_bench.llm.checks.kinds import kind_label_fields
from retrieval_bench.llm.providers.schema import KIND_SCHEMA

GOLDEN = "data/goldenset.jsonl"
# Hand-written questions on the stub project's documents (wal.md, autoinc.md): by the rules, the
# first three are single and the fourth keyword; the stub's classifier (stub_server.stub_kind) calls
# the second multi ("and"), and a stated kind or an unanswerable question is never asked.
HANDWRITTEN = [
    {
        "question": "Is write-ahead logging usually quicker than a rollback journal?",
        "doc_id": "wal.md",
        "evidence": "WAL is significantly faster in most scenarios.",
    },
    {
        "question": "Why can readers and writers work at the same time under WAL?",
        "doc_id": "wal.md",
        "evidence": "readers do not block writers and a writer does not block readers",
    },
    {
        "question": "Does SQLite fill in a missing INTEGER PRIMARY KEY value by itself?",
        "doc_id": "autoinc.md",
        "evidence": "it will be filled automatically with an unused integer",
    },
    {"question": "wal fewer fsync calls", "doc_id": "wal.md", "evidence": "WAL uses many fewer fsync() operations"},
    {
        "question": "Should I avoid the AUTOINCREMENT keyword?",
        "doc_id": "autoinc.md",
        "evidence": "should be avoided if not strictly needed",
        "kind": "single",  # stated: kept, never asked
    },
    {"question": "When did SQLite drop the AUTOINCREMENT keyword?", "kind": "unanswerable", "doc_id": "autoinc.md"},
]


@pytest.mark.parametrize(
    ("reply", "stop", "kind", "reason"),
    [
        ('{"kind": "multi"}', None, "multi", None),
        ("keyword", None, "keyword", None),
        ("Kind: Single.", None, "single", None),
        ('<think>two facts?</think>\n{"kind": "multi"}', None, "multi", None),
        ('```json\n{"kind": "keyword"}\n```', None, "keyword", None),
        ('{"kind": "unanswerable"}', None, None, "no_kind"),  # the labels decide that, not the words
        ("It is hard to say.", None, None, "no_kind"),
        ("", None, None, "empty"),
        ("", "max_tokens", None, "truncated"),
        ('{"kind": ', "max_tokens", None, "truncated"),
    ],
)
def test_the_classifier_reply_names_one_worded_kind(reply, stop, kind, reason):
    fields = kind_label_fields(reply, stop)
    assert (fields["kind"], fields["rejected"], fields["question"]) == (kind, reason, None)


def test_the_kind_schema_holds_the_three_worded_kinds():
    assert KIND_SCHEMA.mismatch('{"kind": "multi"}') is None
    assert KIND_SCHEMA.mismatch('{"kind": "unanswerable"}') is not None
    assert KIND_SCHEMA.mismatch('{"kind": "single", "why": "one passage"}') is not None


def _project(tmp_path, **params):
    project = stage_project(tmp_path / "p", docs=["wal.md", "autoinc.md"])
    (project / "data/handwritten.jsonl").write_text("".join(json.dumps(row) + "\n" for row in HANDWRITTEN))
    set_params(
        project,
        **{
            "generate.handwritten": "data/handwritten.jsonl",
            "generate.kind_classifier": "llm",
            "generate.kinds": "match",
            "generate.max_questions": 12,
            **params,
        },
    )
    return project


def _classifier_requests(stub: StubLLM) -> list:
    return [r for r in stub.requests if r.body and "<question>" in json.dumps(r.body)]


def test_the_llm_classifies_the_questions_the_rules_left_open_once_and_priced(tmp_path):
    project = _project(tmp_path, **{"generate.provider": "anthropic"})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub, "--dry-run")
        assert status == 0, err
        assert not stub.generation_requests()
        assert "kind classifier: 4 questions to classify, 0 classified already" in out
        assert re.search(r"^generate_goldenset: kind classifier: .*requests to anthropic", out, re.MULTILINE)
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        asked = [json.dumps(r.body) for r in _classifier_requests(stub)]
        report = json.loads((project / "metrics/goldenset.json").read_text())
        status, again, err = run_stage_here(project, stub)  # a rerun pays nothing for them again
        assert status == 0, err
        assert len(_classifier_requests(stub)) == len(asked)
    assert len(asked) == 4 and all("should I avoid" not in body.lower() for body in asked)
    rows = {row["question"]: row for row in read_jsonl(project / GOLDEN) if row["source"] == "hand-written"}
    said = {question: (row["kind"], row.get("kind_by")) for question, row in rows.items()}
    assert said == {
        HANDWRITTEN[0]["question"]: ("single", "llm"),
        HANDWRITTEN[1]["question"]: ("multi", "llm"),  # the rules said single
        HANDWRITTEN[2]["question"]: ("single", "llm"),
        HANDWRITTEN[3]["question"]: ("keyword", "llm"),
        HANDWRITTEN[4]["question"]: ("single", None),  # its row said so
        HANDWRITTEN[5]["question"]: ("unanswerable", None),
    }
    classifier = report["kind_classifier"]
    assert {k: classifier[k] for k in ("by", "asked", "classified", "by_rule", "changed", "requests")} == {
        "by": "llm",
        "asked": 4,
        "classified": 4,
        "by_rule": 0,
        "changed": {"single->multi": 1},
        "requests": 4,
    }
    assert classifier["cost_usd"] > 0
    # generate.kinds match takes the classified mix: 3 single, 1 multi, 1 keyword, 1 unanswerable of 6
    assert report["matched_mix"] == {
        "from": "hand-written",
        "single": 0.5,
        "multi": 0.1667,
        "unanswerable": 0.1667,
        "keyword": 0.1667,
    }
    assert "kind classifier: 4 of 4 real and hand-written questions" in out and "1 single to multi" in out
    assert "0 requests" in again


def test_provider_none_reads_the_cached_kinds_and_keeps_the_rules_for_the_rest(tmp_path):
    project = _project(tmp_path, **{"generate.provider": "anthropic", "generate.max_questions": 6})
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert status == 0, err
    rows = [json.loads(line) for line in (project / "data/handwritten.jsonl").read_text().splitlines()]
    rows.append(
        {
            "question": "Can a WAL database live on a network filesystem?",
            "doc_id": "wal.md",
            "evidence": "WAL does not work over a network filesystem",
        }
    )
    (project / "data/handwritten.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    set_params(project, **{"generate.provider": "none", "generate.kinds": {"single": 1.0}, "generate.max_questions": 7})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        assert not stub.requests
    by_question = {row["question"]: row for row in read_jsonl(project / GOLDEN)}
    assert by_question[HANDWRITTEN[1]["question"]]["kind"] == "multi"  # from the cache
    assert by_question[rows[-1]["question"]]["kind_by"] == "rule"  # never asked: the rules' kind
    assert "1 keep the rules' kind (no cached reply, provider none)" in out


def test_the_classifier_counts_against_the_cost_limit(tmp_path):
    project = _project(tmp_path, **{"generate.provider": "anthropic", "generate.max_cost_usd": 0.000001})
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert not stub.requests
    assert status == 1 and err.startswith("error:") and len(err.strip().splitlines()) == 1, err
    assert "max_cost_usd" in err


def test_the_classifier_and_the_questions_share_one_cost_limit(tmp_path):
    """A limit each fits alone but not together (the fixture's 4 classifications and 8 questions):
    the classifier runs and its replies are kept; the questions are refused before any request, in
    one line naming the whole limit and the total, what the classifier spent included."""
    limit = 0.0075
    settings = {"generate.provider": "anthropic", "generate.kinds": {"single": 1.0}, "generate.max_questions": 14}
    project = _project(tmp_path, **settings, **{"generate.max_cost_usd": limit})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
        kinds_asked, all_asked = len(_classifier_requests(stub)), len(stub.generation_requests())
    assert (kinds_asked, all_asked) == (4, 4)  # the classifier's requests only
    spent = float(re.search(r"kind classifier: 4 replies .* tokens, \$([\d.]+)$", out, re.MULTILINE).group(1))
    estimate = float(re.search(r"^generate_goldenset: 8 questions to generate, .* ~ \$([\d.]+) ", out, re.M).group(1))
    assert estimate < limit < spent + estimate  # each fits alone, not both: the premise
    errors = [line for line in err.splitlines() if line.startswith("error:")]  # the classifier's bar before it
    assert status == 1 and len(errors) == 1 and err.rstrip().endswith(errors[0]), err
    total = re.search(
        r"the cost estimate \$([\d.]+) for 8 questions is above generate.max_cost_usd \$0.0075 \(\$[\d.]+ of it "
        r"already spent by this run",
        errors[0],
    )
    assert total and abs(float(total.group(1)) - (spent + estimate)) < 1e-4, errors[0]
    cached = [r for r in read_jsonl(project / "data/question_cache.jsonl") if r.get("kind")]
    assert len(cached) == 4  # paid for and kept: a rerun with a higher limit asks only the questions


def test_json_schema_is_sent_with_the_openai_sdk(tmp_path):
    project = _project(tmp_path, **{"generate.max_questions": 6, "generate.response_format": "json_schema"})
    with StubLLM() as stub:
        status, _, err = run_stage_on_openai(project, stub)
        assert status == 0, err
        schemas = {r.body["response_format"]["json_schema"]["name"] for r in _classifier_requests(stub)}
    assert schemas == {"question_kind"}


def test_a_bad_classifier_param_is_one_line(tmp_path):
    from retrieval_bench.core.params import load_all_params

    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.kind_classifier": "maybe"})
    with pytest.raises(InputError, match=r"generate\.kind_classifier must be one of llm, rules, got 'maybe'"):
        load_all_params(project / "params.yaml")


def test_real_queries_are_classified_and_read_back_without_a_provider(tmp_path):
    """Real labelled queries: asked with a provider; with provider none (the golden set is then the
    real queries alone, nothing generated) their cached kinds are read back."""
    project = _project(tmp_path, **{"generate.provider": "anthropic", "generate.max_questions": 4})
    labels = [
        {"qid": "r1", "question": "compare wal and rollback journal", "relevant": {"wal.md#0": 1}},  # keyword by rule
        {"qid": "r2", "question": "How do WAL and a rollback journal differ in speed?", "relevant": {"wal.md#0": 2}},
        {"qid": "r3", "question": "Is this answered anywhere?", "relevant": {"wal.md#0": 0}},  # unanswerable by label
    ]
    (project / "data/labels.jsonl").write_text("".join(json.dumps(label) + "\n" for label in labels))
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert status == 0, err
        asked = [json.dumps(r.body) for r in _classifier_requests(stub)]
    assert sum("Is this answered anywhere" in body for body in asked) == 0
    set_params(project, **{"generate.provider": "none", "generate.kinds": {"single": 1.0}})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        assert not stub.requests
    real = {
        row["qid"]: (row["kind"], row["kind_by"]) for row in read_jsonl(project / GOLDEN) if row["source"] == "qrels"
    }
    # the stub's classifier: 5 words, no '?' -> keyword; "differ ... and" -> multi (the rules said single)
    assert real == {"r1": ("keyword", "llm"), "r2": ("multi", "llm"), "r3": ("unanswerable", "rule")}
    assert json.loads((project / "metrics/goldenset.json").read_text())["kind_classifier"]["classified"] == 2


def test_with_the_batch_api_a_run_killed_while_the_classifier_batch_processes_is_resumed_not_paid_again(tmp_path):
    """anthropic-batch: the classifier's batch (journalled with its task, kind_label) then the
    questions'. Killed while the first processes, the rerun collects it with the classifier's parser
    and submits only the questions' batch: 2 creates in all, every kind reply accepted."""
    import signal

    from stub_llm import start_stage, wait_for

    from retrieval_bench.core import paths

    project = _project(
        tmp_path,
        **{"generate.provider": "anthropic-batch", "generate.max_questions": 8, "generate.kinds": {"single": 1.0}},
    )
    journal = project / paths.BATCH_JOURNAL
    with StubLLM() as stub:
        stub.batch_views = 10**9  # processing until the test ends it
        process = start_stage(project, stub)
        wait_for(lambda: any(e["event"] == "submitted" for e in read_jsonl(journal)), process)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        assert [e["task"] for e in read_jsonl(journal) if e["event"] == "submitted"] == ["kind_label"]
        stub.batch_views = None
        stub.end_batches()
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        assert stub.batch_creates() == 2, "the classifier's journalled batch was submitted again"
    kinds = [r for r in read_jsonl(project / paths.QUESTION_CACHE) if "kind" in r]
    assert len(kinds) == 4 and all(r["rejected"] is None for r in kinds)
    rows = {row["question"]: row for row in read_jsonl(project / GOLDEN)}
    assert rows[HANDWRITTEN[1]["question"]]["kind"] == "multi"


@pytest.mark.parametrize(
    ("prompt", "said"),
    [
        (None, "data/kind_prompt.txt: no such file (the prompt of generate.kind_classifier llm)"),
        (b"Which kind is it? Reply in JSON.", "data/kind_prompt.txt: the kind classifier's prompt has no {question}"),
        (b"\xff\xfe{question}", "data/kind_prompt.txt: not UTF-8 text (byte 0)"),
    ],
)
def test_a_bad_classifier_prompt_is_one_line_and_nothing_is_asked(tmp_path, prompt, said):
    project = _project(tmp_path, **{"generate.provider": "anthropic"})
    path = project / "data/kind_prompt.txt"
    if prompt is None:
        path.unlink()
    else:
        path.write_bytes(prompt)
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert not stub.requests
    assert status == 1 and len(err.strip().splitlines()) == 1 and said in err, err
