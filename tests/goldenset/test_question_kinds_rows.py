"""Golden rows of every kind from the formats that carry them: hand-written multi-evidence and
unanswerable questions, ragas multi-hop samples and DeepEval goldens with several contexts,
Giskard out-of-scope rows; each piece located like a hand-written excerpt, a piece not found named
by file, line and qid, bad kinds one line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.relevance import judge
from retrieval_bench.corpus.load import chunk_documents
from retrieval_bench.goldenset.beir_export import export_beir, read_golden
from retrieval_bench.goldenset.build import evidence_records, evidence_texts, handwritten_rows, read_handwritten
from retrieval_bench.goldenset.formats import read_question_set

WAL = "WAL mode lets readers run while one writer appends to the log. Checkpoints copy the log back."
VACUUM = "VACUUM rebuilds the database file. It needs as much free disk space as the database itself."
DOCUMENTS = pd.DataFrame({"doc_id": ["vacuum.md", "wal.md"], "text": [VACUUM, WAL]})
PASSAGES = chunk_documents(DOCUMENTS, 40, 0)


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def rows_of(path: Path, unlocated: list[str] | None = None):
    return handwritten_rows(read_handwritten(path), DOCUMENTS, PASSAGES, unlocated)


def test_hand_written_multi_and_unanswerable_rows_follow_the_schema(tmp_path):
    path = write_jsonl(
        tmp_path / "hw.jsonl",
        [
            {"question": "Does VACUUM block WAL readers?", "doc_id": "wal.md", "evidence": "readers run"},
            {
                "question": "How much disk does VACUUM need, and what do checkpoints copy?",
                "kind": "multi",
                "evidence": [
                    {"doc_id": "vacuum.md", "evidence": "as much free disk space as the database itself"},
                    {"evidence": "Checkpoints copy the log back"},  # no doc_id: any document
                ],
            },
            {
                "question": "Can VACUUM run on a remote server?",
                "kind": "unanswerable",
                "doc_id": "vacuum.md",
                "why": "x",
            },
            {"question": "Does SQLite support stored procedures?", "kind": "unanswerable"},
        ],
    )
    rows, counts = rows_of(path)
    assert counts == {"other_corpus": 0, "not_located": 0, "ambiguous_evidence": 0}
    single, multi, near, nowhere = rows
    assert single["kind"] == "single" and "evidence_spans" not in single
    assert multi["kind"] == "multi"
    first, second = multi["evidence_spans"]
    assert VACUUM[first["start"] : first["end"]] == "as much free disk space as the database itself"
    assert second["doc_id"] == "wal.md" and WAL[second["start"] : second["end"]] == "Checkpoints copy the log back"
    assert (multi["doc_id"], multi["start"], multi["end"]) == (first["doc_id"], first["start"], first["end"])
    assert multi["gold_chunk_id"] is not None and multi["chunk_sha256"] is not None  # the first piece's passage
    for row in (near, nowhere):
        assert row["kind"] == "unanswerable" and row["evidence_spans"] == []
        assert all(row[key] is None for key in ("gold_chunk_id", "doc_id", "start", "end"))
    assert near["near_doc_id"] == "vacuum.md" and near["why"] == "x" and "near_doc_id" not in nowhere
    assert evidence_texts(rows, dict(zip(DOCUMENTS["doc_id"], DOCUMENTS["text"])))[1:] == [
        ["as much free disk space as the database itself", "Checkpoints copy the log back"],
        [],
        [],
    ]
    judgements = judge(rows, pd.DataFrame(PASSAGES), 0.5)
    assert len(judgements[1].pieces) == 2 and not judgements[2].answerable


def test_a_multi_piece_not_found_names_the_file_line_qid_and_piece(tmp_path):
    path = write_jsonl(
        tmp_path / "hw.jsonl",
        [
            {
                "qid": "m-1",
                "question": "What do checkpoints and VACUUM do?",
                "kind": "multi",
                "evidence": [
                    {"doc_id": "wal.md", "evidence": "Checkpoints copy the log back"},
                    {"doc_id": "vacuum.md", "evidence": "VACUUM shrinks the log"},
                ],
            }
        ],
    )
    unlocated: list[str] = []
    rows, counts = rows_of(path, unlocated)
    assert rows == [] and counts["not_located"] == 1
    assert unlocated[0].startswith(f"{path}:1: qid m-1: evidence 'VACUUM shrinks the log' not found in vacuum.md")


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (
            {"question": "q?", "kind": "several", "doc_id": "wal.md", "evidence": "x"},
            "'kind' must be one of single, multi, unanswerable, keyword",
        ),
        (
            {"question": "q?", "kind": "multi", "evidence": [{"evidence": "x"}]},
            'a multi question\'s \'evidence\' must be a list of 2 to 8 {"doc_id": ..., "evidence": "excerpt"} pieces, got 1 piece',
        ),
        (
            {"question": "q?", "evidence": [{"evidence": "x"}, {"evidence": "y"}]},
            '\'evidence\' must be a text of the document, got a list (several pieces of evidence: add "kind": "multi")',
        ),
        (
            {"question": "q?", "kind": "multi", "evidence": [{"evidence": "a b"}, {"evidence": " a  b"}]},
            "evidence piece 2 repeats an earlier one: a multi question needs distinct pieces",
        ),
        ({"question": "q?", "kind": "multi", "evidence": "x"}, "a multi question's 'evidence' must be a list of 2"),
        (
            {"question": "q?", "kind": "multi", "evidence": [{"evidence": f"x{i}"} for i in range(9)]},
            'a multi question\'s \'evidence\' must be a list of 2 to 8 {"doc_id": ..., "evidence": "excerpt"} pieces, got 9 pieces',
        ),
        (
            {"question": "q?", "kind": "multi", "evidence": [{"evidence": "x"}, {"doc_id": "a"}]},
            "evidence piece 2 must be",
        ),
        ({"question": "q?", "kind": "unanswerable", "evidence": "x"}, "an unanswerable question has no 'evidence'"),
    ],
)
def test_a_bad_kind_or_evidence_shape_is_one_line_naming_the_line(tmp_path, record, expected):
    path = write_jsonl(tmp_path / "hw.jsonl", [{"question": "fine?", "doc_id": "wal.md", "evidence": "x"}, record])
    with pytest.raises(InputError) as caught:
        read_handwritten(path)
    assert str(caught.value).startswith(f"{path}:2: ") and expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_ragas_multi_hop_and_deepeval_multi_context_questions_are_multi(tmp_path):
    ragas = write_jsonl(
        tmp_path / "ragas.jsonl",
        [
            {
                "user_input": "What does WAL let readers do, and what does VACUUM need?",
                "reference_contexts": ["lets readers run while one writer appends", "It needs as much free disk space"],
                "synthesizer_name": "multi_hop_specific_query_synthesizer",
            },
            {"user_input": "What copies the log back?", "reference_contexts": ["Checkpoints copy the log back"]},
        ],
    )
    deepeval = tmp_path / "goldens.json"
    deepeval.write_text(
        json.dumps([{"input": "WAL and VACUUM?", "context": ["one writer appends", "rebuilds the database file"]}])
    )
    for path, n_multi in ((ragas, 1), (deepeval, 1)):
        kind, questions = read_question_set(path)
        rows, counts = handwritten_rows(evidence_records(kind, questions), DOCUMENTS, PASSAGES)
        assert counts["not_located"] == 0
        assert sum(row.get("kind") == "multi" for row in rows) == n_multi
        multi = next(row for row in rows if row["kind"] == "multi")
        assert [span["doc_id"] for span in multi["evidence_spans"]] == ["wal.md", "vacuum.md"]


def test_giskard_out_of_scope_rows_are_unanswerable_and_the_others_anchored_to_their_seed(tmp_path):
    path = write_jsonl(
        tmp_path / "giskard.jsonl",
        [
            {
                "id": "6f1c",
                "question": "What do checkpoints copy?",
                "reference_answer": "The log.",
                "reference_context": "Document 3: Checkpoints copy the log back.\n\nDocument 7: VACUUM rebuilds the database file.",
                "conversation_history": [],
                "metadata": {"question_type": "simple", "seed_document_id": 3},
            },
            {
                "id": "9a2e",
                "question": "How long does a checkpoint take on a 1 TB database?",
                "reference_answer": "This question can not be answered by the context.",
                "reference_context": "Document 3: Checkpoints copy the log back.",
                "conversation_history": [],
                "metadata": {"question_type": "out of scope", "seed_document_id": 3, "fake_fact": "x"},
            },
        ],
    )
    kind, questions = read_question_set(path)
    assert kind == "giskard"
    rows, counts = handwritten_rows(evidence_records(kind, questions), DOCUMENTS, PASSAGES)
    simple, out_of_scope = rows
    assert (simple["kind"], simple["qid"], simple["doc_id"], simple["source"]) == (
        "single",
        "6f1c",
        "wal.md",
        "giskard",
    )
    assert WAL[simple["start"] : simple["end"]] == "Checkpoints copy the log back."
    assert out_of_scope["kind"] == "unanswerable" and out_of_scope["qid"] == "9a2e"
    assert out_of_scope["metadata"]["question_type"] == "out of scope"


def test_export_beir_leaves_unanswerable_questions_out_and_joins_a_multi_question_s_pieces(tmp_path):
    path = write_jsonl(
        tmp_path / "hw.jsonl",
        [
            {
                "qid": "m",
                "question": "What does VACUUM need and what do checkpoints copy?",
                "kind": "multi",
                "evidence": [
                    {"doc_id": "vacuum.md", "evidence": "as much free disk space"},
                    {"doc_id": "wal.md", "evidence": "Checkpoints copy the log back"},
                ],
            },
            {"qid": "u", "question": "Does SQLite have stored procedures?", "kind": "unanswerable"},
        ],
    )
    rows, _ = rows_of(path)
    golden = write_jsonl(tmp_path / "golden.jsonl", rows)
    written = export_beir(pd.DataFrame(PASSAGES), read_golden(golden), tmp_path / "beir", 0.5)
    assert written == 1
    qrels = (tmp_path / "beir" / "qrels" / "test.tsv").read_text().splitlines()[1:]
    documents = {PASSAGES.set_index("chunk_id").loc[line.split("\t")[1], "doc_id"] for line in qrels}
    assert documents == {"vacuum.md", "wal.md"}


def test_a_golden_set_starting_with_an_unanswerable_row_is_read_as_a_golden_set(tmp_path):
    """Every golden row has a kind; an unanswerable one has no evidence: it is still this project's
    golden set (qid, question, start), not hand-written questions (`retrieval-bench gauge` failed)."""
    from retrieval_bench.goldenset.build import unanswerable_row
    from retrieval_bench.goldenset.formats import detect_format

    path = write_jsonl(
        tmp_path / "goldenset.jsonl", [unanswerable_row("Does SQLite ship a GUI?", "wal.md", "hand-written")]
    )
    assert detect_format(path) == "goldenset"
    hand_written = write_jsonl(tmp_path / "hw.jsonl", [{"question": "Does it?", "kind": "unanswerable"}])
    assert detect_format(hand_written) == "handwritten"


def test_a_doc_id_in_the_other_unicode_form_is_found_and_one_not_in_the_corpus_is_named(tmp_path):
    """A file name copied from macOS is decomposed (NFD), typed it is composed (NFC): the question
    was skipped as "for a document not in this corpus", and no skipped doc_id was ever named."""
    import unicodedata

    decomposed = unicodedata.normalize("NFD", "café.md")
    documents = pd.DataFrame({"doc_id": [decomposed], "text": ["The café opens at seven and closes at noon."]})
    passages = chunk_documents(documents, 200, 0)
    path = write_jsonl(
        tmp_path / "hw.jsonl",
        [
            {"question": "When does the café open?", "doc_id": "café.md", "evidence": "opens at seven"},
            {"question": "When does it close?", "doc_id": "CAFÉ.md", "evidence": "closes at noon"},
        ],
    )
    unlocated: list[str] = []
    rows, counts = handwritten_rows(read_handwritten(path), documents, passages, unlocated)
    assert [row["doc_id"] for row in rows] == [decomposed] and counts["other_corpus"] == 1
    assert unlocated == [
        f"{path}:2: doc_id 'CAFÉ.md' is not a document id of this corpus (did you mean '{decomposed}'?)"
    ]


def test_export_beir_refuses_an_id_a_tab_separated_qrels_file_cannot_hold(tmp_path):
    passages = PASSAGES.assign(chunk_id=PASSAGES["chunk_id"].str.replace(":", "\t", n=1))
    golden = [{"qid": "q1", "question": "What is WAL?", "relevant": {passages["chunk_id"][0]: 1}}]
    with pytest.raises(InputError, match="holds a tab or a line break"):
        export_beir(passages, golden, tmp_path / "beir", 0.5)
    assert not (tmp_path / "beir").exists()
