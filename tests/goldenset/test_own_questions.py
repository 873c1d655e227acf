"""Hand-written questions on one's own documents: evidence found whatever its spacing (and anchored
to the document's own text), and a question whose evidence is not found named by file, line and
qid, with the document's nearest text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_bench.core.errors import InputError
from retrieval_bench.corpus.load import chunk_documents, load_corpus
from retrieval_bench.goldenset.assemble import located_handwritten
from retrieval_bench.goldenset.evidence import UNLOCATED_NAMED, locate_evidence

PAGE = Path(__file__).parents[1] / "corpus" / "pages" / "sql-vacuum.html"
DOCUMENT = "Dead rows left by an INSERT, even one\nthat was  rolled back, are “reclaimed” (later)."


@pytest.mark.parametrize(
    ("evidence", "found"),
    [
        ("INSERT , even", "INSERT, even"),  # copied with a space before the comma
        ("INSERT,even one that", "INSERT, even one\nthat"),
        ("one that was rolled back", "one\nthat was  rolled back"),  # runs of spaces and line breaks
        ('are "reclaimed" ( later ) .', "are “reclaimed” (later)."),  # straight quotes, spaced brackets
        ("dead ROWS left", "Dead rows left"),
    ],
)
def test_evidence_is_found_whatever_its_spacing_and_anchored_to_the_document(evidence, found):
    start, end = locate_evidence(DOCUMENT, evidence)
    assert DOCUMENT[start:end] == found


@pytest.mark.parametrize("evidence", ["INSERTeven", "an INSERT, odd one", "rolled back ,,"])
def test_words_run_together_or_other_words_are_not_found(evidence):
    assert locate_evidence(DOCUMENT, evidence) is None


def own_corpus(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "sql-vacuum.html").write_text(PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "docs" / "wal.md").write_text("WAL mode lets readers run while one writer appends to the log.\n")
    return load_corpus(tmp_path / "docs").documents


def test_a_question_whose_evidence_is_not_found_is_named(tmp_path):
    documents = own_corpus(tmp_path)
    questions = [
        {
            "qid": "ok",
            "question": "What does VACUUM do?",
            "doc_id": "sql-vacuum.html",
            "evidence": "Plain VACUUM ( without FULL ) simply reclaims space",
        },
        None,  # a blank line: line numbers are the file's own
        {
            "qid": "vac-2",
            "question": "Which lock does VACUUM FULL take?",
            "doc_id": "sql-vacuum.html",
            "evidence": "VACUUM FULL requires an exclusive lock on the table",
        },
        {"question": "How are rolled back inserts cleaned?", "doc_id": None, "evidence": "autovacuum daemon"},
    ]
    path = tmp_path / "hw.jsonl"
    path.write_text("\n".join("" if q is None else json.dumps(q) for q in questions) + "\n")
    lines: list[str] = []
    rows, counts = located_handwritten(str(path), documents, chunk_documents(documents, 400, 50), lines.append)
    assert [row["qid"] for row in rows] == ["ok"] and counts["not_located"] == 2
    text = documents.set_index("doc_id")["text"]["sql-vacuum.html"]
    assert text[rows[0]["start"] : rows[0]["end"]] == "Plain VACUUM (without FULL) simply reclaims space"
    assert lines == [
        f"{path}:3: qid vac-2: evidence 'VACUUM FULL requires an exclusive lock on the table' not found in "
        "sql-vacuum.html; nearest text (in sql-vacuum.html): 'and requires an ACCESS EXCLUSIVE lock on each table'",
        f"{path}:4: question 'How are rolled back inserts cleaned?': evidence 'autovacuum daemon' not found in any "
        "document; no word of it is in any document",
    ]


def test_only_the_first_unlocated_questions_are_named(tmp_path):
    documents = own_corpus(tmp_path)
    path = tmp_path / "hw.jsonl"
    missing = {"question": "Q?", "doc_id": "wal.md", "evidence": "no such text"}
    path.write_text("".join(json.dumps({**missing, "qid": f"q{i}"}) + "\n" for i in range(UNLOCATED_NAMED + 3)))
    lines: list[str] = []
    located_handwritten(str(path), documents, chunk_documents(documents, 400, 50), lines.append)
    assert len(lines) == UNLOCATED_NAMED + 1 and lines[0].startswith(f"{path}:1: qid q0: ")
    assert lines[-1] == "... and 3 more hand-written questions whose evidence is not found"


def test_a_hand_written_question_may_leave_doc_id_out(tmp_path):
    """generate-goldenset.md: "`doc_id` may be left out: the evidence is then looked for in every
    document" (the key absent stopped the stage: "record 1 lacks doc_id")."""
    documents = own_corpus(tmp_path)
    path = tmp_path / "hw.jsonl"
    path.write_text(json.dumps({"qid": "w", "question": "Who appends?", "evidence": "one writer appends"}) + "\n")
    rows, counts = located_handwritten(str(path), documents, chunk_documents(documents, 400, 50), lambda _: None)
    assert [(row["qid"], row["doc_id"]) for row in rows] == [("w", "wal.md")] and counts["not_located"] == 0
    path.write_text(json.dumps({"qid": "w", "question": "Who appends?"}) + "\n")  # evidence is still needed
    with pytest.raises(InputError, match=r"hw.jsonl:1: record 1 lacks evidence"):
        located_handwritten(str(path), documents, chunk_documents(documents, 400, 50), lambda _: None)


def test_evidence_that_occurs_more_than_once_is_named_and_counted(tmp_path):
    """Evidence "the" pinned the question to the first "the" of its document without a word."""
    documents = own_corpus(tmp_path)
    path = tmp_path / "hw.jsonl"
    records = [
        {"qid": "amb", "question": "Which log?", "doc_id": "wal.md", "evidence": "er"},
        {"qid": "ok", "question": "Who appends?", "doc_id": "wal.md", "evidence": "one writer appends"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    lines: list[str] = []
    rows, counts = located_handwritten(str(path), documents, chunk_documents(documents, 400, 50), lines.append)
    assert [row["qid"] for row in rows] == ["amb", "ok"] and counts["ambiguous_evidence"] == 1
    assert lines == [
        f"{path}:1: evidence 'er' occurs 2 times; the first (in wal.md) is taken: quote more of the passage to pin it"
    ]


def test_an_ambiguous_piece_without_a_doc_id_is_said_to_repeat_in_the_corpus(tmp_path):
    documents = own_corpus(tmp_path)
    path = tmp_path / "hw.jsonl"
    pieces = [{"doc_id": "wal.md", "evidence": "one writer appends"}, {"doc_id": None, "evidence": "er"}]
    path.write_text(
        json.dumps({"qid": "m", "question": "Who appends, and where?", "kind": "multi", "evidence": pieces}) + "\n"
    )
    lines: list[str] = []
    located_handwritten(str(path), documents, chunk_documents(documents, 400, 50), lines.append)
    assert len(lines) == 1 and " times in the corpus; the first (in " in lines[0], lines
