"""Question sets made by other tools (generate.imported: {NAME: FILE}) as named question sets of
the golden set, so that generators, prompts or models sit side by side with the reference.

A set is a ragas testset, DeepEval goldens, a Giskard testset, a LlamaIndex dataset, hand-written
JSONL with evidence or a BEIR folder (goldenset.formats); each keeps its questions' kinds (a ragas
or DeepEval question with several contexts is multi-evidence, a Giskard out-of-scope one
unanswerable). Its questions are located in the documents as hand-written
ones are (evidence span -> gold chunk; a BEIR set's judged ids must be document ids of this
corpus), pass the same hygiene and echo gauge (goldenset.assemble), are never sent to the LLM and
do not count against generate.max_questions. Each row says `question_set: NAME`, keeps the tool's
provenance as its `source` (ragas, deepeval, llamaindex, hand-written, qrels) and its own fields
(a clashing one as own_<field>); its qid is NAME:<its own qid>, and a qid another set's row
also has is refused (goldenset.assemble.check_unique_qids).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from retrieval_bench.core.errors import InputError, describe_os_error
from retrieval_bench.goldenset.build import (
    EVIDENCE_FORMATS,
    Hygiene,
    deduplicate,
    drop_unhygienic,
    evidence_records,
    handwritten_rows,
    label_rows,
)
from retrieval_bench.goldenset.formats import read_question_set


@dataclass
class ImportedSet:
    name: str
    file: str
    kind: str  # the format read (goldenset.formats.detect_format)
    questions: list[dict]  # as read_question_set gives them


def read_imported(imported: dict[str, str]) -> list[ImportedSet]:
    """Every set generate.imported names, read in name order; a missing, unreadable or unknown
    file is one InputError naming generate.imported.NAME and the path."""
    sets = []
    for name, file in sorted(imported.items()):
        where = f"generate.imported.{name}"
        if not Path(file).exists():
            raise InputError(f"{where}: {file}: no such file or folder")
        try:
            kind, questions = read_question_set(file)
        except InputError as error:
            raise InputError(f"{where}: {error}") from None
        except OSError as error:
            raise InputError(f"{where}: {file} cannot be read ({describe_os_error(error)})") from None
        if kind not in (*EVIDENCE_FORMATS, "beir"):
            raise InputError(
                f"{where}: {file} is a {kind} set; an imported set is a ragas testset, DeepEval goldens, "
                "a Giskard testset, a LlamaIndex dataset, hand-written JSONL with evidence or a BEIR folder"
            )
        if not questions:
            raise InputError(f"{where}: {file} holds no question")
        sets.append(ImportedSet(name, file, kind, questions))
    return sets


def judged_rows(questions: list[dict], texts: dict[str, str]) -> tuple[list[dict], dict[str, int]]:
    """Golden rows of a BEIR set's judged queries, graded and multi-relevant as real labels are
    (build.label_rows), over the documents of this corpus its qrels name (with ready chunks each
    chunk is its own document); relevant_spans: each judged document whole."""
    rows, counts = [], {"other_corpus": 0, "not_located": 0, "relevant_elsewhere": 0, "no_relevant": 0}
    for question in questions:
        if not any(grade > 0 for grade in question["relevant"].values()):  # judged, found relevant nowhere
            counts["no_relevant"] += 1
            continue
        grades = {doc_id: grade for doc_id, grade in question["relevant"].items() if doc_id in texts}
        if not any(grade > 0 for grade in grades.values()):
            counts["other_corpus"] += 1
            continue
        # a kept question's relevant documents this corpus lacks leave its recall's denominator: said
        counts["relevant_elsewhere"] += sum(
            grade > 0 and doc_id not in texts for doc_id, grade in question["relevant"].items()
        )
        spans = [[doc_id, 0, len(texts[doc_id]), grade] for doc_id, grade in grades.items()]
        label = {"qid": question["qid"], "question": question["question"], "relevant": grades, "relevant_spans": spans}
        rows.extend(label_rows([label]))
    return rows, counts


def imported_rows(
    imported: ImportedSet, documents: pd.DataFrame, passages: pd.DataFrame, hygiene: Hygiene
) -> tuple[list[dict], list[dict], dict[str, int]]:
    """(rows, rejects, counts) of one imported set: its questions found in this corpus, without
    repeated questions and those hygiene drops (within the set only: two sets may ask alike)."""
    if imported.kind == "beir":
        texts = dict(zip(documents["doc_id"], documents["text"], strict=True))
        rows, counts = judged_rows(imported.questions, texts)
    else:
        rows, counts = handwritten_rows(evidence_records(imported.kind, imported.questions), documents, passages)
    if imported.questions and not rows:  # a set that adds nothing is a mistake, not an empty comparison
        hint = (
            " (a BEIR set names document ids; an `export-beir` folder names chunk ids: read it back as load.source)"
            if imported.kind == "beir"
            else ""
        )
        raise InputError(
            f"generate.imported.{imported.name}: {imported.file}: none of its {len(imported.questions)} questions is in "
            f"this corpus: {counts['other_corpus']} are for documents it lacks, {counts['not_located']} could not be "
            f"located{_no_relevant(counts)}{hint}"
        )
    for row in rows:
        row["qid"] = f"{imported.name}:{row['qid']}"
        row["question_set"] = imported.name
    rows, counts["duplicate_questions_dropped"] = deduplicate(rows)
    rows, rejects = drop_unhygienic(rows, hygiene)
    for reject in rejects:
        reject["question_set"] = imported.name
    return rows, rejects, counts


def plan_line(imported: ImportedSet) -> str:
    """What the golden set takes from one imported set."""
    return (
        f"question set {imported.name}: {len(imported.questions)} questions from {imported.file} ({imported.kind}); "
        "located in the documents, never sent to the LLM, not counted in generate.max_questions"
    )


def found_line(name: str, rows: list[dict], counts: dict[str, int]) -> str:
    """How many of an imported set's questions the golden set holds, and why the others are out."""
    elsewhere = counts.get("relevant_elsewhere", 0)
    partial = (
        f"; {elsewhere} relevant documents of the questions kept are not in this corpus (dropped from their judgements)"
        if elsewhere
        else ""
    )
    return (
        f"question set {name}: {len(rows)} questions; {counts['other_corpus']} are for documents not in this corpus, "
        f"{counts['not_located']} could not be located{_no_relevant(counts)}, {counts['duplicate_questions_dropped']} "
        f"repeated{partial}"
    )


def _no_relevant(counts: dict[str, int]) -> str:
    """The questions a BEIR set judged with no grade above 0 (nothing relevant to find), if any."""
    n = counts.get("no_relevant", 0)
    return f", {n} have no judgement above grade 0 (nothing relevant to find)" if n else ""
