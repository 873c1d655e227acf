"""Read a question set in any supported format into one shape: qid, question, evidence texts and,
where the format has them, an evidence span or chunk labels; every other field is kept as-is.

Formats (detected from the file):

- this project's golden set (data/goldenset.jsonl): qid, question, doc_id/start/end or relevant;
- hand-written questions (JSONL): question, doc_id, evidence, optional qid and any other fields; a
  multi-evidence one says `"kind": "multi"` with evidence a list of {doc_id, evidence} pieces, an
  unanswerable one `"kind": "unanswerable"` with no evidence (an optional doc_id: the document
  it was written near, and `why`: what the corpus lacks);
- a ragas testset (CSV or JSONL): user_input, reference_contexts (a list of texts: several make a
  multi-evidence question, as ragas' multi-hop synthesizers write);
- a LlamaIndex EmbeddingQAFinetuneDataset (JSON): queries, corpus, relevant_docs;
- DeepEval goldens (a JSON list, or JSONL): input, context (a list of texts: several make a
  multi-evidence question), expected_output, source_file (EvaluationDataset.save_as);
- a Giskard RAGET testset (QATestset.save, JSONL): question, reference_context ("Document ID:
  text" blocks), metadata.question_type; an "out of scope" question is unanswerable, any other is
  anchored to its first context block;
- a BEIR folder (queries.jsonl, qrels/<split>.tsv) with its corpus.

Every reader checks each record with checked_question (a non-blank question; a qid of the form
QID_RULE) and names the file, line (or record) and field of anything else; two different questions
under one qid are refused (check_repeated_qids). An empty file is said to be empty.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from retrieval_bench.core.errors import InputError, json_kind, quoted
from retrieval_bench.core.files import (
    check_regular,
    csv_rows,
    numbered_jsonl,
    parse_json,
    read_jsonl,
    read_text,
    read_text_lines,
)
from retrieval_bench.core.question_sets import QUESTION_KINDS
from retrieval_bench.core.values import checked_id, checked_qid, visible

RAGAS_FIELDS = ("user_input", "reference_contexts")
LLAMAINDEX_FIELDS = ("queries", "corpus", "relevant_docs")
DEEPEVAL_FIELDS = ("input", "context")
GISKARD_FIELDS = ("question", "reference_context", "metadata")
GISKARD_OUT_OF_SCOPE = "out of scope"  # Giskard's question_type of a question its knowledge base cannot answer
_GISKARD_BLOCK = re.compile(r"(?:^|\n\n)Document [^\n:]*: ")
# A question's kinds (goldenset rows say `kind`; none: single). Hand-written JSONL may say multi or
# unanswerable (with their own evidence shapes), single or keyword (one evidence text).
# The formats whose questions carry evidence texts -> the `source` of their golden rows (the tool
# that wrote them); a BEIR set's rows say `qrels`, as real labels do.
SOURCES = {
    "handwritten": "hand-written",
    "ragas": "ragas",
    "llamaindex": "llamaindex",
    "deepeval": "deepeval",
    "giskard": "giskard",
}
# What a question's own id may be: golden-set qids are written to TSV qrels and run files, where a
# tab or a line break would split a row, and an empty id names nothing.


# The most evidence pieces one multi question may have: its complete@k is exact over every subset of
# its pieces (2^pieces terms), and a question needing more passages than this is no longer one question.
MAX_PIECES = 8


def hashed_qid(question: str, anchor: str = "") -> str:
    """The qid of a question its source gave none: stable across runs."""
    return "q" + hashlib.sha256(f"{anchor}\0{question}".encode("utf-8")).hexdigest()[:12]


def normalise_question(question: str) -> str:
    """The form two questions are compared in to find duplicates: case, spacing, end punctuation."""
    return " ".join(re.sub(r"[\s?.!]+$", "", question.lower()).split())


def checked_question(
    where: str, question: object, qid: object = None, fields: tuple[str, str] = ("question", "qid")
) -> tuple[str, str | None]:
    """(question, qid) of one record of any format, or one InputError naming `where` (file and
    line or record) and the field (`fields`: the format's names for them): the question a text
    with a non-blank character, the qid None (not given) or an id of the form QID_RULE."""
    question_field, qid_field = fields
    if not isinstance(question, str) or not visible(question):
        got = (
            (f"only invisible characters {quoted(question)}" if question.strip() else "an empty text")
            if isinstance(question, str)
            else json_kind(question)
        )
        raise InputError(f"{where}: {question_field!r} must be the question, a non-blank text; got {got}")
    if qid is None:
        return question, None
    return question, checked_qid(qid, where, qid_field)


def check_repeated_qids(questions: list[dict]) -> None:
    """Two different questions (normalise_question) with one qid are an InputError naming both
    records: which one the qid names is not knowable. An identical repeat is left to the golden
    set, which drops and counts it."""
    first: dict[str, dict] = {}
    for question in questions:
        if question["qid"] is None:
            continue
        earlier = first.setdefault(question["qid"], question)
        if earlier is not question and normalise_question(earlier["question"]) != normalise_question(
            question["question"]
        ):
            raise InputError(
                f"{question['where']}: qid {quoted(question['qid'])} is also that of {earlier['where']}, a different "
                "question; give each question its own qid"
            )


def detect_format(path: Path) -> str:
    """goldenset | handwritten | ragas | llamaindex | deepeval | giskard | beir, from the file's name
    and first record."""
    if path.is_dir():
        if (path / "queries.jsonl").is_file():
            return "beir"
        raise InputError(f"{path}: a folder must be a BEIR folder (queries.jsonl, qrels/<split>.tsv, corpus.jsonl)")
    if not any(line.strip() for line in read_text_lines(path)):
        raise InputError(f"{path}: empty; a question set holds at least one question")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "deepeval" if _is_deepeval_list(path) else "llamaindex"
    if suffix == ".csv":
        columns = _csv_columns(path)
        if not set(RAGAS_FIELDS) & set(columns):
            raise InputError(
                f"{path}:1: not a known question set: a CSV question set is a ragas testset, with columns "
                f"{' and '.join(RAGAS_FIELDS)}; columns found: {quoted(columns, 200)} "
                "(hand-written questions are JSONL: question, doc_id, evidence)"
            )
        return "ragas"
    if suffix != ".jsonl":
        raise InputError(f"{path}: expected a .jsonl, .csv or .json question set, or a BEIR folder")
    first = next((row for _, row in numbered_jsonl(path)), {})
    if all(field in first for field in RAGAS_FIELDS):
        return "ragas"
    if all(field in first for field in DEEPEVAL_FIELDS):
        return "deepeval"
    if all(field in first for field in GISKARD_FIELDS):
        return "giskard"
    # A golden row (qid, question and where its evidence lies) before a hand-written one: every golden
    # row carries a kind, and a hand-written unanswerable question has a kind and no evidence.
    if "qid" in first and "question" in first and ("start" in first or "relevant" in first):
        return "goldenset"
    if "question" in first and ("evidence" in first or first.get("kind") in QUESTION_KINDS):
        return "handwritten"
    raise InputError(
        f"{path}:1: not a known question set: expected question + doc_id + evidence (hand-written), "
        f"user_input + reference_contexts (ragas), input + context (DeepEval), question + reference_context + metadata "
        f"(Giskard) or this project's golden set; fields found: {', '.join(first) or 'none'}"
    )


def _read_json(path: Path) -> object:
    return parse_json(read_text(path), path)


def _is_deepeval_list(path: Path) -> bool:
    """Whether a .json file is a list of DeepEval goldens (its first has an `input`); anything
    else is read as a LlamaIndex dataset, whose reader says what is wrong with it."""
    data = _read_json(path)
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "input" in data[0]


def _csv_records(path: Path) -> Iterator[tuple[str, dict]]:
    """(file:line, record) of each row of a CSV file with a header, the line the row starts on (a
    quoted cell may span lines); a missing trailing cell is None, as csv.DictReader gives it. A row
    csv cannot read, or with more cells than the header (an unquoted comma cut the text short), is
    an InputError naming its line."""
    rows = csv_rows(path)
    header = next((row for _, row in rows if row), [])
    for line, row in rows:
        if not row:
            continue
        if len(row) > len(header):
            raise InputError(
                f"{path}:{line}: {len(row)} fields where the header names {len(header)}: an unquoted comma in a text? "
                "Quote the field"
            )
        yield f"{path}:{line}", dict(zip(header, row + [None] * (len(header) - len(row)), strict=True))


def _csv_columns(path: Path) -> list[str]:
    return next((row for _, row in csv_rows(path) if row), [])


def _context_list(value: object, where: str) -> list[str]:
    """ragas' reference_contexts: a list, or in CSV its JSON or Python-literal text."""
    if isinstance(value, str):
        raw = value
        parsers: tuple[Callable[[str], Any], ...] = (json.loads, ast.literal_eval)
        for parse in parsers:
            try:
                value = parse(raw)
                break
            except (ValueError, SyntaxError, RecursionError):  # too deep: not a list of texts either
                continue
    if not isinstance(value, list) or not all(isinstance(text, str) for text in value):
        raise InputError(f"{where}: 'reference_contexts' must be a list of texts")
    return [text for text in value if text.strip()]


def read_ragas(path: Path) -> list[dict]:
    if path.suffix.lower() == ".csv":
        numbered = list(_csv_records(path))
    else:
        numbered = [(f"{path}:{line}", record) for line, record in numbered_jsonl(path)]
    questions = []
    for where, record in numbered:
        missing = [field for field in RAGAS_FIELDS if field not in record]
        if missing:
            raise InputError(f"{where}: a ragas testset record needs {' and '.join(missing)}")
        qid_field = "qid" if "qid" in record else "id"
        question, qid = checked_question(where, record["user_input"], record.get(qid_field), ("user_input", qid_field))
        question = question.strip()
        contexts = _context_list(record["reference_contexts"], where)
        extra = {k: v for k, v in record.items() if k not in (*RAGAS_FIELDS, "qid")}
        qid = qid or hashed_qid(question, contexts[0] if contexts else "")
        questions.append({"qid": qid, "question": question, "evidence": contexts, "extra": extra, "where": where})
    return questions


def read_llamaindex(path: Path) -> list[dict]:
    data = _read_json(path)
    if not isinstance(data, dict) or not all(isinstance(data.get(key), dict) for key in LLAMAINDEX_FIELDS):
        found = f"keys found: {quoted(list(data), 200)}" if isinstance(data, dict) else f"got {json_kind(data)}"
        raise InputError(
            f"{path}: not a known question set: a .json question set is a LlamaIndex EmbeddingQAFinetuneDataset, "
            f"an object whose {', '.join(LLAMAINDEX_FIELDS)} are mappings; {found}"
        )
    corpus = data["corpus"]
    questions: list[dict[str, Any]] = []
    for qid, question in data["queries"].items():
        where = f"{path}: queries[{quoted(qid)}]"
        question, qid = checked_question(where, question, qid, ("question", "qid"))
        node_ids = data["relevant_docs"].get(qid)
        node_ids = [] if node_ids is None else node_ids
        field = f"relevant_docs[{quoted(qid)}]"
        if not isinstance(node_ids, list) or not all(isinstance(node, str) for node in node_ids):
            raise InputError(f"{path}: {field} must be a list of node ids of corpus, got {quoted(node_ids)}")
        unknown = [node for node in node_ids if node not in corpus]
        if unknown:
            raise InputError(f"{path}: {field} names {quoted(unknown[0])}, which is not in corpus")
        for node in node_ids:
            if not isinstance(corpus[node], str):
                raise InputError(
                    f"{path}: corpus[{quoted(node)}] must be the node's text, got {json_kind(corpus[node])}"
                )
        questions.append(
            {
                "qid": qid,
                "question": question,
                "evidence": [corpus[node] for node in node_ids],
                "node_ids": list(node_ids),
                "extra": {},
                "where": where,
            }
        )
    return questions


def _deepeval_records(path: Path) -> list[tuple[str, object]]:
    """(where, record) of DeepEval goldens: a JSON list (EvaluationDataset.save_as) or JSONL."""
    if path.suffix.lower() == ".jsonl":
        return [(f"{path}:{line}", record) for line, record in numbered_jsonl(path)]
    data = _read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: DeepEval goldens are a JSON list of objects, got {json_kind(data)}")
    return [(f"{path}: golden {i + 1}", record) for i, record in enumerate(data)]


def read_deepeval(path: Path) -> list[dict]:
    """DeepEval goldens: input (the question), context (its evidence texts); expected_output,
    source_file and any other field are kept as-is."""
    questions = []
    for where, record in _deepeval_records(path):
        if not isinstance(record, dict):
            raise InputError(f"{where}: a DeepEval golden is an object with an `input` text, got {json_kind(record)}")
        question, qid = checked_question(where, record.get("input"), record.get("qid"), ("input", "qid"))
        question = question.strip()
        contexts = record.get("context") or []
        if not isinstance(contexts, list) or not all(isinstance(text, str) for text in contexts):
            raise InputError(f"{where}: a DeepEval golden's `context` must be a list of texts")
        contexts = [text for text in contexts if text.strip()]
        extra = {k: v for k, v in record.items() if k not in ("input", "context", "qid")}
        qid = qid or hashed_qid(question, contexts[0] if contexts else "")
        questions.append({"qid": qid, "question": question, "evidence": contexts, "extra": extra, "where": where})
    return questions


def read_handwritten_jsonl(path: Path) -> list[dict]:
    """Hand-written JSONL: question, evidence (a text), doc_id (None: any document) and an
    optional qid (None: the golden set derives one from document and question); `kind` (default
    single): multi with evidence a list of {doc_id (optional), evidence} pieces (2 to MAX_PIECES),
    unanswerable with no evidence (doc_id: the document it was written near, optional)."""
    questions = []
    for line, row in numbered_jsonl(path):
        where = f"{path}:{line}"
        question, qid = checked_question(where, row.get("question"), row.get("qid"))
        kind = row.get("kind", "single")
        if kind not in QUESTION_KINDS:
            raise InputError(f"{where}: 'kind' must be one of {', '.join(QUESTION_KINDS)}; got {quoted(kind)}")
        doc_id = row.get("doc_id")
        doc_id = None if doc_id is None else checked_id(doc_id, where, "doc_id")
        pieces = _hand_written_pieces(row.get("evidence"), kind, where)
        questions.append(
            {
                "qid": qid,
                "question": question,
                "doc_id": pieces[0]["doc_id"] if kind == "multi" else doc_id,
                "evidence": [piece["evidence"] for piece in pieces],
                **({"kind": kind} if "kind" in row else {}),  # unsaid: assigned by rule (goldenset.kinds)
                **({"pieces": pieces} if kind == "multi" else {}),
                "extra": {k: v for k, v in row.items() if k not in ("qid", "question", "doc_id", "evidence", "kind")},
                "where": where,
            }
        )
    return questions


def _hand_written_pieces(evidence: object, kind: str, where: str) -> list[dict]:
    """A hand-written record's evidence as pieces {doc_id, evidence}: one text (single, keyword),
    a list of 2 to MAX_PIECES {doc_id, evidence} (multi), none (unanswerable); else one InputError."""
    if kind == "unanswerable":
        if evidence not in (None, "", []):
            raise InputError(
                f"{where}: an unanswerable question has no 'evidence' (say what the corpus lacks in 'why')"
            )
        return []
    if kind != "multi":
        if not isinstance(evidence, str):
            hint = ' (several pieces of evidence: add "kind": "multi")' if isinstance(evidence, list) else ""
            raise InputError(f"{where}: 'evidence' must be a text of the document, got {json_kind(evidence)}{hint}")
        return [{"doc_id": None, "evidence": evidence}]
    expected = f'a list of 2 to {MAX_PIECES} {{"doc_id": ..., "evidence": "excerpt"}} pieces'
    if not isinstance(evidence, list) or not 2 <= len(evidence) <= MAX_PIECES:
        got = (
            f"{len(evidence)} piece{'' if len(evidence) == 1 else 's'}"
            if isinstance(evidence, list)
            else json_kind(evidence)
        )
        raise InputError(f"{where}: a multi question's 'evidence' must be {expected}, got {got}")
    pieces = []
    for number, piece in enumerate(evidence, 1):
        if not isinstance(piece, dict) or not isinstance(piece.get("evidence"), str) or not piece["evidence"].strip():
            raise InputError(f"{where}: evidence piece {number} must be {{doc_id, evidence: a non-blank text}}")
        doc_id = piece.get("doc_id")
        pieces.append(
            {
                "doc_id": None if doc_id is None else checked_id(doc_id, where, f"evidence[{number}].doc_id"),
                "evidence": piece["evidence"],
            }
        )
    located = [(p["doc_id"], " ".join(p["evidence"].split())) for p in pieces]
    if len(set(located)) < len(located):  # a repeated piece is one piece: the question is not multi
        first = next(i for i, piece in enumerate(located, 1) if located.index(piece) + 1 != i)
        raise InputError(
            f"{where}: evidence piece {first} repeats an earlier one: a multi question needs distinct pieces"
        )
    return pieces


def read_giskard(path: Path) -> list[dict]:
    """A Giskard RAGET testset (QATestset.save): question, reference_context ("Document ID: text"
    blocks joined by blank lines), metadata.question_type; "out of scope" questions are
    unanswerable (the knowledge base does not answer them), the others single, their evidence the
    first context block (the seed document Giskard wrote the question from)."""
    questions = []
    for line, record in numbered_jsonl(path):
        where = f"{path}:{line}"
        missing = [field for field in GISKARD_FIELDS if field not in record]
        if missing:
            raise InputError(f"{where}: a Giskard testset record needs {' and '.join(missing)}")
        question, qid = checked_question(where, record["question"], record.get("id"), ("question", "id"))
        metadata = record["metadata"] if isinstance(record["metadata"], dict) else {}
        context = record["reference_context"]
        if not isinstance(context, str):
            raise InputError(f"{where}: 'reference_context' must be a text, got {json_kind(context)}")
        kind = "unanswerable" if metadata.get("question_type") == GISKARD_OUT_OF_SCOPE else "single"
        blocks = [block for block in _GISKARD_BLOCK.split(context) if block.strip()]
        evidence = [] if kind == "unanswerable" else blocks[:1]
        extra = {k: v for k, v in record.items() if k not in ("question", "id", "reference_context")}
        qid = qid or hashed_qid(question, evidence[0] if evidence else "")
        questions.append(
            {
                "qid": qid,
                "question": question.strip(),
                "evidence": evidence,
                "kind": kind,
                "extra": extra,
                "where": where,
            }
        )
    return questions


def read_beir(path: Path, split: str) -> list[dict]:
    """A BEIR folder's judged queries: qid, question and relevant {document id: grade}."""
    from retrieval_bench.corpus.load import read_qrels, read_queries

    queries = read_queries(path / "queries.jsonl")
    qrels_path = path / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise InputError(f"{qrels_path}: not found (the BEIR folder's judgements for split {split!r})")
    relevant: dict[str, dict[str, int]] = {}
    for qid, chunk_id, grade in read_qrels(qrels_path):
        relevant.setdefault(qid, {})[chunk_id] = grade
    no_text = [qid for qid in relevant if qid not in queries]
    if no_text:  # its judgements would vanish uncounted
        raise InputError(
            f"{qrels_path}: {len(no_text)} judged queries have no text in {path / 'queries.jsonl'}, e.g. "
            f"{', '.join(map(quoted, no_text[:5]))}"
        )
    questions: list[dict[str, Any]] = []
    for qid, grades in relevant.items():
        where = f"{path / 'queries.jsonl'}: _id {quoted(qid)}"
        question, checked_qid = checked_question(where, queries[qid], qid, ("text", "_id"))
        questions.append({"qid": checked_qid, "question": question, "evidence": [], "relevant": grades, "extra": {}})
    return questions


READERS = {
    "ragas": read_ragas,
    "llamaindex": read_llamaindex,
    "deepeval": read_deepeval,
    "handwritten": read_handwritten_jsonl,
    "giskard": read_giskard,
}


def read_question_set(path: str | Path, split: str = "test") -> tuple[str, list[dict]]:
    """(format, questions) for the question set at `path`; each question of a format with
    evidence says `where` it was read (file and line or record)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    check_regular(path, folder_ok=True)
    kind = detect_format(path)
    if kind == "beir":
        return kind, read_beir(path, split)
    if kind == "goldenset":
        return kind, [{**row, "evidence": []} for row in read_jsonl(path)]
    questions = READERS[kind](path)
    check_repeated_qids(questions)
    return kind, questions
