"""Bad imported and hand-written question sets (issue #41): every one is a single line naming the
file, the line (or record) and the field, and what was expected; nothing is written. Question ids
are unique across question sets; blank questions and ids that a TSV or run file would split are
refused; the near-duplicate index gives the answers of comparing every pair without doing so."""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

import pandas as pd
import pytest
from conftest import set_params
from stage_helpers import assert_one_line_error, stage_in_process
from stub_llm import read_jsonl, stage_project

from retrieval_bench.core.errors import InputError
from retrieval_bench.goldenset import beir_export as export
from retrieval_bench.goldenset.build import QuestionIndex
from retrieval_bench.goldenset.formats import read_question_set

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = "data/goldenset.jsonl"
WAL_ADVANTAGE = "WAL provides more concurrency as readers do not block writers and a writer does not block readers."


def refusal(path: Path) -> str:
    """The one line read_question_set refuses `path` with."""
    with pytest.raises(InputError) as refused:
        read_question_set(path)
    message = str(refused.value)
    assert "\n" not in message, message
    return message


def write_csv(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return path


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def handwritten(question: object = "Do readers wait for a writer?", **fields: object) -> dict:
    return {"question": question, "doc_id": "wal.md", "evidence": WAL_ADVANTAGE, **fields}


def llamaindex(tmp_path: Path, relevant: object, corpus_text: object = WAL_ADVANTAGE) -> Path:
    data = {"queries": {"q1": "Do readers wait?"}, "corpus": {"n1": corpus_text}, "relevant_docs": {"q1": relevant}}
    path = tmp_path / "qa.json"
    path.write_text(json.dumps(data))
    return path


# --- deep nesting: a line, not a RecursionError -----------------------------------------------


def test_a_ragas_csv_nested_deep_is_one_line_naming_row_and_field(tmp_path):
    nested = "[" * 60_000 + "]" * 60_000  # under csv's field limit: json.loads recursed until today
    path = write_csv(tmp_path / "deep.csv", [["user_input", "reference_contexts"], ["Does WAL block?", nested]])
    assert refusal(path) == f"{path}:2: 'reference_contexts' must be a list of texts"
    deeper = "[" * 100_000 + "]" * 100_000  # over csv's default field limit (128 KB), which is lifted
    path = write_csv(tmp_path / "deeper.csv", [["user_input", "reference_contexts"], ["Does WAL block?", deeper]])
    assert refusal(path) == f"{path}:2: 'reference_contexts' must be a list of texts"


def test_a_ragas_csv_with_a_stray_quote_or_an_extra_cell_is_one_line_not_a_lost_question(tmp_path):
    """csv's lenient mode let a quote never closed run to the end of the file (the next questions
    swallowed into one answer, exit 0), and DictReader put a cell beyond the header under None."""
    context = json.dumps([WAL_ADVANTAGE])
    cell = '"' + context.replace('"', '""') + '"'  # as a CSV writer quotes it
    head = "user_input,reference_contexts,reference\n"
    stray = tmp_path / "stray.csv"
    stray.write_text(
        head + f"Does WAL block?,{cell},yes\n"
        f'What about disks?,{cell},"12 inch disks, mostly\n'
        f"Do readers wait?,{cell},no\n"
    )
    assert (
        refusal(stray)
        == f"{stray}:3: a quote in this row breaks its fields (',' expected after '\"'): a stray quote? Inside a field "
        "write a quote twice, and quote that field"
    )
    extra = tmp_path / "extra.csv"
    extra.write_text(head + f"Does WAL block?,{cell},yes, mostly\n")
    assert (
        refusal(extra) == f"{extra}:2: 4 fields where the header names 3: an unquoted comma in a text? Quote the field"
    )
    short = write_csv(
        tmp_path / "short.csv", [["user_input", "reference_contexts", "reference"], ["Does WAL block?", context]]
    )
    assert [r["evidence"] for r in read_question_set(short)[1]] == [[WAL_ADVANTAGE]]  # a missing last cell: as before


def test_a_ragas_csv_context_over_128_kb_is_read(tmp_path):
    """A valid context longer than the csv module's default field limit was refused as no CSV row."""
    context = "WAL mode lets readers proceed while a writer appends. " * 3_000  # 162 KB
    rows = [["user_input", "reference_contexts"], ["Does WAL block readers?", json.dumps([context])]]
    kind, records = read_question_set(write_csv(tmp_path / "long.csv", rows))
    assert kind == "ragas" and records[0]["evidence"] == [context]


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_a_json_question_set_nested_deep_is_one_line_naming_its_line(tmp_path, name):
    path = tmp_path / name
    first = json.dumps(handwritten()) + "\n" if name.endswith("l") else ""
    path.write_text(first + '{"question": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    line = 2 if first else 1
    assert refusal(path) == (
        f"{path}:{line}: JSON nested 100001 levels deep, deeper than Python's JSON parser reads "
        "(a question set or a table row is a few levels deep)"
    )


# --- LlamaIndex and hand-written fields of the wrong kind ------------------------------------


@pytest.mark.parametrize(
    ("relevant", "corpus_text", "expected"),
    [
        (7, WAL_ADVANTAGE, "relevant_docs['q1'] must be a list of node ids of corpus, got 7"),
        ("n1", WAL_ADVANTAGE, "relevant_docs['q1'] must be a list of node ids of corpus, got 'n1'"),
        (["n1"], 42, "corpus['n1'] must be the node's text, got the number 42"),
    ],
)
def test_llamaindex_fields_of_the_wrong_kind_are_one_line(tmp_path, relevant, corpus_text, expected):
    path = llamaindex(tmp_path, relevant, corpus_text)
    assert refusal(path) == f"{path}: {expected}"


@pytest.mark.parametrize(("doc_id", "got"), [(["wal.md"], "a list"), ({"id": "wal.md"}, "a dict")])
def test_a_handwritten_doc_id_that_is_not_an_id_is_one_line(tmp_path, doc_id, got):
    path = write_jsonl(tmp_path / "mine.jsonl", [handwritten(), handwritten("Is WAL faster?", doc_id=doc_id)])
    assert refusal(path) == f"{path}:2: 'doc_id' must be a non-empty string (or an integer), got {got}"


@pytest.mark.parametrize(("name", "content"), [("e.jsonl", ""), ("e.csv", "\n"), ("e.json", "  \n\n")])
def test_an_empty_file_is_said_to_be_empty(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    assert refusal(path) == f"{path}: empty; a question set holds at least one question"


# --- questions that are not questions ---------------------------------------------------------


@pytest.mark.parametrize(("value", "got"), [(None, "null"), (42, "the number 42"), ({"text": "q?"}, "a dict")])
def test_a_ragas_user_input_that_is_not_a_text_is_refused(tmp_path, value, got):
    path = write_jsonl(tmp_path / "ragas.jsonl", [{"user_input": value, "reference_contexts": [WAL_ADVANTAGE]}])
    assert refusal(path) == f"{path}:1: 'user_input' must be the question, a non-blank text; got {got}"


def test_blank_questions_are_refused_in_every_format(tmp_path):
    path = write_jsonl(tmp_path / "mine.jsonl", [handwritten(), handwritten("  ")])
    assert refusal(path) == f"{path}:2: 'question' must be the question, a non-blank text; got an empty text"
    path = write_jsonl(tmp_path / "mine.jsonl", [handwritten("")])
    assert refusal(path).startswith(f"{path}:1: 'question' must be the question")
    path = tmp_path / "goldens.json"
    path.write_text(json.dumps([{"input": "", "context": [WAL_ADVANTAGE]}]))
    assert refusal(path) == f"{path}: golden 1: 'input' must be the question, a non-blank text; got an empty text"
    path = write_csv(tmp_path / "t.csv", [["user_input", "reference_contexts"], ["", json.dumps([WAL_ADVANTAGE])]])
    assert refusal(path).startswith(f"{path}:2: 'user_input' must be the question")
    path = tmp_path / "qa.json"
    path.write_text(json.dumps({"queries": {"q1": " "}, "corpus": {}, "relevant_docs": {}}))
    assert refusal(path).startswith(f"{path}: queries['q1']: 'question' must be the question")
    # zero-width and no-break spaces, a word joiner, a byte-order mark: blank to a reader, kept by strip()
    path = write_jsonl(tmp_path / "mine.jsonl", [handwritten("\u200b\u00a0 \u2060\ufeff")])
    assert refusal(path) == (
        f"{path}:1: 'question' must be the question, a non-blank text; got only invisible characters "
        r"'\u200b\xa0 \u2060\ufeff'"
    )


# --- question ids -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("qid", "shown"), [("a\tb", "'a\\tb'"), ("a\nb", "'a\\nb'"), ("", "''"), (" q1", "' q1'"), (["q1"], "['q1']")]
)
def test_a_qid_a_tsv_or_run_file_would_split_is_refused_stating_the_form(tmp_path, qid, shown):
    path = write_jsonl(tmp_path / "mine.jsonl", [handwritten(qid=qid)])
    assert refusal(path) == (
        f"{path}:1: 'qid' must be a non-empty text (or a whole number) of printable characters: no tab, line break "
        f"or other control character, no leading or trailing space; got {shown}"
    )


def test_a_qid_may_hold_spaces_and_be_a_number(tmp_path):
    path = write_jsonl(tmp_path / "mine.jsonl", [handwritten(qid="faq 1"), handwritten("Is WAL faster?", qid=2)])
    assert [question["qid"] for question in read_question_set(path)[1]] == ["faq 1", "2"]


def test_two_different_questions_with_one_qid_name_both_lines(tmp_path):
    path = write_jsonl(tmp_path / "mine.jsonl", [handwritten(qid="t1"), handwritten("Is WAL faster?", qid="t1")])
    assert refusal(path) == (
        f"{path}:2: qid 't1' is also that of {path}:1, a different question; give each question its own qid"
    )
    path = write_csv(
        tmp_path / "t.csv",
        [["qid", "user_input", "reference_contexts"]]
        + [["r1", question, json.dumps([WAL_ADVANTAGE])] for question in ("Does WAL block?", "Is WAL fast?")],
    )
    assert (
        refusal(path)
        == f"{path}:3: qid 'r1' is also that of {path}:2, a different question; give each question its own qid"
    )
    # The same question again (case and end punctuation aside) is a repeat, dropped and counted later.
    path = write_jsonl(
        tmp_path / "mine.jsonl", [handwritten(qid="t1"), handwritten("do readers wait for a writer", qid="t1")]
    )
    assert len(read_question_set(path)[1]) == 2


# --- the stage: one line, exit 1, no golden set -----------------------------------------------


@pytest.fixture
def project(tmp_path):
    project = stage_project(tmp_path / "p")
    (project / "data" / "sample_texts").mkdir()
    sample = ROOT / "data" / "sample" / "sqlite"
    for name in ("wal.md", "autoinc.md"):
        (project / "data" / "sample_texts" / name).write_text((sample / name).read_text())
    return project


def test_a_handwritten_qid_colliding_with_an_imported_one_names_both(project, monkeypatch, capsys):
    write_jsonl(project / "data" / "mine.jsonl", [handwritten(qid="setx:1")])
    write_jsonl(project / "data" / "setx.jsonl", [handwritten("Is a writer blocked by readers in WAL mode?", qid="1")])
    set_params(
        project,
        **{"generate.handwritten": "data/mine.jsonl", "generate.imported": {"setx": "data/setx.jsonl"}},
    )
    result = stage_in_process("generate_goldenset", project, monkeypatch, capsys)
    assert_one_line_error(
        result,
        "qid 'setx:1' names two questions: data/mine.jsonl (generate.handwritten) qid 'setx:1' and "
        "data/setx.jsonl (generate.imported.setx) qid '1'; qids must be unique across question sets",
    )
    assert not (project / GOLDEN).exists()
    write_jsonl(project / "data" / "setx.jsonl", [handwritten("Is a writer blocked by readers in WAL mode?", qid="2")])
    assert stage_in_process("generate_goldenset", project, monkeypatch, capsys).returncode == 0
    assert sorted(row["qid"] for row in read_jsonl(project / GOLDEN)) == ["setx:1", "setx:2"]


def test_the_stage_names_the_imported_key_file_line_and_field(project, monkeypatch, capsys):
    (project / "data" / "empty.csv").write_text("")
    write_jsonl(project / "data" / "bad.jsonl", [handwritten(), handwritten("Is WAL fast?", doc_id=["wal.md"])])
    for file, expected in (
        (
            "data/empty.csv",
            "error: generate.imported.x: data/empty.csv: empty; a question set holds at least one question",
        ),
        ("data/bad.jsonl", "error: generate.imported.x: data/bad.jsonl:2: 'doc_id' must be a non-empty string"),
    ):
        set_params(project, **{"generate.imported": {"x": file}})
        result = stage_in_process("generate_goldenset", project, monkeypatch, capsys)
        assert_one_line_error(result, expected)
        assert not (project / GOLDEN).exists()


# --- export-beir given a hand-written file ----------------------------------------------------


def test_export_beir_given_a_handwritten_file_says_what_it_expects(tmp_path):
    pd.DataFrame(
        {"chunk_id": ["wal.md:0-9"], "doc_id": ["wal.md"], "start": [0], "end": [9], "text": ["WAL mode."]}
    ).to_parquet(tmp_path / "chunks.parquet")
    path = write_jsonl(tmp_path / "mine.jsonl", [handwritten()])
    args = argparse.Namespace(
        out=str(tmp_path / "beir"), chunks=str(tmp_path / "chunks.parquet"), goldenset=str(path), min_coverage=0.5
    )
    with pytest.raises(InputError) as refused:
        export.run(args)
    assert str(refused.value) == (
        f"{path}:1: a hand-written question (question, doc_id, evidence); export-beir --goldenset expects a golden "
        "set as generate_goldenset writes it (data/goldenset.jsonl: qid, question, and relevant or doc_id/start/end): "
        "name hand-written questions in generate.handwritten and run `dvc repro generate_goldenset`"
    )
    assert not (tmp_path / "beir").exists()


# --- near duplicates: the filtered index answers as comparing every pair does ----------------


def test_the_near_duplicate_index_answers_as_comparing_every_pair():
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(40)]
    common = ["sqlite", "databas"]  # in most questions, as a corpus's own name is
    sets = [
        frozenset(rng.sample(vocabulary, rng.randint(0, 6)) + rng.sample(common, rng.randint(0, 2))) for _ in range(600)
    ]
    for threshold in (0.0, 0.5, 0.7, 1.0):
        index = QuestionIndex(threshold, {word: sum(word in s for s in sets) for word in vocabulary + common})
        for number, words in enumerate(sets):
            expected = None
            for earlier in range(number):
                other = sets[earlier]
                if words & other:
                    similarity = len(words & other) / len(words | other)
                    if similarity >= threshold and (expected is None or similarity > expected[1]):
                        expected = (str(earlier), round(similarity, 4))
            assert index.near(f"q{number}", words) == expected, (threshold, number)
            index.add(f"q{number}", str(number), words)
