"""People's reviews of the golden set: one append-only JSON Lines file per reviewer in
core.paths.REVIEWS (`<reviewer>.jsonl`), one line per click, so a closed tab or a killed server loses
nothing; each file is tracked by DVC on its own (`<reviewer>.jsonl.dvc`, review.tracking), so a
teammate's comes with `dvc pull` and two reviewers' never conflict in a merge.

A line is a question mark or a chunk grade:

    {"type": "question", "qid": "q1", "mark": "fine", "reviewer": "ana", "at": "2026-12-05T10:00:00Z"}
    {"type": "grade", "qid": "q1", "chunk_id": "a.md:0-800", "grade": 2, "reviewer": "ana", "at": "..."}

A reviewer may change their mind: the last click on the same question (or the same question and
chunk) wins. Grades are the UMBRELA scale the LLM judge uses (0 unrelated .. 3 answers it).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Collection

import pandas as pd

from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.files import atomic_open, end_last_line, fsync_folder, parse_json, read_text_lines
from retrieval_bench.core.question_sets import kind_of, question_set_of

# What a reviewer can say of a question; `fine` keeps it, every other mark takes it out of scoring.
QUESTION_MARKS = ("fine", "ambiguous", "not_answerable", "gives_away", "not_real")
MARK_LABELS = {
    "fine": "fine",
    "ambiguous": "ambiguous",
    "not_answerable": "not answerable from its evidence",
    "gives_away": "gives the answer away",
    "not_real": "not a real user's question",
}
GRADES = (0, 1, 2, 3)
# A file-safe word: the reviewer's name is a file name on every OS and in a DVC remote.
REVIEWER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
QUESTION_COLUMNS = ["reviewer", "qid", "mark", "at"]
GRADE_COLUMNS = ["reviewer", "qid", "chunk_id", "grade", "at"]


@dataclass(frozen=True)
class Reviews:
    """Every reviewer's last word: one row per (reviewer, qid) in `questions`, one per
    (reviewer, qid, chunk_id) in `grades`."""

    questions: pd.DataFrame
    grades: pd.DataFrame
    n_unknown: int = 0  # clicks left out: on questions no longer in the golden set (golden_reviews)

    @property
    def reviewers(self) -> list[str]:
        return sorted(set(self.questions["reviewer"]) | set(self.grades["reviewer"]))

    def rejected(self) -> pd.DataFrame:
        """(qid, mark) of questions some reviewer marked other than fine (the first such mark by
        reviewer name, so the choice does not depend on file order)."""
        marked = self.questions[self.questions["mark"] != "fine"].sort_values(["qid", "reviewer"])
        return marked.drop_duplicates("qid")[["qid", "mark"]].reset_index(drop=True)


def rejections(golden: Sequence[Mapping[str, Any]], reviews: Reviews) -> dict:
    """{n_reviewed, n_rejected, by_reason, by_set: {set: {kind: {n_reviewed, n_rejected,
    rejection_rate, by_reason}}}}: a question is reviewed when a reviewer marked it, rejected when
    one marked it other than fine (Reviews.rejected); the rate is each generator's measured quality."""
    marks = reviews.rejected()
    rejected = dict(zip(marks["qid"], marks["mark"], strict=True))
    marked = set(reviews.questions["qid"])
    by_reason = dict.fromkeys(QUESTION_MARKS[1:], 0)
    by_set: dict[str, dict[str, dict]] = {}
    for row in golden:
        qid = str(row["qid"])
        if qid not in marked:
            continue
        cell = by_set.setdefault(question_set_of(row), {}).setdefault(
            kind_of(row), {"n_reviewed": 0, "n_rejected": 0, "by_reason": dict.fromkeys(QUESTION_MARKS[1:], 0)}
        )
        cell["n_reviewed"] += 1
        if qid in rejected:
            cell["n_rejected"] += 1
            cell["by_reason"][rejected[qid]] += 1
            by_reason[rejected[qid]] += 1
    for kinds in by_set.values():
        for cell in kinds.values():
            cell["rejection_rate"] = round(cell["n_rejected"] / cell["n_reviewed"], 4)
    return {"n_reviewed": len(marked), "n_rejected": len(rejected), "by_reason": by_reason, "by_set": by_set}


def review_report(folder: str | Path, golden: Sequence[Mapping[str, Any]]) -> dict:
    """What metrics/goldenset.json says of people's reviews in `folder` (golden_reviews): {"reviews":
    rejections(...)} once a reviewer marked a question, else {}."""
    rejected = rejections(golden, golden_reviews(folder, {str(row["qid"]) for row in golden}))
    return {"reviews": rejected} if rejected["n_reviewed"] else {}


def check_reviewer(name: str) -> str:
    """`name` if it is a file-safe word, else an InputError saying what is expected."""
    if not REVIEWER_NAME.fullmatch(name or ""):
        raise InputError(
            f"reviewer {quoted(name)}: expected a file-safe word (letters, digits, _ or -, at most 64, "
            "starting with a letter or digit)"
        )
    return name


def reviews_path(folder: str | Path, reviewer: str) -> Path:
    return Path(folder) / f"{check_reviewer(reviewer)}.jsonl"


def question_click(reviewer: str, qid: str, mark: str) -> dict[str, Any]:
    return {"type": "question", "qid": qid, "mark": mark, "reviewer": reviewer, "at": _now()}


def grade_click(reviewer: str, qid: str, chunk_id: str, grade: int) -> dict[str, Any]:
    return {"type": "grade", "qid": qid, "chunk_id": chunk_id, "grade": grade, "reviewer": reviewer, "at": _now()}


def append_clicks(
    folder: str | Path,
    clicks: Sequence[dict[str, Any]],
    known_qids: Collection[str] | None = None,
    known_as: str = "golden set",
) -> None:
    """Check every click (its question among `known_qids`, named `known_as` in the error) and append
    them to their reviewer's file in one write, flushed to disk before returning: what the page
    acknowledged survives a crash, and a grade of a card of copies (one line per chunk id) or an
    import lands whole or not at all. A write that fails (a full disk) is cut back off the file."""
    if not clicks:
        return
    path = reviews_path(folder, str(clicks[0].get("reviewer", "")))
    for click in clicks:
        if reviews_path(folder, str(click.get("reviewer", ""))) != path:
            raise InputError(f"{path}: one append holds clicks of two reviewers")
        _check_click(click, known_qids, f"{path} (new click)", known_as)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(click, ensure_ascii=False, separators=(",", ":")) + "\n" for click in clicks)
    with _APPENDING:  # the page's server answers each request in a thread
        _own_copy(path)
        created = not path.exists()
        with open(path, "a+b", buffering=0) as handle:  # unbuffered: each write is one system call
            end_last_line(handle)
            start = handle.seek(0, os.SEEK_END)
            try:
                left = memoryview(data.encode("utf-8"))
                while left:
                    left = left[handle.write(left) :]
                os.fsync(handle.fileno())
            except OSError:
                handle.truncate(start)  # the part written would be read as clicks made
                raise
        if created:  # the new file's name reaches the disk too, before the clicks are acknowledged
            fsync_folder(path.parent)


_APPENDING = threading.Lock()


def _own_copy(path: Path) -> None:
    """Where DVC left the tracked file `path` as a link into its cache (cache.type symlink or
    hardlink, after `dvc pull`, `dvc add` or `dvc repro`), replace it by a plain copy of itself, so
    an append never writes into the version in the cache that teammates pull (what `dvc unprotect`
    does, without DVC). A plain file, DVC's default, or a file DVC does not track is left as it is."""
    if not Path(f"{path}.dvc").is_file():
        return
    if path.is_symlink() and not path.exists():
        raise InputError(f"{path}: a link to a DVC cache file that is gone: run `dvc checkout {path}.dvc`")
    if not path.is_symlink() and not (path.exists() and path.stat().st_nlink > 1):
        return
    with atomic_open(path, "wb") as copy:
        copy.write(path.read_bytes())
    fsync_folder(path.parent)  # the rename reaches the disk before the click is acknowledged


def golden_reviews(
    folder: str | Path, golden_qids: Collection[str], held_chunks: Callable[[], Collection[str]] | None = None
) -> Reviews:
    """The reviews the pipeline scores with: as read_reviews, but a click on a question the golden
    set no longer holds (regenerated since the review) is left out with one warning on stderr, so
    a new golden set does not stop `dvc repro` on append-only files. With `held_chunks` (the chunk
    ids of every chunking scored, asked only when there are grades), grades on chunks none holds
    (re-chunked since the review) get one warning too: the judged view cannot use them."""
    reviews = read_reviews(folder, golden_qids, drop_unknown=True)
    if reviews.n_unknown:
        print(
            f"warning: {folder}: {reviews.n_unknown} clicks on questions no longer in the golden set are left out",
            file=sys.stderr,
        )
    if held_chunks is not None and len(reviews.grades):
        unheld = int((~reviews.grades["chunk_id"].isin(set(held_chunks()))).sum())
        if unheld:
            print(
                f"warning: {folder}: {unheld} of {len(reviews.grades)} chunk grades name chunks no chunking holds "
                "(re-chunked since the review?): the judged view leaves them out; grade the new chunks with "
                "`retrieval-bench review`",
                file=sys.stderr,
            )
    return reviews


def read_reviews(folder: str | Path, known_qids: Collection[str] | None = None, drop_unknown: bool = False) -> Reviews:
    """Every `*.jsonl` in `folder` (none, or no folder: no reviews), checked line by line (a
    `<reviewer>.jsonl.dvc` whose file is missing, not pulled yet, is an InputError): a
    malformed line, an unknown type or mark, a grade outside 0-3, a question id not in
    `known_qids` (when given; with `drop_unknown` left out and counted instead) or a reviewer field
    that is not the file's name is one InputError naming file and line. A last line cut short (a
    crash while appending) is skipped."""
    questions: list[dict[str, Any]] = []
    grades: list[dict[str, Any]] = []
    unknown = 0
    folder = Path(folder)
    for tracked in sorted(folder.glob("*.jsonl.dvc")) if folder.is_dir() else []:
        if not tracked.with_suffix("").exists():  # a teammate's file DVC has not brought here yet
            raise InputError(f"{tracked}: its reviews file is tracked by DVC but not here: run `dvc pull {tracked}`")
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        reviewer = check_reviewer(path.stem) if REVIEWER_NAME.fullmatch(path.stem) else None
        if reviewer is None:
            raise InputError(f"{path}: a reviews file is named <reviewer>.jsonl with a file-safe word as the name")
        for line_number, click in _clicks(path):
            where = f"{path}:{line_number}"
            if drop_unknown and known_qids is not None and not _known(click.get("qid"), known_qids):
                _check_click(click, None, where)
                unknown += 1
                continue
            _check_click(click, known_qids, where)
            if click["reviewer"] != reviewer:
                raise InputError(f"{where}: reviewer {quoted(click['reviewer'])} in {reviewer}'s file")
            (questions if click["type"] == "question" else grades).append(click)
    question_frame = pd.DataFrame(questions, columns=QUESTION_COLUMNS + ["type"])[QUESTION_COLUMNS]
    grade_frame = pd.DataFrame(grades, columns=GRADE_COLUMNS + ["type"])[GRADE_COLUMNS]
    grade_frame["grade"] = grade_frame["grade"].astype("int64")
    return Reviews(
        questions=question_frame.drop_duplicates(["reviewer", "qid"], keep="last").reset_index(drop=True),
        grades=grade_frame.drop_duplicates(["reviewer", "qid", "chunk_id"], keep="last").reset_index(drop=True),
        n_unknown=unknown,
    )


def _known(qid: Any, known_qids: Collection[str]) -> bool:
    return isinstance(qid, str) and qid in known_qids  # a list or a dict is no question id (nor hashable)


def _clicks(path: Path) -> list[tuple[int, dict[str, Any]]]:
    clicks = []
    for line_number, line in _lines(path):
        if not line.strip():
            continue
        if line.endswith("\n"):  # invalid JSON, or nested too deep: one line naming it
            click = parse_json(line.rstrip("\r\n"), path, line_number)
        else:
            try:
                click = json.loads(line)
            except (ValueError, RecursionError):
                break  # the append a crash cut short: the page never acknowledged it
        if not isinstance(click, dict):
            raise InputError(f"{path}:{line_number}: expected a JSON object, got {type(click).__name__}")
        clicks.append((line_number, click))
    return clicks


def _lines(path: Path) -> list[tuple[int, str]]:
    """The numbered lines of a reviews file (read_text_lines'), where a last line without its
    newline that is not UTF-8 is left out: an append cut inside a character ("caf\xc3") is a
    click the page never acknowledged, not a broken file."""
    lines: list[tuple[int, str]] = []
    try:
        for line_number, line in enumerate(read_text_lines(path), 1):
            lines.append((line_number, line))
    except InputError:
        with open(path, "rb") as handle:
            newlines = handle.read().count(b"\n")
        if newlines != len(lines):  # the undecodable line is not the last one, cut short
            raise
    return lines


def _check_click(
    click: dict[str, Any], known_qids: Collection[str] | None, where: str, known_as: str = "golden set"
) -> None:
    kind = click.get("type")
    if kind not in ("question", "grade"):
        raise InputError(f"{where}: type {quoted(kind)}: expected 'question' or 'grade'")
    if "reviewer" not in click:
        raise InputError(f"{where}: no reviewer: a click names its reviewer (the file's name)")
    try:
        check_reviewer(str(click["reviewer"]))
    except InputError as error:
        raise InputError(f"{where}: {error}") from None
    qid = click.get("qid")
    if not isinstance(qid, str) or not qid:
        raise InputError(f"{where}: qid {quoted(qid)}: expected a question id")
    if known_qids is not None and qid not in known_qids:
        raise InputError(f"{where}: question {quoted(qid)} is not in the {known_as}")
    if kind == "question" and click.get("mark") not in QUESTION_MARKS:
        raise InputError(f"{where}: mark {quoted(click.get('mark'))}: expected one of {', '.join(QUESTION_MARKS)}")
    if kind == "grade":
        grade, chunk_id = click.get("grade"), click.get("chunk_id")
        if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:  # 2.0 is no grade
            raise InputError(f"{where}: grade {quoted(grade)}: expected 0, 1, 2 or 3 (the UMBRELA scale)")
        if not isinstance(chunk_id, str) or not chunk_id:
            raise InputError(f"{where}: chunk_id {quoted(chunk_id)}: expected a chunk id")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
