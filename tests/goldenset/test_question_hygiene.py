"""Question hygiene: questions that only make sense with their passage in view, and near-duplicate
questions, flagged and counted in metrics/goldenset.json, and regenerated (generated ones) or
dropped (hand-written ones) with generate.drop_context_dependent / drop_near_duplicates."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import set_params
from stub_llm import StubLLM, read_jsonl, run_stage_here, stage_project

from retrieval_bench.goldenset.build import Hygiene, QuestionIndex, context_dependent

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "question",
    [
        "According to the passage, when is a checkpoint run?",
        "What does the above example print?",
        "In this section, which pragma turns WAL on?",
        "Which of the following journal modes is the default?",
        "What is the limit described above?",
        "What does it return when the database is busy?",
        "How does this work with several connections?",
        "Does it support foreign keys?",
        "What are these settings for?",
        "Why did they change the default page size?",
        "What does this table store for each row?",
        "Is it thread-safe?",  # a short "is it ...": what is "it"?
        "Is it worth it?",
        "Will it block writers during a checkpoint?",
    ],
)
def test_questions_that_need_their_passage_are_flagged(question):
    assert context_dependent(question)


@pytest.mark.parametrize(
    "question",
    [
        "Is it safe to copy a database file while it is open?",
        "Why is it bad for performance when a transaction spills the cache?",
        "How long does it take to vacuum a large database?",
        "Does it matter whether I call sqlite3_close before exiting?",
        "How do I count the rows in a table?",
        "Can I store a JSON document in a column?",
        "What happens to readers while a checkpoint runs?",
    ],
)
def test_self_contained_questions_are_not(question):
    assert context_dependent(question) is None


ORDINARY = [  # what users ask; 25 open with "is it", "was it" or "isn't it"
    "Is it worth enabling WAL mode for a read-heavy app?",
    "Is it worth enabling WAL mode?",
    "Is it possible to attach two databases to one connection?",
    "Is it a good idea to store images as BLOBs?",
    "Is it normal for the WAL file to keep growing?",
    "Is it OK to vacuum while readers are connected?",
    "Is it true that SQLite has no server process?",
    "Is it slower to use AUTOINCREMENT than a plain rowid?",
    "Is it faster to insert rows inside one transaction?",
    "Is it necessary to call sqlite3_finalize on every statement?",
    "Is it safe to share a connection between threads?",
    "Is it better to use WAL or rollback journal mode on an SSD?",
    "Is it possible for two processes to write at the same time?",
    "Is it recommended to run ANALYZE after bulk loads?",
    "Is it expensive to open a new connection per request?",
    "Is it allowed to put a database on a network file system?",
    "Is it still needed to set a busy timeout in WAL mode?",
    "Is it bad practice to leave a read transaction open for hours?",
    "Is it possible to shrink the database file after deleting rows?",
    "Is it worth compiling SQLite with a larger page cache?",
    "Was it always possible to drop a column in SQLite?",
    "Isn't it risky to turn off synchronous writes?",
    "Is it cheaper to checkpoint often or rarely?",
    "Is it a problem if the application crashes mid-transaction?",
    "Is it enough to copy the database file for a backup?",
    "How do I enable WAL mode?",
    "How long does it take to vacuum a large database?",
    "How many readers can share a WAL database?",
    "What is the default page size in SQLite?",
    "What happens to readers while a checkpoint runs?",
    "What does PRAGMA journal_mode return after switching to WAL?",
    "Why is my INSERT so slow without a transaction?",
    "Why is it bad for performance when a transaction spills the cache?",
    "When should I run VACUUM?",
    "When does SQLite reuse a deleted rowid?",
    "Where does an in-memory database keep its data?",
    "Which journal mode is the default?",
    "Which pragma limits the size of the WAL file?",
    "Can I open the same in-memory database from two connections?",
    "Can two connections share a cache?",
    "Does AUTOINCREMENT prevent rowid reuse?",
    "Does it matter whether I close the database before exiting?",
    "Does WAL mode work over NFS?",
    "Should I use INTEGER PRIMARY KEY or AUTOINCREMENT?",
    "Do I need to checkpoint manually in WAL mode?",
    "Are foreign keys enforced by default?",
    "Would it help to raise the cache size for large joins?",
    "How can I back up a database that is in use?",
    "What is the largest rowid SQLite can store?",
    "How do I make an in-memory database shared between connections?",
]


def test_ordinary_questions_are_not_flagged():
    assert len(set(ORDINARY)) == 50
    assert [question for question in ORDINARY if context_dependent(question)] == []


# Openings that reply hygiene accepts as interrogative but the context check never skipped: flagging
# these now would change which cached questions are dropped and paid for again (as at 81dc982).
@pytest.mark.parametrize(
    "question",
    [
        "Haven't they fixed the crash?",
        "Whether it supports WAL mode?",
        "What's it used for?",
        "Wouldn't that break the build?",
        "Am I allowed to ship it?",
        "Cannot they share one connection?",
    ],
)
def test_the_context_check_skips_the_openings_it_always_skipped(question):
    assert context_dependent(question) is None


def test_none_of_the_bundled_questions_is_flagged():
    questions = [
        json.loads(line)["question"]
        for line in (ROOT / "data" / "handwritten_questions.jsonl").read_text().splitlines()
    ]
    index = QuestionIndex(0.7)
    near = []
    for question in questions:
        near.append(index.near(question))
        index.add(question)
    assert [q for q in questions if context_dependent(q)] == [] and not any(near)


def test_near_duplicates_by_content_words_not_by_question_words():
    index = QuestionIndex(0.7)
    index.add("How do I enable WAL mode?", "q1")
    assert index.near("How can I enable WAL mode in SQLite?") == ("q1", 0.75)
    assert index.near("How do I disable WAL mode?") is None  # another question, same shape
    assert index.near("What is the default page size?") is None
    assert "how do i enable wal mode" in index and QuestionIndex(None).near("anything") is None
    hygiene = Hygiene(drop_near_duplicates=True, near_jaccard=0.7)
    assert (
        hygiene.reason("How can I enable WAL mode in SQLite?", hygiene.index(["How do I enable WAL mode?"]))
        == "near_duplicate_question"
    )
    assert (
        Hygiene().reason("How can I enable WAL mode in SQLite?", Hygiene().index(["How do I enable WAL mode?"])) is None
    )


# --- through the generate stage (stub LLM) ------------------------------------------------------
def replies_first_context_dependent():
    """The first reply for each passage needs its passage ("According to the passage, ..."); the
    next one is self-contained."""
    asked = Counter()

    def reply(passage: str) -> str:
        asked[passage] += 1
        tag = abs(hash(passage)) % 10**8
        evidence = " ".join(passage.split()[:8])
        question = (
            f"According to the passage, what is topic {tag}?"
            if asked[passage] == 1
            else f"Where is topic {tag} explained?"
        )
        return json.dumps({"question": question, "evidence": evidence})

    return reply


def test_generated_context_dependent_questions_are_regenerated_when_asked(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(
        project,
        **{"generate.provider": "anthropic", "generate.max_questions": 6, "generate.drop_context_dependent": True},
    )
    with StubLLM() as stub:
        stub.reply = replies_first_context_dependent()
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
    golden = read_jsonl(project / "data" / "goldenset.jsonl")
    report = json.loads((project / "metrics" / "goldenset.json").read_text())
    assert len(golden) == 6 and all(context_dependent(row["question"]) is None for row in golden)
    assert report["rejected_by_reason"] == {"context_dependent": 6} and report["context_dependent_flagged"] == 0
    rejects = read_jsonl(project / "metrics" / "generate_rejects.jsonl")
    assert all(r["reason"] == "context_dependent" and r["regenerated"] for r in rejects)


def test_without_the_drop_they_are_kept_flagged_and_counted(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 6})
    with StubLLM() as stub:
        stub.reply = replies_first_context_dependent()
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
    golden = read_jsonl(project / "data" / "goldenset.jsonl")
    report = json.loads((project / "metrics" / "goldenset.json").read_text())
    assert report["context_dependent_flagged"] == 6 and all(
        row["context_dependent"] == "According to the passage" for row in golden
    )


def test_hand_written_ones_are_dropped_and_listed(tmp_path):
    project = stage_project(tmp_path / "p")
    records = [
        {"question": "How does WAL mode let readers and a writer work at once?", "doc_id": "wal.md", "evidence": "WAL"},
        {
            "question": "How can WAL mode let readers and writers work at once in SQLite?",
            "doc_id": "wal.md",
            "evidence": "WAL",
        },
        {
            "question": "According to the passage, what is an in-memory database?",
            "doc_id": "inmemorydb.md",
            "evidence": "memory",
        },
        {
            "question": "How do I open a database that lives only in RAM?",
            "doc_id": "inmemorydb.md",
            "evidence": "memory",
        },
    ]
    (project / "data" / "hw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    set_params(project, **{"generate.handwritten": "data/hw.jsonl", "generate.max_questions": 4})
    with StubLLM() as stub:
        assert run_stage_here(project, stub)[0] == 0
        report = json.loads((project / "metrics" / "goldenset.json").read_text())
        assert (
            report["n_questions"] == 4
            and report["context_dependent_flagged"] == 1
            and report["near_duplicate_flagged"] == 1
        )
        set_params(project, **{"generate.drop_context_dependent": True, "generate.drop_near_duplicates": True})
        assert run_stage_here(project, stub)[0] == 0
        assert stub.requests == []
    golden = read_jsonl(project / "data" / "goldenset.jsonl")
    assert sorted(row["question"] for row in golden) == sorted([records[0]["question"], records[3]["question"]])
    report = json.loads((project / "metrics" / "goldenset.json").read_text())
    assert report["rejected_by_reason"] == {"context_dependent": 1, "near_duplicate_question": 1}
    assert report["context_dependent_flagged"] == report["near_duplicate_flagged"] == 0
