"""Corpus files a user brings that were read wrong without a word (found by review): a CSV row with
a trailing comma shifted every column; a query id twice kept the later text; a qrels line 1 with a
non-integer grade was skipped as a header; BEIR and TREC lines mixed in one qrels file."""

from __future__ import annotations

import os

import pytest

from retrieval_bench.core.errors import InputError
from retrieval_bench.corpus.load import read_qrels, read_queries, read_ready_chunks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id,text,source\n1,first chunk,a.md,\n2,second chunk,b.md,\n", "t.csv:2: 4 fields where the header names 3"),
        ("id,text\n1,one,extra\n2,two\n", "t.csv:2: 3 fields where the header names 2"),
    ],
)
def test_a_csv_row_with_more_fields_than_the_header_is_one_line_naming_it(tmp_path, text, expected):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(InputError) as raised:
        read_ready_chunks(tmp_path / "t.csv", "id", "text")
    assert expected in str(raised.value) and "trailing comma" in str(raised.value)
    (tmp_path / "ok.csv").write_text('id,text\n1,"one, quoted"\n')
    assert read_ready_chunks(tmp_path / "ok.csv", "id", "text")["text"].tolist() == ["one, quoted"]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("queries.tsv", "q1\tWhat?\nq2\tWhy?\nq1\tHow?\n", "queries.tsv:3: query id 'q1' again (first at 1)"),
        (
            "queries.jsonl",
            '{"_id": "q1", "text": "What?"}\n{"_id": "q1", "text": "How?"}\n',
            "queries.jsonl:2: query id 'q1' again (first at 1)",
        ),
    ],
)
def test_a_query_id_twice_is_refused_not_replaced(tmp_path, name, text, expected):
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        read_queries(tmp_path / name)


def test_qrels_a_numeric_first_line_is_a_judgement_and_widths_do_not_mix(tmp_path):
    path = tmp_path / "qrels.tsv"
    path.write_text("q1\t1\t1.0\nq2\tc2\t1\n")  # line 1 is a judgement with a bad grade, not a header
    with pytest.raises(InputError, match=r"qrels.tsv:1: grade must be an integer of at most 9 digits, got '1.0'"):
        read_qrels(path)
    path.write_text("q1\tc1\t1\nq2\t0\tc2\t1\n")
    with pytest.raises(InputError, match=r"qrels.tsv:2: 4 fields, where line 1 has 3"):
        read_qrels(path)
    path.write_text("query-id\tcorpus-id\tscore\nq1\tc1\t1\n")  # a header is still skipped
    assert read_qrels(path) == [("q1", "c1", 1)]
    path.write_text("q1 0 c1 1\nq2 0 c2 2\n")  # TREC throughout
    assert read_qrels(path) == [("q1", "c1", 1), ("q2", "c2", 2)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a trailing tab made line 1 a TREC line with an empty grade: it was skipped as a header
        (
            "1\t31715818\t1\t\n2\t5\t1\n",
            r"qrels.tsv:1: grade must be an integer of at most 9 digits, got '' \(an empty field",
        ),
        ("q1\tc1\tyes\nq2\tc2\t1\n", r"qrels.tsv:1: grade must be an integer .*got 'yes'"),  # was skipped too
        ("q1\tc1\t1_0\n", r"qrels.tsv:1: .*got '1_0'"),  # int() read 10
        ("q1\tc1\t\u0661\n", r"qrels.tsv:1: .*got '\u0661'"),  # an Arabic-Indic 1
        ("q1\tc1\t99999999999999999999\n", r"qrels.tsv:1: grade must be an integer of at most 9 digits"),
        ("q1\tc1\t1\nquery-id\tcorpus-id\tscore\n", r"qrels.tsv:2: grade must be an integer"),  # a header only first
    ],
)
def test_a_qrels_line_that_is_not_a_header_is_never_skipped_as_one(tmp_path, text, expected):
    path = tmp_path / "qrels.tsv"
    path.write_text(text)
    with pytest.raises(InputError, match=expected):
        read_qrels(path)


def test_a_header_after_blank_lines_and_a_trec_style_header_are_headers(tmp_path):
    path = tmp_path / "qrels.tsv"
    path.write_text("\nquery-id\tcorpus-id\tscore\nq1\tc1\t-1\n")  # was: line 2 'grade must be an integer'
    assert read_qrels(path) == [("q1", "c1", -1)]
    path.write_text("qid 0 docno rel\nq1 0 c1 2\n")
    assert read_qrels(path) == [("q1", "c1", 2)]
    path.write_text("q1\td1\t1 \nq2\td2\t 2\n")  # spaces around a tab-separated grade: int() read them
    assert read_qrels(path) == [("q1", "d1", 1), ("q2", "d2", 2)]


def test_a_documents_folder_names_the_links_it_does_not_follow_and_drops_a_byte_order_mark(tmp_path):
    from retrieval_bench.corpus.documents import read_documents_folder

    folder, elsewhere = tmp_path / "docs", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text("linked text")
    (folder / "own.md").write_text("\ufeffown text", encoding="utf-8")
    (folder / "linked").symlink_to(elsewhere, target_is_directory=True)
    (folder / "gone.md").symlink_to(tmp_path / "nothing.md")
    notes: list[str] = []
    documents = read_documents_folder(folder, notes)
    assert documents["text"].tolist() == ["own text"]
    assert "did not follow 2 links to folders or to nothing: gone.md, linked" in notes
    # a pipe and a link to a device are neither read nor called links to nothing
    os.mkfifo(folder / "pipe.md")
    (folder / "zero.md").symlink_to("/dev/zero")
    notes = []
    assert read_documents_folder(folder, notes)["text"].tolist() == ["own text"]
    assert "did not follow 2 links to folders or to nothing: gone.md, linked" in notes
    assert (
        "did not read 2 entries that are not regular files (pipes, devices, sockets, or links to them): pipe.md, zero.md"
        in notes
    )


def test_a_file_name_that_is_not_utf8_is_stamped_and_a_document_so_named_is_one_line(tmp_path):
    """Names from a cp1252 archive unpacked on Linux: check_params' stamp and `show` crashed."""
    from retrieval_bench.corpus.documents import read_documents_folder
    from retrieval_bench.corpus.source_stamp import content_digest, metadata_digest

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tea.txt").write_text("Tea is a drink.")
    skipped = os.fsdecode(b"r\xe9sum\xe9.pdf")  # not a document: only stamped
    (folder / skipped).write_bytes(b"%PDF")
    assert content_digest(folder)[0] == 2 and metadata_digest(folder)[0] == 2
    assert read_documents_folder(folder)["doc_id"].tolist() == ["tea.txt"]
    (folder / os.fsdecode(b"menu_caf\xe9.txt")).write_text("Coffee.")
    with pytest.raises(InputError, match=r"menu_caf\\udce9\.txt: the file name is not UTF-8"):
        read_documents_folder(folder)


def test_a_csv_row_with_fewer_fields_than_the_header_is_one_line_not_a_lost_text(tmp_path):
    (tmp_path / "t.csv").write_text("id,text\nc1,First.\nc2,Second line one\nline two\nc3,Third.\n")
    with pytest.raises(InputError) as raised:
        read_ready_chunks(tmp_path / "t.csv", "id", "text")
    assert "t.csv:4: 1 fields where the header names 2" in str(raised.value)
    (tmp_path / "spaces.csv").write_text("id,text\nc1,hello world\n   \nc2,second\n")  # a line of spaces: skipped
    assert read_ready_chunks(tmp_path / "spaces.csv", "id", "text")["chunk_id"].tolist() == ["c1", "c2"]
    (tmp_path / "commas.csv").write_text("id,text\n,,\nc1,hello world\n")  # not blank: pandas reads it as a row
    with pytest.raises(InputError, match=r"commas.csv:2: 3 fields where the header names 2"):
        read_ready_chunks(tmp_path / "commas.csv", "id", "text")
    long = "word " * 40_000  # 200 KB in one field: over the csv module's default limit
    (tmp_path / "long.csv").write_text(f'id,text\nc1,"{long}"\n\nc2,short\n')
    assert read_ready_chunks(tmp_path / "long.csv", "id", "text")["chunk_id"].tolist() == ["c1", "c2"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"d.csv: empty; a CSV of chunks needs a header row"),
        (b"id,text,text\n1,a,b\n", r"d.csv: the header names column 'text' twice"),  # pandas read it as text.1
        (b"id,text\n1,caf\xe9\n", r"d.csv:2: not UTF-8 text"),
    ],
)
def test_a_csv_without_header_with_a_column_named_twice_or_not_utf8_is_one_line(tmp_path, content, message):
    (tmp_path / "d.csv").write_bytes(content)
    with pytest.raises(InputError, match=message):
        read_ready_chunks(tmp_path / "d.csv", "id", "text")


def test_a_csv_may_start_with_blank_lines_and_repeat_a_column_it_does_not_read(tmp_path):
    """Excel's empty trailing columns (`id,text,,`) and a blank first line loaded under pandas."""
    (tmp_path / "x.csv").write_text("\nid,text,,\nc1,hello,,\nc2,world,,\n")
    chunks = read_ready_chunks(tmp_path / "x.csv", "id", "text")
    assert chunks["chunk_id"].tolist() == ["c1", "c2"] and chunks["text"].tolist() == ["hello", "world"]


def test_an_empty_beir_corpus_is_one_line(tmp_path):
    from retrieval_bench.corpus.load import read_beir_corpus

    (tmp_path / "corpus.jsonl").write_text("\n\n")
    with pytest.raises(InputError, match=r"corpus.jsonl: no documents"):
        read_beir_corpus(tmp_path / "corpus.jsonl")


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (10**12, "chunk b starts at 1,000,000,000,000, leaving 999,999,999,995 characters of document 'd' that no"),
        (2**63 + 5, "chunk b: 'start' is 9223372036854775813, beyond any document"),
        (20_000_000, "chunk b starts at 20,000,000, leaving 19,999,995 characters of document 'd' that no chunk"),
        ("9" * 5000, "chunk b: 'start' is a 5000-digit number, beyond any document"),  # int() refuses: a traceback
        ("0" * 5000 + "20000000", "chunk b starts at 20,000,000, leaving 19,999,995"),  # its leading zeros count too
    ],
)
def test_offsets_far_beyond_the_chunks_text_are_one_line_not_a_memory_error(tmp_path, start, expected):
    import numpy as np
    import pandas as pd

    from retrieval_bench.corpus.load import load_corpus

    starts = np.array([0, start], dtype=np.uint64) if isinstance(start, int) else ["0", start]
    frame = pd.DataFrame({"id": ["a", "b"], "text": ["hello", "world"], "doc_id": "d", "start": starts})
    path = tmp_path / ("c.parquet" if isinstance(start, int) else "c.csv")
    if path.suffix == ".parquet":
        frame.to_parquet(path)
    else:
        frame.to_csv(path, index=False)
    with pytest.raises(InputError) as raised:
        load_corpus(path)
    assert expected in str(raised.value)


def test_a_parquet_of_chunks_is_read_for_the_columns_used_only(tmp_path, monkeypatch):
    """A vector store's export holds each chunk's embedding beside its text: not read (nor made a
    Python list per row) to take the ids and texts."""
    import pandas as pd

    path = tmp_path / "export.parquet"
    pd.DataFrame({"id": ["c1", "c2"], "text": ["one", "two"], "vector": [[0.1] * 4, [0.2] * 4]}).to_parquet(path)
    asked = []
    real = pd.read_parquet
    monkeypatch.setattr(pd, "read_parquet", lambda p, columns=None: asked.append(columns) or real(p, columns=columns))
    assert read_ready_chunks(path, "id", "text")["text"].tolist() == ["one", "two"]
    assert asked == [["id", "text"]]
    with pytest.raises(InputError, match=r"no column 'body'; columns found: id, text, vector"):
        read_ready_chunks(path, "id", "body")


def test_a_stray_quote_in_a_csv_of_chunks_is_one_line_naming_its_row_not_chunks_lost(tmp_path):
    """A quote never closed swallowed every later row into one chunk's text: 3 chunks of 100, exit 0."""
    rows = [f"{i},chunk {i} about topic {i}" for i in range(1, 101)]
    rows[2] = '3,"5 inch drives were common'
    (tmp_path / "t.csv").write_text("id,text\n" + "\n".join(rows) + "\n")
    with pytest.raises(InputError) as raised:
        read_ready_chunks(tmp_path / "t.csv", "id", "text")
    assert str(raised.value) == (
        f"{tmp_path / 't.csv'}:4: a quoted field opened on this row is never closed: a stray quote? Inside a field "
        "write a quote twice, and quote that field"
    )
    (tmp_path / "after.csv").write_text('id,text\nc1,"quoted" then more\nc2,two\n')
    with pytest.raises(InputError, match=r"after\.csv:2: a quote in this row breaks its fields \("):
        read_ready_chunks(tmp_path / "after.csv", "id", "text")
    (tmp_path / "fine.csv").write_text('id,text\nc1,"a ""quoted"" word, and\na line break"\nc2,say "hi" inside\n')
    chunks = read_ready_chunks(tmp_path / "fine.csv", "id", "text")
    assert chunks["text"].tolist() == ['a "quoted" word, and\na line break', 'say "hi" inside']


def test_a_subfolder_that_cannot_be_listed_is_an_error_not_documents_lost(tmp_path, monkeypatch):
    """Path.rglob skips a folder it may not list: its documents were left out of the corpus and of
    load.source's stamp without a word, exit 0. (The denial is simulated: tests may run as root.)"""
    from retrieval_bench.core.errors import describe_os_error
    from retrieval_bench.corpus.documents import read_documents_folder
    from retrieval_bench.corpus.source_stamp import content_digest

    (tmp_path / "docs" / "open").mkdir(parents=True)
    (tmp_path / "docs" / "secret").mkdir()
    (tmp_path / "docs" / "open" / "a.md").write_text("Apples.")
    (tmp_path / "docs" / "secret" / "b.md").write_text("Pears.")
    assert read_documents_folder(tmp_path / "docs")["doc_id"].tolist() == ["open/a.md", "secret/b.md"]
    secret, scandir = str(tmp_path / "docs" / "secret"), os.scandir

    def denied(path="."):
        if os.fspath(path) == secret:
            raise PermissionError(13, "Permission denied", secret)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", denied)
    for read in (read_documents_folder, content_digest):
        with pytest.raises(PermissionError) as raised:
            read(tmp_path / "docs")
        assert describe_os_error(raised.value) == f"Permission denied ({secret})"
