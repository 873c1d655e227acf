"""Real questions as few-shot style examples for generation (generate.style_examples).

Only the examples' question texts go into the prompt, never their passages: they show how real
users ask (length, wording, form), not what to ask about. Up to generate.style_examples_count
distinct questions are chosen by a seeded hash of their text (generate.seed), so a rerun chooses
the same ones and adding a question to the file replaces at most one choice.

The examples are rendered into the prompt template before anything is keyed: at a
{style_examples} placeholder when the template has one, else at its end. The template's sha256,
part of every question's cache key and record, is then that of the template as sent, so a changed
example file means new questions, an unchanged one cache hits, and no file the template as it
always was (the same keys as before). Each example is escaped as a passage is
(passage_escape.escape_tags): no text in it can open or close a <passage> or <example> block, or
stand in for the {passage} placeholder.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from retrieval_bench.core.errors import InputError, describe_os_error
from retrieval_bench.core.files import numbered_jsonl
from retrieval_bench.goldenset.formats import read_question_set
from retrieval_bench.llm.checks.passage_escape import escape_tags

PLACEHOLDER = "{style_examples}"
QUESTION_FIELDS = ("question", "user_input")  # hand-written, golden set, real queries; ragas
INTRODUCTION = (
    "Real users of this product ask questions like the examples below. Write your question in their style "
    "(length, wording, form), not about their topics:"
)


@dataclass(frozen=True)
class StyleExamples:
    file: str | None
    questions: list[str]  # the chosen examples, as read (not escaped)
    sha256: str | None  # of the file's bytes

    def report(self) -> dict:
        """What metrics/goldenset.json says about the examples used."""
        return {"file": self.file, "sha256": self.sha256, "n_examples": len(self.questions)}


def read_questions(path: Path) -> list[str]:
    """The question texts of a question set: a JSONL file with a `question` (or ragas `user_input`)
    field per line, or any file or folder goldenset.formats reads. Bad input is one InputError
    naming the file and line."""
    if not path.exists():
        raise InputError(f"{path}: generate.style_examples: no such file or folder")
    try:
        if path.is_file() and path.suffix.lower() == ".jsonl":
            questions = [_question(row, f"{path}:{line}") for line, row in numbered_jsonl(path)]
        else:
            questions = [_question(row, f"{path}: question {row['qid']}") for row in read_question_set(path)[1]]
    except OSError as error:
        raise InputError(f"{path}: generate.style_examples cannot be read ({describe_os_error(error)})") from None
    if not questions:
        raise InputError(f"{path}: generate.style_examples holds no question")
    return questions


def _question(row: dict, where: str) -> str:
    field = next((name for name in QUESTION_FIELDS if name in row), None)
    if field is None:
        raise InputError(f"{where}: a style example needs a `question` field; fields found: {', '.join(row) or 'none'}")
    question = row[field]
    if not isinstance(question, str):
        raise InputError(f"{where}: `{field}` must be a text, got {type(question).__name__}")
    if not question.strip():
        raise InputError(f"{where}: `{field}` is empty")
    return " ".join(question.split())  # one line each: an example is one question


def choose(questions: list[str], count: int, seed: int) -> list[str]:
    """Up to `count` distinct questions, ordered by sha256(seed, question): the same file and seed
    always give the same examples in the same order."""
    distinct = sorted(set(questions), key=lambda q: (hashlib.sha256(f"{seed}\0{q}".encode()).hexdigest(), q))
    return distinct[:count]


def load(params: Mapping) -> StyleExamples:
    """The style examples the generate section `params` names (none when generate.style_examples is null)."""
    file = params["style_examples"]
    if file is None:
        return StyleExamples(None, [], None)
    path = Path(file)
    questions = choose(read_questions(path), params["style_examples_count"], params["seed"])
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    return StyleExamples(file, questions, sha256)


def escape_example(question: str, passage_placeholder: str) -> str:
    """An example as it stands in the prompt: tags escaped as in a passage, and no passage
    placeholder (the task would put the passage there)."""
    escaped = escape_tags(question, ("passage", "example"))
    return escaped.replace(passage_placeholder, passage_placeholder.replace("{", "&#123;").replace("}", "&#125;"))


def render(template: str, questions: list[str], passage_placeholder: str) -> str:
    """The prompt template with the examples in: at its {style_examples} placeholder, else at its
    end. No examples: the template with the placeholder's line removed (without one, unchanged)."""
    if not questions:
        return template.replace(PLACEHOLDER + "\n", "").replace(PLACEHOLDER, "")
    examples = (f"<example>{escape_example(q, passage_placeholder)}</example>" for q in questions)
    block = "\n".join([INTRODUCTION, *examples])
    if PLACEHOLDER in template:
        return template.replace(PLACEHOLDER, block)
    return f"{template.rstrip()}\n\n{block}\n"
