"""The systems teams run: score a run produced elsewhere, or call the user's own client code.

- `run-file`: `retrieval.run_file` names a TREC run or JSONL (qid, chunk_id, score) written by
  any external system (a vector database, a search service) for the golden set's questions
  (`retrieval-bench export-questions` writes them in the formats such systems take).
- `python`: `retrieval.python` names `module:function`; the function gets the questions as a list
  of {"qid", "question"} and the depth, and returns (qid, chunk_id, score) triples or
  {qid: [(chunk_id, score), ...]}. The module is imported from the project root.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError, first_line, quoted
from retrieval_bench.core.files import atomic_open, check_not_an_input, numbered_jsonl
from retrieval_bench.core.run_table import check_run, from_records, read_run_file
from retrieval_bench.core.values import checked_id, finite_score
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings


def retrieve_run_file(
    questions: Questions, corpus: Corpus, settings: RetrievalSettings, depth: int, progress=None
) -> pd.DataFrame:
    key = settings.where
    if not settings.run_file:
        raise InputError(f"{key}.method run-file needs {key}.run_file: the path of a TREC run or JSONL")
    run = read_run_file(settings.run_file, depth, where=f"{key}.run_file")
    return check_run(run, questions.qids, set(corpus.chunk_ids), settings.run_file)


def retrieve_python(
    questions: Questions, corpus: Corpus, settings: RetrievalSettings, depth: int, progress=None
) -> pd.DataFrame:
    target = settings.python or ""
    module_name, _, function_name = target.partition(":")
    if not module_name or not function_name:
        raise InputError(f"{settings.where}.python must be 'module:function', got {target!r}")
    where = f"{settings.where}.python {target}"
    sys.path.insert(0, str(Path.cwd()))
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (
        Exception,
        SystemExit,
    ) as error:  # the user's module: a syntax error, anything its import raises or exits with
        raise InputError(f"{where}: cannot import it ({type(error).__name__}: {first_line(error)})") from None
    finally:
        sys.path.pop(0)
    asked = [{"qid": q, "question": t} for q, t in zip(questions.qids, questions.texts, strict=True)]
    run = from_records(_plugin_records(lambda: function(asked, depth), where), depth, where)
    return check_run(run, questions.qids, set(corpus.chunk_ids), where)


PLUGIN_SHAPES = (
    "(qid, chunk_id, score) triples, {qid: [(chunk_id, score), ...]} or a DataFrame with columns qid, chunk_id, score"
)


def _plugin_records(call, where: str) -> list[tuple[str, str, float]]:
    """The (qid, chunk_id, score) triples of the user's function, checked row by row: anything it
    raises (sys.exit included) or returns in another shape is an InputError naming `where`."""
    try:
        result = call()
        if isinstance(result, pd.DataFrame):
            missing = [c for c in ("qid", "chunk_id", "score") if c not in result.columns]
            if missing:
                raise InputError(
                    f"{where}: returned a DataFrame without column {', '.join(missing)} "
                    f"(columns: {quoted(list(result.columns))}); expected {PLUGIN_SHAPES}"
                )
            rows = list(zip(result["qid"], result["chunk_id"], result["score"], strict=True))
        elif isinstance(result, dict):
            rows = [(qid, *_pair(hit, where, qid)) for qid, hits in result.items() for hit in _hits(hits, where, qid)]
        elif isinstance(result, Iterable) and not isinstance(result, (str, bytes)):
            rows = list(result)
        else:
            raise InputError(f"{where}: returned {quoted(result)} ({type(result).__name__}); expected {PLUGIN_SHAPES}")
    except InputError:
        raise
    except SystemExit as stop:  # exit 0 here would end the stage "successfully" with no run written
        raise InputError(f"{where}: called sys.exit({stop.code!r}) instead of returning a run") from None
    except Exception as error:
        raise InputError(f"{where}: raised {type(error).__name__}: {first_line(error)}") from None
    return [_record(row, where, number) for number, row in enumerate(rows, 1)]


def _hits(hits: object, where: str, qid: object) -> list:
    if isinstance(hits, (str, bytes, dict)) or not isinstance(hits, Iterable):
        raise InputError(
            f"{where}: question {quoted(qid)} maps to {quoted(hits)}; expected a list of (chunk_id, score) pairs"
        )
    return list(hits)


def _pair(hit: object, where: str, qid: object) -> tuple:
    if not isinstance(hit, (tuple, list)) or len(hit) != 2:
        raise InputError(f"{where}: question {quoted(qid)} has hit {quoted(hit)}; expected a (chunk_id, score) pair")
    return tuple(hit)


def _record(row: object, where: str, number: int) -> tuple[str, str, float]:
    """One (qid, chunk_id, score) row: ids are strings or integers, the score a finite number."""
    at = f"{where}: row {number}"
    if not isinstance(row, (tuple, list)) or len(row) != 3:
        raise InputError(f"{at} is {quoted(row)}; expected a (qid, chunk_id, score) triple")
    qid, chunk_id, raw_score = row
    score = finite_score(raw_score)
    if score is None:
        raise InputError(f"{at}: score must be a finite number, got {quoted(raw_score)}")
    return checked_id(qid, at, "qid"), checked_id(chunk_id, at, "chunk_id"), score


def export_questions(golden: list[dict], out: str | Path) -> int:
    """The golden set's questions for an external system: JSONL ({"qid", "question"}), TSV (qid,
    question) or, for a file named queries.jsonl, BEIR's ({"_id", "text"})."""
    out = Path(out)
    with atomic_open(out) as handle:
        for row in golden:
            if out.suffix.lower() == ".tsv":
                handle.write(f"{row['qid']}\t{' '.join(row['question'].split())}\n")
            elif out.name == "queries.jsonl":
                handle.write(json.dumps({"_id": row["qid"], "text": row["question"]}, ensure_ascii=False) + "\n")
            else:
                handle.write(json.dumps({"qid": row["qid"], "question": row["question"]}, ensure_ascii=False) + "\n")
    return len(golden)


def add_export_arguments(parser) -> None:
    parser.description = (
        "Write the golden set's questions for an external system to run (then retrieval.method: run-file)."
    )
    parser.add_argument(
        "out",
        nargs="?",
        default=paths.EXPORTED_QUESTIONS,
        help="a .jsonl, .tsv or queries.jsonl (BEIR) file (default: %(default)s)",
    )
    parser.add_argument("--goldenset", default=paths.GOLDENSET, help="golden set (default: %(default)s)")
    parser.set_defaults(run=_run_export)


def _run_export(args) -> int:
    if not Path(args.goldenset).exists():  # a folder or a FIFO: numbered_jsonl's check says which
        raise InputError(f"{args.goldenset}: not found; run `dvc repro` first")
    if Path(args.out).suffix.lower() not in (".jsonl", ".tsv"):
        raise InputError(f"{args.out}: expected a .jsonl, .tsv or queries.jsonl (BEIR) file to write")
    check_not_an_input(args.out, "OUT", {"--goldenset": args.goldenset})
    golden = []
    for line, row in numbered_jsonl(args.goldenset):
        if not isinstance(row.get("qid"), (str, int)) or not isinstance(row.get("question"), str):
            raise InputError(
                f"{args.goldenset}:{line}: no qid and question; export-questions --goldenset expects a golden set as "
                "generate_goldenset writes it (data/goldenset.jsonl)"
            )
        golden.append(row)
    if not golden:  # as gauge refuses it: an empty file for an external system to run is a mistake
        raise InputError(f"{args.goldenset}: empty; a golden set holds at least one question")
    written = export_questions(golden, args.out)
    print(f"wrote {written} questions to {args.out}")
    return 0
