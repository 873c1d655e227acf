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
from pathlib import Path

import pandas as pd

from retrieval_bench import paths
from retrieval_bench.io import InputError, atomic_open, read_jsonl
from retrieval_bench.retrieval.run import check_run, from_records, read_run_file


def retrieve_run_file(questions, corpus, settings: dict, depth: int, progress=None) -> pd.DataFrame:
    if not settings["run_file"]:
        raise InputError("retrieval.method run-file needs retrieval.run_file: the path of a TREC run or JSONL")
    run = read_run_file(settings["run_file"], depth)
    check_run(run, questions.qids, set(corpus.chunk_ids), settings["run_file"])
    return run[run["qid"].isin(set(questions.qids))].reset_index(drop=True)


def retrieve_python(questions, corpus, settings: dict, depth: int, progress=None) -> pd.DataFrame:
    target = settings["python"] or ""
    module_name, _, function_name = target.partition(":")
    if not module_name or not function_name:
        raise InputError(f"retrieval.python must be 'module:function', got {target!r}")
    sys.path.insert(0, str(Path.cwd()))
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as error:
        raise InputError(f"retrieval.python {target}: cannot import it ({error})") from None
    finally:
        sys.path.pop(0)
    result = function([{"qid": q, "question": t} for q, t in zip(questions.qids, questions.texts)], depth)
    if isinstance(result, dict):
        result = [(qid, chunk_id, score) for qid, hits in result.items() for chunk_id, score in hits]
    run = from_records(result, depth)
    check_run(run, questions.qids, set(corpus.chunk_ids), f"retrieval.python {target}")
    return run


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
    parser.description = "Write the golden set's questions for an external system to run (then retrieval.method: run-file)."
    parser.add_argument("out", nargs="?", default=paths.EXPORTED_QUESTIONS, help="a .jsonl, .tsv or queries.jsonl (BEIR) file (default: %(default)s)")
    parser.add_argument("--goldenset", default=paths.GOLDENSET, help="golden set (default: %(default)s)")
    parser.set_defaults(run=_run_export)


def _run_export(args) -> int:
    if not Path(args.goldenset).is_file():
        raise InputError(f"{args.goldenset}: not found; run `dvc repro` first")
    written = export_questions(read_jsonl(args.goldenset), args.out)
    print(f"wrote {written} questions to {args.out}")
    return 0
