"""The review sample as Label Studio tasks, and a Label Studio export read back as clicks.

Export: Label Studio's JSON import format, a list of tasks `{"data": {...}}` (labelstud.io/guide/tasks),
one per sampled question: its `question`, its `evidence` as HTML with each span in <mark>, and its
pooled chunks in slots `chunk_1` .. `chunk_M` (M: the most any question has; a question with fewer
leaves the rest empty) with the chunk ids each slot stands for in `chunk_ids_1` ..; beside it, the
labeling config (<file>.xml: a Choices `mark` on the question, a Choices `grade_i` 0-3 on each slot).

Import: Label Studio's JSON export (labelstud.io/guide/export#JSON), the same tasks with
`annotations: [{"result": [{"from_name": ..., "type": "choices", "value": {"choices": [...]}}], ...}]`;
cancelled annotations are skipped, the others are read oldest first (by `updated_at`, else their
order), so the last one wins as on the page.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from retrieval_bench.core.errors import InputError, json_kind, quoted
from retrieval_bench.core.files import atomic_open, parse_json, read_text
from retrieval_bench.goldenset.reviews import GRADES, MARK_LABELS, QUESTION_MARKS, grade_click, question_click

MARK_CONTROL, GRADE_CONTROL, CHUNK_SLOT = "mark", "grade_", "chunk_"


def export_tasks(items: list[dict[str, Any]], path: Path) -> Path:
    """Write the tasks to `path` and the labeling config beside it (`path` with .xml); the config's path.
    A `path` that is a folder, or ends in .xml (the config would overwrite the tasks), is an InputError."""
    if path.suffix.lower() == ".xml" or path.is_dir():
        what = "a folder" if path.is_dir() else "an .xml file (the labeling config goes to FILE with .xml)"
        raise InputError(f"--export label-studio {path}: {what}; expected a .json file for the tasks")
    slots = max((len(item["chunks"]) for item in items), default=0)
    tasks = []
    for item in items:
        data: dict[str, Any] = {
            "qid": item["qid"],
            "question": item["question"],
            "question_set": item["question_set"],
            "kind": item["kind"],
            "evidence": evidence_html(item["evidence"]),
        }
        for slot in range(1, slots + 1):
            card = item["chunks"][slot - 1] if slot <= len(item["chunks"]) else {"text": "", "chunk_ids": []}
            data[f"{CHUNK_SLOT}{slot}"], data[f"chunk_ids_{slot}"] = card["text"], card["chunk_ids"]
        tasks.append({"data": data})
    config = path.with_suffix(".xml")
    with atomic_open(path) as handle:
        json.dump(tasks, handle, ensure_ascii=False, indent=1)
    with atomic_open(config) as handle:
        handle.write(labeling_config(slots))
    return config


def evidence_html(passages: list[dict[str, str]]) -> str:
    if not passages:
        return "<p><i>no evidence: the corpus should not answer this question</i></p>"
    return "".join(
        f"<p><small>{html.escape(p['doc_id'])}</small><br>{html.escape(p['before'])}"
        f"<mark>{html.escape(p['span'])}</mark>{html.escape(p['after'])}</p>"
        for p in passages
    )


def labeling_config(slots: int) -> str:
    """The labeling config: the question and its mark, the evidence, then each chunk slot and its grade."""
    marks = "".join(f'<Choice value="{html.escape(MARK_LABELS[mark])}" alias="{mark}"/>' for mark in QUESTION_MARKS)
    lines = [
        "<View>",
        '  <Header value="Question"/>',
        '  <Text name="question" value="$question"/>',
        f'  <Choices name="{MARK_CONTROL}" toName="question" choice="single" showInline="true" required="true">'
        f"{marks}</Choices>",
        '  <Header value="Evidence"/>',
        '  <HyperText name="evidence" value="$evidence"/>',
        '  <Header value="Retrieved chunks: grade each 0 unrelated, 1 related, 2 answers in part, 3 answers it"/>',
    ]
    grades = "".join(f'<Choice value="{grade}"/>' for grade in GRADES)
    for slot in range(1, slots + 1):
        lines += [
            f'  <Text name="{CHUNK_SLOT}{slot}" value="${CHUNK_SLOT}{slot}"/>',
            f'  <Choices name="{GRADE_CONTROL}{slot}" toName="{CHUNK_SLOT}{slot}" choice="single" showInline="true">'
            f"{grades}</Choices>",
        ]
    return "\n".join([*lines, "</View>"]) + "\n"


def import_clicks(path: Path, reviewer: str, known_qids: set[str]) -> list[dict[str, Any]]:
    """The clicks a Label Studio JSON export holds, every one checked before any is written; a task
    or result that is not what the export format and the config say is one InputError naming it."""
    text = read_text(path)
    try:
        tasks = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(
            f"{path}: invalid JSON ({error.msg}, line {error.lineno}); expected a Label Studio JSON export"
        ) from None
    except RecursionError:
        tasks = parse_json(text, path)  # raises: names the line and the depth
    if not isinstance(tasks, list):
        raise InputError(f"{path}: expected a Label Studio JSON export (a list of tasks), got {type(tasks).__name__}")
    clicks = []
    for number, task in enumerate(tasks, 1):
        where = f"{path}: task {number}"
        data = task.get("data") if isinstance(task, dict) else None
        if not isinstance(data, dict) or not isinstance(data.get("qid"), str):
            raise InputError(f"{where}: no data.qid; expected a task exported by `retrieval-bench review --export`")
        if data["qid"] not in known_qids:
            raise InputError(
                f"{where}: question {quoted(data['qid'])} is not in the review sample (review.sample, review.seed): "
                "the prediction-powered figures take what is reviewed as that random sample"
            )
        where = f"{path}: task {number} ({data['qid']})"
        given = task.get("annotations") or []
        if not isinstance(given, list) or not all(isinstance(a, dict) for a in given):
            raise InputError(f"{where}: annotations must be a list of annotation objects, got {json_kind(given)}")
        for annotation in given:
            if not isinstance(annotation.get("result") or [], list):
                raise InputError(
                    f"{where}: an annotation's result must be a list, got {json_kind(annotation['result'])}"
                )
        annotations = [a for a in given if not a.get("was_cancelled")]
        annotations.sort(key=lambda a: str(a.get("updated_at") or a.get("created_at") or ""))
        for annotation in annotations:
            for result in annotation.get("result") or []:
                clicks += _result_clicks(result, data, reviewer, where)
    return clicks


def _result_clicks(result: Any, data: dict[str, Any], reviewer: str, where: str) -> list[dict[str, Any]]:
    name = result.get("from_name") if isinstance(result, dict) else None
    value = result.get("value") if isinstance(result, dict) else None
    choices = value.get("choices") if isinstance(value, dict) else None
    if not isinstance(choices, list) or len(choices) != 1:
        raise InputError(f"{where}: result {quoted(name)}: expected a single choice in value.choices")
    choice = str(choices[0])
    qid = data["qid"]
    if name == MARK_CONTROL:
        mark = next((m for m in QUESTION_MARKS if choice in (m, MARK_LABELS[m])), None)
        if mark is None:
            raise InputError(f"{where}: mark {quoted(choice)}: expected one of {', '.join(QUESTION_MARKS)}")
        return [question_click(reviewer, qid, mark)]
    slot = str(name).removeprefix(GRADE_CONTROL)
    if not (isinstance(name, str) and name.startswith(GRADE_CONTROL) and slot.isdigit()):
        raise InputError(f"{where}: result {quoted(name)}: expected {MARK_CONTROL} or {GRADE_CONTROL}N")
    if choice not in {str(grade) for grade in GRADES}:
        raise InputError(f"{where}: {name} {quoted(choice)}: expected a grade 0, 1, 2 or 3 (the UMBRELA scale)")
    chunk_ids = data.get(f"chunk_ids_{slot}")
    if not isinstance(chunk_ids, list) or not chunk_ids:
        raise InputError(f"{where}: {name} grades an empty chunk slot (no data.chunk_ids_{slot})")
    return [grade_click(reviewer, qid, str(chunk_id), int(choice)) for chunk_id in chunk_ids]
