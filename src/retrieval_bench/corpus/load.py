"""Read a corpus (documents, ready chunks or a BEIR folder) and any real relevance labels."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from retrieval_bench.core.errors import InputError, json_kind, quoted
from retrieval_bench.core.files import check_regular, csv_rows, numbered_jsonl, read_text_lines
from retrieval_bench.core.params import from_section
from retrieval_bench.core.params_schema import DEFAULTS
from retrieval_bench.core.values import checked_id, checked_text
from retrieval_bench.corpus.chunk import chunk_id, chunk_spans
from retrieval_bench.corpus.documents import read_documents_folder
from retrieval_bench.corpus.labels import build_labels

CHUNK_SUFFIXES = (".jsonl", ".parquet", ".csv")
CHUNK_COLUMNS = ["chunk_id", "doc_id", "start", "end", "text", "text_sha256"]
# Optional fields of ready chunks (a file's columns, a vector store's metadata): the document a
# chunk belongs to and its character offsets in it. With them, documents are rebuilt from chunks.
DOCUMENT_FIELDS = ("doc_id", "start", "end")
UNCOVERED = "\n"  # what a rebuilt document holds where no chunk says (chunkers trim the whitespace between chunks)
# A rebuilt document holds UNCOVERED where no chunk says: offsets that leave more than this
# uncovered in one document are global (into a concatenated corpus), not the document's own.
MAX_UNCOVERED = 10_000_000
MAX_OFFSET = 2**40  # far beyond any document; int64 arithmetic on it cannot overflow
CHUNK_GAP = 2  # characters between the chunks of a document without offsets: a blank line
GRADE = re.compile(r"-?[0-9]{1,9}")  # a qrels grade: ASCII digits, within pytrec_eval's C int
HEADER_GRADES = {"score", "grade", "relevance", "rel", "label", "judgement", "judgment", "relevant"}
HEADER_QUERIES = {"query-id", "query_id", "queryid", "qid", "query", "query id", "topic"}


@dataclass
class Corpus:
    """What load_chunks writes: documents, the chunks to retrieve, and real labels if any."""

    documents: pd.DataFrame  # doc_id, text
    chunks: pd.DataFrame  # CHUNK_COLUMNS
    labels: list[dict] = field(default_factory=list)  # qid, question, relevant, relevant_spans
    notes: list[str] = field(default_factory=list)  # human-readable report lines
    given: bool = True  # the chunks are the source's own (ready chunks, BEIR, a store), not cut here


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_ready_chunks(path: Path, id_field: str, text_field: str) -> pd.DataFrame:
    """A JSONL, Parquet or CSV file of chunks exported from a vector store -> chunk_id, text and,
    where the file has those fields, the raw doc_id, start and end (DOCUMENT_FIELDS). Ids must be
    strings or integers and texts strings; a record breaking that is an InputError naming it
    (record n = line n of a JSONL file, row n of a table, the header not counted)."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        numbered = list(numbered_jsonl(path))  # record n is line n: a blank line is counted, not read
        if not numbered:
            raise InputError(f"{path}: no chunks (the file holds no JSON object)")
        numbers, rows = zip(*numbered, strict=True)
        for line_number, row in numbered:
            for key in (id_field, text_field):
                if key not in row:
                    raise InputError(
                        f"{path}: record {line_number} has no field {key!r}; fields found: {', '.join(row)}"
                    )
        found = {key for row in rows for key in row}
        columns = {
            key: [row.get(key) for row in rows] for key in (id_field, text_field, *DOCUMENT_FIELDS) if key in found
        }
    else:
        check_regular(path)
        read = (id_field, text_field, *DOCUMENT_FIELDS)
        names, columns = _read_csv(path, read) if suffix == ".csv" else _read_parquet(path, read)
        for key in (id_field, text_field):
            if key not in columns:
                raise InputError(f"{path}: no column {key!r}; columns found: {', '.join(map(str, names))}")
        numbers = range(1, len(columns[id_field]) + 1)
    ids, texts = columns[id_field], columns[text_field]
    if not ids:
        raise InputError(f"{path}: no chunks")
    records = pd.DataFrame(
        {
            "chunk_id": [checked_id(v, f"{path}: record {n}", id_field) for n, v in zip(numbers, ids, strict=True)],
            "text": [checked_text(v, f"{path}: record {n}", text_field) for n, v in zip(numbers, texts, strict=True)],
        }
    )
    for key in DOCUMENT_FIELDS:
        if key in columns and key not in (id_field, text_field):  # a column named doc_id holding the chunk id is the id
            records[key] = pd.Series(columns[key], dtype=object)
    return records


def _read_parquet(path: Path, read: tuple[str, ...]) -> tuple[list, dict[str, list]]:
    """(every column's name, the columns of `read` it has): only those are read, not a store
    export's vectors beside them."""
    import pyarrow.parquet as pq

    try:
        names = pq.read_schema(path).names
        raw = pd.read_parquet(path, columns=[name for name in read if name in names])
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: cannot read parquet ({str(error).splitlines()[0]})") from None
    return names, {key: raw[key].tolist() for key in raw.columns}


def _read_csv(path: Path, read: tuple[str, ...]) -> tuple[list[str], dict[str, list[str]]]:
    """(the header, the columns of `read` it has), every field as text. A row with another number of fields than the
    header is an error naming its line (pandas would cut a long row, or fill a short one with
    empty text: a chunk lost without a word); a blank line, or one of spaces, is skipped; a column
    of `read` (those the caller reads) named twice is an error, any other may repeat (Excel's
    empty trailing columns)."""
    rows = []
    try:
        header: list[str] = []
        for line, row in csv_rows(path):  # not UTF-8, or a stray quote: an error naming the line
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if not header:
                header = row
            elif len(row) != len(header):
                hint = (
                    "a trailing comma, or an unquoted comma in a text? Quote the field or remove the extra comma"
                    if len(row) > len(header)
                    else "a text with an unquoted line break? Quote the field"
                )
                raise InputError(f"{path}:{line}: {len(row)} fields where the header names {len(header)}: {hint}")
            else:
                rows.append(row)
    except OSError as error:
        raise InputError(f"{path}: cannot read csv ({error})") from None
    if not header:
        raise InputError(f"{path}: empty; a CSV of chunks needs a header row naming its columns")
    if twice := [name for name in read if header.count(name) > 1]:
        raise InputError(f"{path}: the header names column {twice[0]!r} twice; each column needs its own name")
    at = {name: header.index(name) for name in read if name in header}
    return header, {name: [row[i] for row in rows] for name, i in at.items()}


def _read_beir_jsonl(path: Path) -> list[dict]:
    """A BEIR corpus or queries file: JSON objects with an '_id' (string or integer), a 'text' (string)."""
    numbered = list(numbered_jsonl(path))  # record n is line n: a blank line is counted, not read
    for number, row in numbered:
        if "_id" not in row or "text" not in row:
            raise InputError(f"{path}: record {number} needs '_id' and 'text'; fields found: {', '.join(row)}")
        row["_id"] = checked_id(row["_id"], f"{path}: record {number}", "_id")
        row["text"] = checked_text(row["text"], f"{path}: record {number}", "text")
        if row.get("title") is not None:
            row["title"] = checked_text(row["title"], f"{path}: record {number}", "title")
    return [row for _, row in numbered]


def read_beir_corpus(path: Path) -> pd.DataFrame:
    """BEIR corpus.jsonl -> doc_id, text; text is title + " " + text, as BEIR and MTEB embed it."""
    rows = _read_beir_jsonl(path)
    if not rows:
        raise InputError(f"{path}: no documents (the file holds no JSON object)")
    return pd.DataFrame(
        {
            "doc_id": [row["_id"] for row in rows],
            "text": [f"{row.get('title') or ''} {row['text']}".strip() for row in rows],
        }
    )


def read_queries(path: Path) -> dict[str, str]:
    """Queries as BEIR JSONL (_id, text) or a two-column TSV (query id, text); a query id twice is an
    InputError naming both records (the later text would silently replace the earlier)."""
    queries: dict[str, str] = {}
    first_at: dict[str, int] = {}

    def add(query_id: str, text: str, at: int) -> None:
        if query_id in first_at:
            raise InputError(
                f"{path}:{at}: query id {quoted(query_id)} again (first at {first_at[query_id]}); one record per query"
            )
        first_at[query_id], queries[query_id] = at, text

    if path.suffix.lower() == ".jsonl":
        for number, row in enumerate(_read_beir_jsonl(path), 1):
            add(row["_id"], row["text"], number)
        return queries
    for line_number, line in enumerate(read_text_lines(path), 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split("\t")  # no CSV quoting: a query's quotes are part of its text
        if len(fields) != 2:
            raise InputError(
                f"{path}:{line_number}: expected 2 tab-separated fields (query id, text), got {len(fields)}"
            )
        add(fields[0], fields[1], line_number)
    return queries


def read_qrels(path: Path) -> list[tuple[str, str, int]]:
    """(query id, chunk id, grade) from a qrels TSV: 3 columns (BEIR, header allowed) or 4 (TREC)."""
    judgements = []
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    width: tuple[int, int] | None = None  # (fields, line) of the first judgement: every line has as many
    header_possible = True
    for line_number, line in enumerate(read_text_lines(path), 1):
        line = line.rstrip("\r\n")
        # Tab-separated (BEIR) keeps ids with spaces whole; TREC qrels are whitespace-separated.
        fields = line.split("\t") if "\t" in line else line.split()
        if not line.strip():
            continue
        if header_possible and _is_header(fields):  # BEIR's "query-id corpus-id score"
            header_possible = False
            continue
        header_possible = False
        if len(fields) not in (3, 4):
            raise InputError(
                f"{path}:{line_number}: expected 'query chunk grade' or TREC 'query 0 chunk grade', got {len(fields)} fields"
            )
        query_id, corpus_id, grade = (
            (fields[0], fields[1], fields[2]) if len(fields) == 3 else (fields[0], fields[2], fields[3])
        )
        grade = grade.strip()  # "1 " (a space before the tab) is a grade of 1, as int() read it
        if not GRADE.fullmatch(grade):  # int() also reads "1_0" as 10 and other scripts' digits
            empty = " (an empty field: a trailing tab?)" if not grade else ""
            raise InputError(
                f"{path}:{line_number}: grade must be an integer of at most 9 digits, got {grade!r}{empty}"
            )
        value = int(grade)
        if width is None:
            width = (len(fields), line_number)
        elif len(fields) != width[0]:
            raise InputError(
                f"{path}:{line_number}: {len(fields)} fields, where line {width[1]} has {width[0]}; a qrels file is "
                "all 'query chunk grade' (BEIR) or all 'query 0 chunk grade' (TREC)"
            )
        if (query_id, corpus_id) in seen:
            first_line, first_grade = seen[(query_id, corpus_id)]
            raise InputError(
                f"{path}:{line_number}: query {query_id} judges chunk {corpus_id} a second time "
                f"(grade {value}; line {first_line} gave {first_grade}); keep one line per query and chunk"
            )
        seen[(query_id, corpus_id)] = (line_number, value)
        judgements.append((query_id, corpus_id, value))
    if not judgements:
        raise InputError(f"{path}: no relevance judgements")
    return judgements


def _is_header(fields: list[str]) -> bool:
    """A qrels header: its grade column or its query column named as BEIR's and TREC tools' headers
    name them. A judgement whose grade is mistyped is an error, not a header to skip."""
    named = (fields[2] if len(fields) == 3 else fields[3] if len(fields) == 4 else "").strip().lower()
    return named in HEADER_GRADES or fields[0].strip().lower() in HEADER_QUERIES


def chunk_documents(documents: pd.DataFrame, chars: int, overlap: int) -> pd.DataFrame:
    """Cut every document into chunks; ids and offsets refer to the document's text."""
    rows = []
    for doc_id, text in zip(documents["doc_id"], documents["text"], strict=True):
        for start, end in chunk_spans(text, chars, overlap):
            rows.append((chunk_id(doc_id, start, end), doc_id, start, end, text[start:end]))
    return _with_sha(pd.DataFrame(rows, columns=CHUNK_COLUMNS[:-1]))


def _with_sha(chunks: pd.DataFrame) -> pd.DataFrame:
    chunks = chunks.copy()
    chunks["start"] = chunks["start"].astype("int64")
    chunks["end"] = chunks["end"].astype("int64")
    chunks["text_sha256"] = [sha256_text(t) for t in chunks["text"]]
    return chunks[CHUNK_COLUMNS]


def _drop_empty_and_check_ids(
    frame: pd.DataFrame, source: object, notes: list[str], id_column: str = "doc_id"
) -> pd.DataFrame:
    empty = frame["text"].str.strip() == ""
    if empty.any():
        ids = [str(value) for value in frame.loc[empty, id_column].head(5)]
        more = f" and {int(empty.sum()) - 5} more" if empty.sum() > 5 else ""
        notes.append(f"dropped {int(empty.sum())} empty texts ({', '.join(ids)}{more})")
        frame = frame[~empty].reset_index(drop=True)
    if frame.empty:
        raise InputError(f"{source}: every text is empty")
    repeated = frame[id_column].value_counts().loc[lambda counts: counts > 1]
    if len(repeated):
        examples = ", ".join(f"{quoted(value)} ({n} times)" for value, n in repeated.head(5).items())
        raise InputError(
            f"{source}: {int(repeated.sum())} rows share {len(repeated)} id{'s' * (len(repeated) > 1)}: {examples}"
            f"{', ...' if len(repeated) > 5 else ''}; every {id_column} must be unique"
        )
    return frame


def checked_offset(value: object, where: str, field: str) -> int:
    """A character offset: a non-negative integer (or the text of one, as CSV holds it) of at most
    MAX_OFFSET (rebuild_documents bounds what chunks leave uncovered)."""
    offset = None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():  # not "²", which int() refuses
        if len(value.strip().lstrip("0")) > len(str(MAX_OFFSET)):  # int() refuses over 4,300 digits: said first
            raise InputError(f"{where}: {field!r} is a {len(value.strip())}-digit number, beyond any document")
        offset = int(value.strip().lstrip("0") or "0")  # int() counts leading zeros against its 4,300 digits
    elif isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and value >= 0:
        offset = int(value)
    elif (
        isinstance(value, (float, np.floating)) and value.is_integer() and value >= 0
    ):  # Parquet/pandas integers with a null beside them
        offset = int(value)
    if offset is None:
        raise InputError(f"{where}: {field!r} must be a character offset (an integer >= 0), got {json_kind(value)}")
    if offset > MAX_OFFSET:
        raise InputError(f"{where}: {field!r} is {offset}, beyond any document ({MAX_OFFSET:,} characters at most)")
    return offset


def _document_fields(records: pd.DataFrame, source: object) -> pd.DataFrame:
    """doc_id, start and end of every chunk, checked; a field given for some chunks only is an
    error naming the first chunk without it. Without offsets a document's chunks follow each other
    in the given order, CHUNK_GAP apart; with one of start/end the other is the text's length
    away; with both, end - start must be the text's length."""
    present = [key for key in DOCUMENT_FIELDS if key in records.columns]
    for key in present:
        missing = records[key].isna()
        if missing.any():
            raise InputError(
                f"{source}: chunk {records['chunk_id'][missing].iloc[0]} has no {key!r} while other chunks have one"
            )
    where = [f"{source}: chunk {chunk_id}" for chunk_id in records["chunk_id"]]
    doc_ids = [checked_id(value, at, "doc_id") for value, at in zip(records["doc_id"], where, strict=True)]
    lengths = records["text"].str.len().to_numpy()
    given_starts = (
        [checked_offset(value, at, "start") for value, at in zip(records["start"], where, strict=True)]
        if "start" in present
        else None
    )
    given_ends = (
        [checked_offset(value, at, "end") for value, at in zip(records["end"], where, strict=True)]
        if "end" in present
        else None
    )
    if given_starts is None and given_ends is None:
        next_start: dict[str, int] = {}
        given_starts = []
        for doc_id, length in zip(doc_ids, lengths, strict=True):
            given_starts.append(next_start.get(doc_id, 0))
            next_start[doc_id] = given_starts[-1] + int(length) + CHUNK_GAP
    starts = np.asarray(given_starts if given_starts is not None else np.asarray(given_ends) - lengths, dtype=np.int64)
    ends = np.asarray(given_ends if given_ends is not None else starts + lengths, dtype=np.int64)
    wrong = np.flatnonzero((ends - starts != lengths) | (starts < 0))
    if len(wrong):
        i = wrong[0]
        raise InputError(
            f"{where[i]}: start {starts[i]} and end {ends[i]} span {ends[i] - starts[i]} characters but its text has "
            f"{lengths[i]}; offsets must be character offsets of the chunk's text in its document"
        )
    return pd.DataFrame(
        {
            "chunk_id": records["chunk_id"].tolist(),
            "doc_id": doc_ids,
            "start": starts,
            "end": ends,
            "text": records["text"].tolist(),
        }
    )


def rebuild_documents(chunks: pd.DataFrame, source: object) -> pd.DataFrame:
    """Each document's text from its chunks (sorted by doc_id, start): every chunk's text at its
    offsets, characters no chunk covers as UNCOVERED; chunks that overlap must agree on the characters
    they share, and no document may leave over MAX_UNCOVERED characters uncovered (offsets into a
    concatenated corpus), else an InputError names the chunk."""
    rows = []
    for doc_id, group in chunks.groupby("doc_id", sort=False):
        pieces: list[str] = []
        tail, covered, longest, previous = "", 0, 0, None  # tail: the last `longest` characters written
        uncovered = 0
        for this_chunk_id, start, end, text in zip(
            group["chunk_id"], group["start"], group["end"], group["text"], strict=True
        ):
            longest = max(longest, len(text))
            if start > covered:
                uncovered += start - covered
                if uncovered > MAX_UNCOVERED:  # checked before the gap is allocated
                    raise InputError(
                        f"{source}: chunk {this_chunk_id} starts at {start:,}, leaving {uncovered:,} characters of "
                        f"document {quoted(doc_id)} that no chunk covers (at most {MAX_UNCOVERED:,}): offsets into a "
                        "concatenated corpus? Give each chunk's offsets within its own document"
                    )
                pieces.append(UNCOVERED * (start - covered))
                tail, covered = tail + pieces[-1], start
            shared = min(end, covered) - start
            if shared > 0 and tail[len(tail) - (covered - start) :][:shared] != text[:shared]:
                raise InputError(
                    f"{source}: chunk {this_chunk_id} of document {doc_id} disagrees with an overlapping chunk before it "
                    f"(last: {previous}) on the characters they share; offsets must be character offsets in the document"
                )
            if end > covered:
                pieces.append(text[covered - start :])
                tail, covered = tail + pieces[-1], end
            tail, previous = tail[-longest:], this_chunk_id
        rows.append((doc_id, "".join(pieces)))
    return pd.DataFrame(rows, columns=["doc_id", "text"])


def ready_chunks_corpus(records: pd.DataFrame, source: object, notes: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(documents, chunks) from ready chunks: `records` holds chunk_id and text, and may hold
    DOCUMENT_FIELDS. Without doc_id every chunk is its own document; with it, the chunks keep their
    document and offsets, the documents are rebuilt from them (rebuild_documents) and chunks stand
    in document and offset order. Empty texts are dropped and counted; duplicate ids are an error."""
    records = _drop_empty_and_check_ids(records, source, notes, id_column="chunk_id")
    if "doc_id" not in records.columns:
        documents = pd.DataFrame({"doc_id": records["chunk_id"], "text": records["text"]})
        return documents, _with_sha(
            documents.assign(chunk_id=documents["doc_id"], start=0, end=documents["text"].str.len())
        )
    chunks = _document_fields(records, source).sort_values(
        ["doc_id", "start", "end", "chunk_id"], kind="stable", ignore_index=True
    )
    return rebuild_documents(chunks, source), _with_sha(chunks)


def note_repeated_texts(chunks: pd.DataFrame, notes: list[str]) -> None:
    duplicate_texts = int(chunks["text_sha256"].duplicated().sum())
    if duplicate_texts:
        notes.append(f"{duplicate_texts} chunks repeat the text of an earlier chunk")


def _single_file(folder: Path, stem: str, suffixes: tuple[str, ...]) -> Path:
    found = [folder / f"{stem}{suffix}" for suffix in suffixes if (folder / f"{stem}{suffix}").is_file()]
    if len(found) != 1:
        wanted = " or ".join(f"{stem}{s}" for s in suffixes)
        raise InputError(f"{folder}: expected exactly one of {wanted}, found {len(found)}")
    return found[0]


def _beir_parts(folder: Path) -> list[str]:
    parts = [name for name in ("queries.jsonl", "corpus.jsonl") if (folder / name).is_file()]
    if (folder / "qrels").is_dir():
        parts.append("qrels/")
    return parts


def _looks_like_beir(folder: Path) -> bool:
    """A folder with BEIR's queries.jsonl or qrels/ folder (but no corpus.jsonl)."""
    return (folder / "qrels").is_dir() or (
        (folder / "queries.jsonl").is_file() and not (folder / "qrels.tsv").is_file()
    )


def _check_beir_split(folder: Path, split: str) -> None:
    wanted = folder / "qrels" / f"{split}.tsv"
    if (folder / "qrels").is_dir() and not wanted.is_file():
        if wanted.exists():  # a folder or a device by that name: "not found ... splits found: test" said both
            raise InputError(f"{wanted}: not a regular file (load.split is {split!r}); expected BEIR's qrels TSV")
        found = sorted(p.stem for p in (folder / "qrels").glob("*.tsv") if p.is_file())
        raise InputError(
            f"{wanted}: not found (load.split is {split!r}); "
            + (f"splits found: {', '.join(found)}" if found else "qrels/ holds no .tsv file")
        )


_LOAD = DEFAULTS["load"]


@dataclass(frozen=True)
class LoadSettings:
    """How load_corpus reads a source: the load section's keys besides the source and chunking
    (params.DEFAULTS' values by default)."""

    id_field: str = _LOAD["id_field"]  # ready chunks: the field holding the chunk id
    text_field: str = _LOAD["text_field"]  # ready chunks: the field holding the chunk text
    split: str = _LOAD["split"]  # BEIR folders: qrels/<split>.tsv
    missing_relevant: str = _LOAD["missing_relevant"]  # qrels naming unknown chunks: error | drop
    html_skip: str = _LOAD["html_skip"]  # .html documents: the blocks the reader drops

    @classmethod
    def from_params(cls, load: Mapping[str, Any]) -> LoadSettings:
        """From the validated load section."""
        return from_section(cls, load)


def load_corpus(
    source: str | Path,
    settings: LoadSettings = LoadSettings(),
    chunk_chars: int = _LOAD["chunking"]["chars"],
    chunk_overlap: int = _LOAD["chunking"]["overlap"],
) -> Corpus:
    """Load `source`, which is one of:
    - a folder of .md/.txt/.html documents, cut into chunks of `chunk_chars` (HTML without the blocks
      `settings.html_skip` selects);
    - a .jsonl/.parquet/.csv file of ready chunks: each chunk is its own document, unless the file
      has a doc_id column (and start/end offsets), from which the documents are rebuilt;
    - a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv): documents are the chunks;
    - a folder of ready chunks with real labels: chunks.{jsonl,parquet,csv}, queries.{jsonl,tsv}, qrels.tsv.
    """
    source = Path(source)
    notes: list[str] = []
    if not source.exists():
        raise InputError(f"load.source {source}: no such file or folder")
    check_regular(source, folder_ok=True)
    labels_from: tuple[Path, Path] | None = None
    records: pd.DataFrame | None = None  # ready chunks: chunk_id, text and any DOCUMENT_FIELDS
    if source.is_file():
        if source.suffix.lower() not in CHUNK_SUFFIXES:
            raise InputError(f"load.source {source}: expected a folder or a {', '.join(CHUNK_SUFFIXES)} file")
        records = read_ready_chunks(source, settings.id_field, settings.text_field)
    elif (source / "corpus.jsonl").is_file():
        records = read_beir_corpus(source / "corpus.jsonl").rename(columns={"doc_id": "chunk_id"})
        labels_from = (source / "queries.jsonl", source / "qrels" / f"{settings.split}.tsv")
        _check_beir_split(source, settings.split)
    elif _looks_like_beir(source):
        raise InputError(
            f"{source / 'corpus.jsonl'}: not found; {source} looks like a BEIR folder "
            f"({', '.join(_beir_parts(source))}), which needs corpus.jsonl, queries.jsonl and qrels/{settings.split}.tsv"
        )
    elif (source / "qrels.tsv").is_file():
        records = read_ready_chunks(
            _single_file(source, "chunks", CHUNK_SUFFIXES), settings.id_field, settings.text_field
        )
        labels_from = (_single_file(source, "queries", (".jsonl", ".tsv")), source / "qrels.tsv")
    if records is not None:
        documents, chunks = ready_chunks_corpus(records, source, notes)
    else:
        documents = _drop_empty_and_check_ids(read_documents_folder(source, notes, settings.html_skip), source, notes)
        chunks = chunk_documents(documents, chunk_chars, chunk_overlap)
    note_repeated_texts(chunks, notes)
    labels: list[dict] = []
    if labels_from:
        queries_path, qrels_path = labels_from
        for path in labels_from:
            if not path.is_file():
                raise InputError(f"{path}: not found (needed for real labels in {source})")
        labels, label_notes = build_labels(
            read_queries(queries_path), read_qrels(qrels_path), chunks, settings.missing_relevant, qrels_path
        )
        notes.extend(label_notes)
    return Corpus(
        documents=documents.reset_index(drop=True), chunks=chunks, labels=labels, notes=notes, given=records is not None
    )
