"""Loaders: documents, ready chunks in three formats, BEIR folders and plain qrels, bad input."""

import json

import pandas as pd
import pytest

from retrieval_bench.core.errors import InputError
from retrieval_bench.corpus.load import LoadSettings, load_corpus, read_beir_corpus, read_qrels


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


CHUNKS = [{"cid": "a", "body": "Alpha text."}, {"cid": "b", "body": "Beta text."}, {"cid": "c", "body": "  "}]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_ready_chunks_in_every_format(tmp_path, fmt):
    path = tmp_path / f"chunks.{fmt}"
    if fmt == "jsonl":
        write_jsonl(path, CHUNKS)
    elif fmt == "parquet":
        pd.DataFrame(CHUNKS).to_parquet(path)
    else:
        pd.DataFrame(CHUNKS).to_csv(path, index=False)
    corpus = load_corpus(path, LoadSettings(id_field="cid", text_field="body"))
    assert corpus.chunks["chunk_id"].tolist() == ["a", "b"]
    assert corpus.chunks["doc_id"].tolist() == ["a", "b"]  # a ready chunk is its own document
    assert corpus.chunks[["start", "end"]].values.tolist() == [[0, 11], [0, 10]]
    assert "dropped 1 empty texts (c)" in corpus.notes  # named: a judgement of it is "empty", not "missing"
    assert corpus.labels == []


def test_documents_folder_is_chunked_with_offsets(tmp_path):
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    text = "First paragraph here.\n\n" + "Second paragraph is longer than the first one. " * 5
    (tmp_path / "docs" / "one.md").write_text(text)
    (tmp_path / "docs" / "sub" / "two.txt").write_text("Short doc.")
    (tmp_path / "docs" / "ignored.pdf").write_bytes(b"%PDF-1.4")
    corpus = load_corpus(tmp_path / "docs", chunk_chars=100, chunk_overlap=20)
    assert corpus.documents["doc_id"].tolist() == ["one.md", "sub/two.txt"]
    for row in corpus.chunks.itertuples():
        document = corpus.documents.set_index("doc_id").loc[row.doc_id, "text"]
        assert document[row.start : row.end] == row.text
        assert row.chunk_id == f"{row.doc_id}:{row.start}-{row.end}"
    assert load_corpus(tmp_path / "docs", chunk_chars=100, chunk_overlap=20).chunks.equals(corpus.chunks)


def test_duplicate_texts_are_reported_and_duplicate_ids_refused(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "1", "text": "same"}, {"id": "2", "text": "same"}])
    assert "1 chunks repeat the text of an earlier chunk" in load_corpus(path).notes
    write_jsonl(path, [{"id": "1", "text": "x"}, {"id": "1", "text": "y"}])
    with pytest.raises(InputError, match=r"2 rows share 1 id: '1' \(2 times\); every chunk_id must be unique"):
        load_corpus(path)


@pytest.mark.parametrize(
    "setup,message",
    [
        (lambda p: p / "missing", r"load.source .*missing: no such file or folder"),
        (lambda p: (p / "empty").mkdir() or p / "empty", r"empty: no \.md, \.txt, \.html, \.htm documents found$"),
        (
            lambda p: (p / "bad.jsonl").write_text('{"id": "1", "text": "ok"}\n{"id": 2,\n') and p / "bad.jsonl",
            r"bad\.jsonl:2: invalid JSON",
        ),
        (
            lambda p: write_jsonl(p / "f.jsonl", [{"id": "1", "body": "x"}]),
            r"record 1 has no field 'text'; fields found: id, body",
        ),
        (
            lambda p: pd.DataFrame({"id": ["1"], "body": ["x"]}).to_csv(p / "f.csv", index=False) or p / "f.csv",
            r"no column 'text'; columns found: id, body",
        ),
        (lambda p: write_jsonl(p / "f.jsonl", [{"id": "1", "text": " "}]), r"every text is empty"),
        (lambda p: (p / "f.xml").write_text("<x/>") and p / "f.xml", r"expected a folder or a"),
    ],
)
def test_bad_sources_give_one_line_errors(tmp_path, setup, message):
    with pytest.raises(InputError, match=message) as error:
        load_corpus(setup(tmp_path))
    assert "\n" not in str(error.value)


def make_beir(folder, qrels_lines):
    folder.mkdir()
    write_jsonl(
        folder / "corpus.jsonl",
        [
            {"_id": "d1", "title": "Aspirin", "text": "Aspirin thins blood."},
            {"_id": "d2", "title": "", "text": "Coffee wakes you up."},
            {"_id": "d3", "title": "Sleep", "text": "Sleep matters."},
        ],
    )
    write_jsonl(
        folder / "queries.jsonl",
        [
            {"_id": "q1", "text": "does aspirin thin blood"},
            {"_id": "q2", "text": "coffee"},
            {"_id": "q3", "text": "unjudged"},
        ],
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(line + "\n" for line in qrels_lines)
    )
    return folder


def test_beir_folder_gives_graded_multi_relevant_labels(tmp_path):
    folder = make_beir(tmp_path / "beir", ["q1\td1\t2", "q1\td3\t1", "q1\td2\t0", "q2\td2\t1"])
    corpus = load_corpus(folder)
    assert corpus.chunks.set_index("chunk_id").loc["d1", "text"] == "Aspirin Aspirin thins blood."  # title + text
    assert corpus.documents.set_index("doc_id").loc["d1", "text"] == "Aspirin Aspirin thins blood."
    assert corpus.documents.set_index("doc_id").loc["d2", "text"] == "Coffee wakes you up."  # empty title
    assert corpus.labels == [
        {
            "qid": "q1",
            "question": "does aspirin thin blood",
            "relevant": {"d1": 2, "d3": 1, "d2": 0},
            "relevant_spans": [["d1", 0, 28, 2], ["d3", 0, 20, 1], ["d2", 0, 20, 0]],  # each chunk its own document
        },
        {"qid": "q2", "question": "coffee", "relevant": {"d2": 1}, "relevant_spans": [["d2", 0, 20, 1]]},
    ]


def test_relevant_ids_missing_from_corpus_error_or_drop(tmp_path):
    folder = make_beir(tmp_path / "beir", ["q1\td1\t1", "q1\tgone\t1", "q2\tgone2\t1"])
    with pytest.raises(
        InputError,
        match=r"2 queries judge chunk ids that are not in the corpus, or whose text is empty \(q1 -> gone; q2 -> gone2\)",
    ):
        load_corpus(folder)
    corpus = load_corpus(folder, LoadSettings(missing_relevant="drop"))
    assert [label["qid"] for label in corpus.labels] == ["q1"]
    assert any("dropped 1 queries with no relevant chunk" in note for note in corpus.notes)


def test_plain_qrels_next_to_ready_chunks(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    write_jsonl(folder / "chunks.jsonl", [{"id": "c1", "text": "one"}, {"id": "c2", "text": "two"}])
    (folder / "queries.tsv").write_text("u1\twhich is one\nu2\twhich is two\n")
    (folder / "qrels.tsv").write_text("u1 0 c1 1\nu2 0 c2 3\n")  # TREC's four columns
    corpus = load_corpus(folder)
    assert corpus.labels == [
        {"qid": "u1", "question": "which is one", "relevant": {"c1": 1}, "relevant_spans": [["c1", 0, 3, 1]]},
        {"qid": "u2", "question": "which is two", "relevant": {"c2": 3}, "relevant_spans": [["c2", 0, 3, 3]]},
    ]


def test_qrels_errors_name_file_and_line(tmp_path):
    path = tmp_path / "qrels.tsv"
    path.write_text("q1\tc1\t1\nq2\tc2\tvery\n")
    with pytest.raises(InputError, match=r"qrels.tsv:2: grade must be an integer of at most 9 digits, got 'very'"):
        read_qrels(path)
    path.write_text("q1 c1\n")
    with pytest.raises(InputError, match=r"qrels.tsv:1: expected"):
        read_qrels(path)


def test_ids_with_spaces_and_quoted_queries_survive(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    write_jsonl(folder / "chunks.jsonl", [{"id": "my notes.md:0-9", "text": "some text"}, {"id": "b", "text": "other"}])
    (folder / "queries.tsv").write_text('q 1\t"NULL" versus empty string\n')
    (folder / "qrels.tsv").write_text("q 1\tmy notes.md:0-9\t2\n")
    assert load_corpus(folder).labels == [
        {
            "qid": "q 1",
            "question": '"NULL" versus empty string',
            "relevant": {"my notes.md:0-9": 2},
            "relevant_spans": [["my notes.md:0-9", 0, 9, 2]],
        }
    ]


def test_encodings_byte_order_mark_accepted_latin1_refused(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "1", "text": "caf\xc3\xa9"}\n')
    assert load_corpus(path).chunks["text"].tolist() == ["café"]
    path.write_bytes(b'{"id": "1", "text": "ok"}\n{"id": "2", "text": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"c.jsonl:2: not UTF-8 text"):
        load_corpus(path)


# Ready chunks that name their document and offsets (as a vector store's metadata does): the
# documents are rebuilt from them and the chunks keep their place, in every format.
DOCUMENT = "SQLite is small.\n\nIt keeps one file. Readers do not block writers."
SPANS = [(0, 16), (18, 36), (27, 66)]  # the last two overlap on "one file."


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_ready_chunks_with_documents_and_offsets_rebuild_the_documents(tmp_path, fmt):
    rows = [
        {"cid": f"c{i}", "text": DOCUMENT[s:e], "doc_id": "a.md", "start": s, "end": e}
        for i, (s, e) in enumerate(SPANS)
    ]
    rows.insert(0, {"cid": "solo", "text": "Alone.", "doc_id": "b.md", "start": 3, "end": 9})
    path = tmp_path / f"chunks.{fmt}"
    write_jsonl(path, rows) if fmt == "jsonl" else getattr(pd.DataFrame(rows), f"to_{fmt}")(path, index=False)
    corpus = load_corpus(path, LoadSettings(id_field="cid"))
    assert corpus.documents.values.tolist() == [
        ["a.md", DOCUMENT],
        ["b.md", "\n\n\nAlone."],
    ]  # uncovered characters read as line breaks
    assert corpus.chunks[["chunk_id", "doc_id", "start", "end"]].values.tolist() == [
        ["c0", "a.md", 0, 16],
        ["c1", "a.md", 18, 36],
        ["c2", "a.md", 27, 66],
        ["solo", "b.md", 3, 9],
    ]


def test_ready_chunks_without_offsets_follow_each_other_in_their_document(tmp_path):
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [{"id": "x2", "text": "Second.", "doc_id": "d"}, {"id": "x1", "text": "First.", "doc_id": "d"}],
    )
    corpus = load_corpus(path)
    assert corpus.documents.values.tolist() == [["d", "Second.\n\nFirst."]]
    assert corpus.chunks[["chunk_id", "start", "end"]].values.tolist() == [["x2", 0, 7], ["x1", 9, 15]]


@pytest.mark.parametrize(
    "change,message",
    [
        (
            {"text": "It keeps ONE file."},
            r"chunk c2 of document a\.md disagrees with an overlapping chunk before it \(last: c1\)",
        ),
        ({"end": 40}, r"chunk c1: start 18 and end 40 span 22 characters but its text has 18"),
        ({"start": -1}, r"chunk c1: 'start' must be a character offset \(an integer >= 0\), got the number -1"),
        ({"doc_id": None}, r"chunk c1 has no 'doc_id' while other chunks have one"),
    ],
)
def test_inconsistent_documents_or_offsets_are_one_line_errors(tmp_path, change, message):
    rows = [
        {"id": f"c{i}", "text": DOCUMENT[s:e], "doc_id": "a.md", "start": s, "end": e} for i, (s, e) in enumerate(SPANS)
    ]
    rows[1].update(change)
    with pytest.raises(InputError, match=message) as error:
        load_corpus(write_jsonl(tmp_path / "c.jsonl", rows))
    assert "\n" not in str(error.value)


def test_a_bad_record_is_named_by_its_line_where_blank_lines_come_first(tmp_path):
    """Record n is line n of a JSONL file: blank lines are counted, ready chunks and BEIR alike."""
    chunks = tmp_path / "chunks.jsonl"
    chunks.write_text('\n{"id": "1", "text": "ok"}\n\n{"id": 2.5, "text": "x"}\n')
    with pytest.raises(InputError, match=r"chunks\.jsonl: record 4\b"):
        load_corpus(chunks)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "ok"}\n\n{"_id": "d2", "text": 7}\n')
    with pytest.raises(InputError, match=r"corpus\.jsonl: record 3\b"):
        read_beir_corpus(corpus)


def test_a_judged_query_with_a_blank_text_is_refused_not_scored(tmp_path):
    """A blank query text was embedded and scored: a 0 on every metric, with no message."""
    folder = make_beir(tmp_path / "beir", ["q1\td1\t1", "q3\td2\t1"])
    rows = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    rows[2]["text"] = "   "
    write_jsonl(folder / "queries.jsonl", rows)
    with pytest.raises(
        InputError, match=r"test.tsv: 1 judged queries have a blank text .* in the queries file, e.g. 'q3'"
    ):
        load_corpus(folder)
    rows[2]["text"] = "\u200b\u2060"  # only invisible characters, which str.strip() keeps
    write_jsonl(folder / "queries.jsonl", rows)
    with pytest.raises(
        InputError, match=r"test.tsv: 1 judged queries have a blank text .* in the queries file, e.g. 'q3'"
    ):
        load_corpus(folder)
    rows[2]["text"] = "unjudged"
    rows[1]["text"] = ""  # q2 is not judged: its text is never used
    write_jsonl(folder / "queries.jsonl", rows)
    assert [label["qid"] for label in load_corpus(folder).labels] == ["q1", "q3"]


@pytest.mark.parametrize("qid", [" q2", "q2 ", "q\u00072"])
def test_a_judged_query_id_a_tsv_or_trec_line_cannot_hold_whole_is_refused(tmp_path, qid):
    """A leading space or a control character in a real query's id passed into the golden set (an
    imported set's were refused): a TREC run or qrels line splits or strips it."""
    folder = make_beir(tmp_path / "beir", ["q1\td1\t1"])
    rows = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    rows.append({"_id": qid, "text": "dog ancestors"})
    write_jsonl(folder / "queries.jsonl", rows)
    (folder / "qrels" / "test.tsv").write_text(f"q1\td1\t1\n{qid}\td2\t1\n")
    with pytest.raises(InputError) as refused:
        load_corpus(folder)
    assert "\n" not in str(refused.value) and "'query id' must be a non-empty text" in str(refused.value)
