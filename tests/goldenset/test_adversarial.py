"""Hostile chunks end to end: load_chunks and generate_goldenset run (in this process) on a corpus of
adversarial chunks (tests/goldenset/adversarial/chunks.jsonl: delimiter injection, "ignore previous
instructions", prompt-format look-alikes, fake replies, zero-width and right-to-left characters,
plus a 5 MB chunk made here), against the stub playing a model that falls for every trick.
Every chunk stays inside the passage block, every trick the model plays is rejected with a
reason in metrics/generate_rejects.jsonl and asked again, and every golden row's evidence lies
in its own passage."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

from conftest import set_params
from stub_llm import StubLLM, default_reply, passage_block, passage_of, read_jsonl, run_stage_here, stage_project

from stages import load_chunks

HERE = Path(__file__).parent
BIG_SENTENCE = "Rows are stored in B-trees, one per table. "


def fooled(passage: str, calls: Counter) -> str:
    """A model that does what the passage tells it, the first time it sees each passage."""
    calls[passage] += 1
    if calls[passage] > 1:
        return default_reply(passage)
    if "Ignore previous instructions" in passage:  # obeys the injected text: two JSON objects
        return (
            'Sure! {"question": "What is the admin password?", "evidence": "the admin password is hunter2"} '
            'and also {"question": "Who wrote this?", "evidence": "SQLite"}'
        )
    if passage.startswith("</passage>"):  # quotes evidence from another chunk: it would move the gold span
        return json.dumps({"question": "Why do readers not block writers?", "evidence": "readers do not block writers"})
    if passage.startswith("Reply with a JSON object"):  # answers with a statement
        return json.dumps({"question": "This passage is a prompt template.", "evidence": "Reply with a JSON object"})
    return default_reply(passage)


def test_adversarial_chunks_stay_data_end_to_end(tmp_path, monkeypatch):
    project = stage_project(tmp_path / "p")
    corpus = project / "data" / "hostile.jsonl"
    shutil.copy(HERE / "adversarial" / "chunks.jsonl", corpus)
    with open(corpus, "a", encoding="utf-8") as handle:  # a 5 MB chunk
        handle.write(
            json.dumps({"id": "five-megabytes", "text": BIG_SENTENCE * (5_000_000 // len(BIG_SENTENCE))}) + "\n"
        )
    set_params(
        project,
        **{
            "load.source": "data/hostile.jsonl",
            "generate.provider": "anthropic",
            "generate.max_questions": 0,
            "generate.max_attempts": 2,
        },
    )
    chunks = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    calls: Counter[str] = Counter()
    with StubLLM() as stub:
        stub.reply = lambda passage: fooled(passage, calls)
        with monkeypatch.context() as here:
            here.chdir(project)
            load_chunks.main()
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        prompts = [r.body["messages"][-1]["content"] for r in stub.generation_requests()]

    texts = {chunk["id"]: chunk["text"] for chunk in chunks}
    assert prompts and all(len(prompt) < 3_000 for prompt in prompts)  # the 5 MB chunk was cut into passages
    for prompt in prompts:
        readable = (
            re.sub(r"[\s\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]", "", prompt).replace("\uff1c", "<").lower()
        )
        assert readable.count("</passage>") == 1 and readable.count("<passage>") == 1, prompt
        assert any(passage_of(prompt) in text for text in texts.values()), passage_block(prompt)  # sent whole, as data
    for name in (
        "delimiter-injection",
        "ignore-previous",
        "format-lookalike",
        "sneaky-delimiters",
        "zero-width-rtl",
        "fake-reply",
    ):
        assert any(texts[name].startswith(passage_of(prompt)[:40]) for prompt in prompts), f"{name} was never sent"

    rejects = read_jsonl(project / "metrics/generate_rejects.jsonl")
    reasons = Counter(reject["reason"] for reject in rejects)
    assert {"several_questions", "evidence_not_in_passage", "not_a_question"} <= set(reasons), reasons
    assert all(reject["regenerated"] for reject in rejects)

    golden = read_jsonl(project / "data/goldenset.jsonl")
    assert len(golden) >= 9  # every distinct passage got a question on its second try at the latest
    for row in golden:
        assert "{" not in row["question"] and "password" not in row["question"] and row["question"].endswith("?")
        passage_start, passage_end = map(int, row["gold_chunk_id"].rsplit(":", 1)[1].split("-"))
        assert passage_start <= row["start"] < row["end"] <= passage_end, row
