"""Read a question set in any supported format into one shape: qid, question, evidence texts and,
where the format has them, an evidence span or chunk labels; every other field is kept as-is.

Formats (detected from the file):

- this project's golden set (data/goldenset.jsonl): qid, question, doc_id/start/end or relevant;
- hand-written questions (JSONL): question, doc_id, evidence, optional qid and any other fields;
- a ragas testset (CSV or JSONL): user_input, reference_contexts (a list of texts);
- a LlamaIndex EmbeddingQAFinetuneDataset (JSON): queries, corpus, relevant_docs;
- DeepEval goldens (a JSON list, or JSONL): input, context (a list of texts), expected_output,
  source_file (EvaluationDataset.save_as);
- a BEIR folder (queries.jsonl, qrels/<split>.tsv) with its corpus.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
from pathlib import Path

from retrieval_bench.core.errors import InputError, json_kind, quoted
from retrieval_bench.core.files import check_regular, numbered_jsonl, read_jsonl, read_text, read_text_lines

RAGAS_FIELDS = ("user_input", "reference_contexts")
LLAMAINDEX_FIELDS = ("queries", "corpus", "relevant_docs")
DEEPEVAL_FIELDS = ("input", "context")
# The formats whose questions carry evidence texts -> the `source` of their golden rows (the tool
# that wrote them); a BEIR set's rows say `qrels`, as real labels do.
SOURCES = {"handwritten": "hand-written", "ragas": "ragas", "llamaindex": "llamaindex", "deepeval": "deepeval"}


def hashed_qid(question: str, anchor: str = "") -> str:
    """The qid of a question its source gave none: stable across runs."""
    return "q" + hashlib.sha256(f"{anchor}\0{question}".encode("utf-8")).hexdigest()[:12]


def detect_format(path: Path) -> str:
    """goldenset | handwritten | ragas | llamaindex | deepeval | beir, from the file's name and first record."""
    if path.is_dir():
        if (path / "queries.jsonl").is_file():
            return "beir"
        raise InputError(f"{path}: a folder must be a BEIR folder (queries.jsonl, qrels/<split>.tsv, corpus.jsonl)")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "deepeval" if _is_deepeval_list(path) else "llamaindex"
    if suffix == ".csv":
        columns = next(csv.reader(read_text_lines(path)), [])
        if not set(RAGAS_FIELDS) & set(columns):
            raise InputError(
                f"{path}:1: not a known question set: a CSV question set is a ragas testset, with columns "
                f"{' and '.join(RAGAS_FIELDS)}; columns found: {quoted(columns, 200)} "
                "(hand-written questions are JSONL: question, doc_id, evidence)"
            )
        return "ragas"
    if suffix != ".jsonl":
        raise InputError(f"{path}: expected a .jsonl, .csv or .json question set, or a BEIR folder")
    rows = read_jsonl(path)
    first = rows[0] if rows else {}
    if all(field in first for field in RAGAS_FIELDS):
        return "ragas"
    if all(field in first for field in DEEPEVAL_FIELDS):
        return "deepeval"
    if "evidence" in first and "question" in first:
        return "handwritten"
    if "qid" in first and "question" in first and ("start" in first or "relevant" in first):
        return "goldenset"
    raise InputError(
        f"{path}:1: not a known question set: expected question + doc_id + evidence (hand-written), "
        f"user_input + reference_contexts (ragas), input + context (DeepEval) or this project's golden set; fields found: {', '.join(first) or 'none'}"
    )


def _is_deepeval_list(path: Path) -> bool:
    """Whether a .json file is a list of DeepEval goldens (its first has an `input`); anything
    else is read as a LlamaIndex dataset, whose reader says what is wrong with it."""
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError:
        return False
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "input" in data[0]


def _context_list(value: object, where: str) -> list[str]:
    """ragas' reference_contexts: a list, or in CSV its JSON or Python-literal text."""
    if isinstance(value, str):
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(value)
                break
            except (ValueError, SyntaxError):
                continue
    if not isinstance(value, list) or not all(isinstance(text, str) for text in value):
        raise InputError(f"{where}: reference_contexts must be a list of texts")
    return [text for text in value if text.strip()]


def read_ragas(path: Path) -> list[dict]:
    if path.suffix.lower() == ".csv":
        records = list(csv.DictReader(read_text_lines(path)))
        numbered = [(f"{path}:{i + 2}", record) for i, record in enumerate(records)]  # line 1 is the header
    else:
        numbered = [(f"{path}: record {i + 1}", record) for i, record in enumerate(read_jsonl(path))]
    questions = []
    for where, record in numbered:
        missing = [field for field in RAGAS_FIELDS if field not in record]
        if missing:
            raise InputError(f"{where}: a ragas testset record needs {' and '.join(missing)}")
        question = str(record["user_input"]).strip()
        contexts = _context_list(record["reference_contexts"], where)
        extra = {k: v for k, v in record.items() if k not in (*RAGAS_FIELDS, "qid")}
        qid = str(record.get("qid") or record.get("id") or hashed_qid(question, contexts[0] if contexts else ""))
        questions.append({"qid": qid, "question": question, "evidence": contexts, "extra": extra})
    return questions


def read_llamaindex(path: Path) -> list[dict]:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise InputError(f"{path}:{error.lineno}: invalid JSON ({error.msg})") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(key), dict) for key in LLAMAINDEX_FIELDS):
        found = f"keys found: {quoted(list(data), 200)}" if isinstance(data, dict) else f"got {json_kind(data)}"
        raise InputError(
            f"{path}: not a known question set: a .json question set is a LlamaIndex EmbeddingQAFinetuneDataset, "
            f"an object whose {', '.join(LLAMAINDEX_FIELDS)} are mappings; {found}"
        )
    questions = []
    for qid, question in data["queries"].items():
        node_ids = data["relevant_docs"].get(qid) or []
        unknown = [node for node in node_ids if node not in data["corpus"]]
        if unknown:
            raise InputError(f"{path}: relevant_docs[{qid!r}] names {unknown[0]!r}, which is not in corpus")
        questions.append(
            {
                "qid": str(qid),
                "question": str(question),
                "evidence": [data["corpus"][node] for node in node_ids],
                "node_ids": list(node_ids),
                "extra": {},
            }
        )
    return questions


def _deepeval_records(path: Path) -> list[tuple[str, object]]:
    """(where, record) of DeepEval goldens: a JSON list (EvaluationDataset.save_as) or JSONL."""
    if path.suffix.lower() == ".jsonl":
        return [(f"{path}:{line}", record) for line, record in numbered_jsonl(path)]
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise InputError(f"{path}:{error.lineno}: invalid JSON ({error.msg})") from None
    if not isinstance(data, list):
        raise InputError(f"{path}: DeepEval goldens are a JSON list of objects, got {json_kind(data)}")
    return [(f"{path}: golden {i + 1}", record) for i, record in enumerate(data)]


def read_deepeval(path: Path) -> list[dict]:
    """DeepEval goldens: input (the question), context (its evidence texts); expected_output,
    source_file and any other field are kept as-is."""
    questions = []
    for where, record in _deepeval_records(path):
        if not isinstance(record, dict) or not isinstance(record.get("input"), str):
            raise InputError(f"{where}: a DeepEval golden needs an `input` text")
        contexts = record.get("context") or []
        if not isinstance(contexts, list) or not all(isinstance(text, str) for text in contexts):
            raise InputError(f"{where}: a DeepEval golden's `context` must be a list of texts")
        contexts = [text for text in contexts if text.strip()]
        question = record["input"].strip()
        extra = {k: v for k, v in record.items() if k not in ("input", "context", "qid")}
        qid = str(record.get("qid") or hashed_qid(question, contexts[0] if contexts else ""))
        questions.append({"qid": qid, "question": question, "evidence": contexts, "extra": extra})
    return questions


def read_question_set(path: str | Path, split: str = "test") -> tuple[str, list[dict]]:
    """(format, questions) for the question set at `path`."""
    from retrieval_bench.corpus.load import read_qrels, read_queries

    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    check_regular(path, folder_ok=True)
    kind = detect_format(path)
    if kind == "ragas":
        return kind, read_ragas(path)
    if kind == "llamaindex":
        return kind, read_llamaindex(path)
    if kind == "deepeval":
        return kind, read_deepeval(path)
    if kind == "beir":
        queries = read_queries(path / "queries.jsonl")
        qrels_path = path / "qrels" / f"{split}.tsv"
        if not qrels_path.is_file():
            raise InputError(f"{qrels_path}: not found (the BEIR folder's judgements for split {split!r})")
        relevant: dict[str, dict[str, int]] = {}
        for qid, chunk_id, grade in read_qrels(qrels_path):
            relevant.setdefault(qid, {})[chunk_id] = grade
        return kind, [
            {"qid": q, "question": queries[q], "evidence": [], "relevant": r, "extra": {}}
            for q, r in relevant.items()
            if q in queries
        ]
    rows = read_jsonl(path)
    if kind == "goldenset":
        return kind, [{**row, "evidence": []} for row in rows]
    questions = []
    for number, row in enumerate(rows, 1):
        if not isinstance(row.get("question"), str) or not isinstance(row.get("evidence"), str):
            raise InputError(f"{path}: record {number} needs a question and an evidence text")
        questions.append(
            {
                # No qid given: None here; the golden set derives one from document and question.
                "qid": None if row.get("qid") is None else str(row["qid"]),
                "question": row["question"],
                "doc_id": row.get("doc_id"),
                "evidence": [row["evidence"]],
                "extra": {k: v for k, v in row.items() if k not in ("qid", "question", "doc_id", "evidence")},
            }
        )
    return kind, questions
