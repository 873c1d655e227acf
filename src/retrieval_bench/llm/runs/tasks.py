"""A task: what the model is asked about one text, and how its reply is read.

A Task is a prompt template's placeholder, how the text is made safe to stand in it, and a reply
parser whose fields go into the cache record. Providers and runners know nothing of tasks
beyond Job (a rendered prompt and its cache key) and Task.record (a reply as a cache record), so
a new task (relevance judging, say) is a new Task here and its parser, and no provider code.

QUESTIONS writes one search question a passage answers: the passage goes between the prompt's
<passage> tags escaped (passage_escape.escape_passage), the reply is read by
hygiene.clean_reply. KEYWORDS, MULTI and UNANSWERABLE write the other question kinds
(QUESTION_TASKS by kind; checks.kinds reads their replies). KIND_LABEL tells a real or
hand-written question's kind (goldenset.kind_classifier).

JUDGE grades how well a chunk answers a question, 0-3 (UMBRELA, Upadhyay et al. 2024, after
Thomas et al. 2023): two texts, the question between <query> tags and the chunk between
<passage> tags, both escaped so neither can close or open either block; its cache key hashes
(model, prompt, question, chunk text), so a pair is paid for once whichever run, chunk id or
revision asks for it; the reply is read by grades.parse_grade. Its records carry the question
and the chunk's id (a task's `context`, by cache key) so the cache reads on its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from retrieval_bench.core.errors import InputError
from retrieval_bench.llm.cache.replies import (
    KEY_VERSION,
    RAW_KEPT_CHARS,
    KeyFields,
    cache_key,
    legacy_cache_key,
    raw_for_cache,
)
from retrieval_bench.llm.checks import kinds
from retrieval_bench.llm.checks.grades import parse_grade
from retrieval_bench.llm.checks.hygiene import REJECT_REASONS, clean_reply
from retrieval_bench.llm.checks.passage_escape import escape_group, escape_passage, escape_tags
from retrieval_bench.llm.cost.guard import JUDGE_WORDING, KIND_WORDING, QUESTIONS_WORDING, Wording
from retrieval_bench.llm.cost.settings import Meta
from retrieval_bench.llm.providers.base import Reply
from retrieval_bench.llm.providers.schema import (
    GRADE_SCHEMA,
    KEYWORD_SCHEMA,
    KIND_SCHEMA,
    MULTI_SCHEMA,
    QUESTION_SCHEMA,
    UNANSWERABLE_SCHEMA,
    ReplySchema,
)


def prompt_text(data: bytes, path: str | Path) -> str:
    """A prompt file's text (the question or the judge prompt); bytes that are not UTF-8 are a
    one-line InputError naming the file."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start})") from None


@dataclass(frozen=True)
class Job:
    key: str
    passage_sha256: str
    attempt: int
    prompt: str
    seed: int | None = None  # sent with the request (Meta.seed set): each attempt its own


def _keyed(meta: Meta, text: str, attempt: int, escaped: bool) -> tuple[str, int | None]:
    """(the job's cache key, its seed). The key is the earlier scheme's (max_tokens hashed) when
    the cache holds a record under it, so an old cache is served whatever max_tokens is now. The
    seed derives from Meta.seed and the key's fields, the attempt included: a re-ask differs."""
    fields: KeyFields = (meta.family, meta.cache_model, meta.prompt_sha256, text)
    key = cache_key(*fields, attempt, escaped)
    seed = None
    if meta.seed is not None:
        digest = hashlib.sha256(f"{meta.seed}\0{key}".encode()).digest()
        seed = int.from_bytes(digest[:4], "big") >> 1  # 31 bits: every server's seed type holds it
    for max_tokens in meta.earlier.max_tokens:
        earlier = legacy_cache_key(fields, max_tokens, attempt, escaped=escaped)
        if earlier in meta.earlier.keys:
            return earlier, seed
    return key, seed


@dataclass(frozen=True)
class Task:
    name: str
    placeholder: str  # in the prompt template, replaced by the (escaped) text
    escape: Callable[[str], str]  # the text as it stands in the prompt; unchanged text keeps its cache key
    parse: Callable[[str, str | None], dict]  # (reply text, stop reason) -> the task's fields of the cache record
    query_placeholder: str | None = None  # a second text in the prompt (the question of a judged pair)
    context: Mapping[str, dict] = field(default_factory=dict)  # cache key -> fields saying what was asked
    stage: str = "generate_goldenset"  # the stage that asks: it names the progress bar and the lines beside it
    wording: Wording = QUESTIONS_WORDING  # how its work is named in the cost guard's and the run's lines
    schema: ReplySchema = QUESTION_SCHEMA  # the reply's JSON schema (<section>.response_format json_schema)
    # Reject reasons worth a line beside the progress bar, and what was expected instead: a reply
    # no parser can read (megabytes, JSON nested thousands deep) says more about the server than the text.
    noted: Mapping[str, str] = field(default_factory=dict)

    def with_context(self, context: Mapping[str, dict]) -> "Task":
        """This task, its records carrying `context[key]` (e.g. the question and chunk id judged)."""
        return dataclasses.replace(self, context=context)

    def prompt(self, template: str, text: str) -> str:
        """The prompt for one text: str.replace, so braces elsewhere in the template are literal."""
        return template.replace(self.placeholder, self.escape(text))

    def job(self, meta: Meta, template: str, text: str, text_sha256: str, attempt: int) -> Job:
        escaped = self.escape(text)
        key, seed = _keyed(meta, text, attempt, escaped != text)
        return Job(key, text_sha256, attempt, template.replace(self.placeholder, escaped), seed)

    def pair_job(self, meta: Meta, template: str, query: str, text: str, text_sha256: str, attempt: int) -> Job:
        """The job for a (query, text) pair: both escaped into the template in one pass (neither
        can inject the other's placeholder), keyed by the task, the query and the text."""
        query_placeholder = self.query_placeholder
        assert query_placeholder is not None  # a pair task names where the query goes
        fields = {query_placeholder: self.escape(query), self.placeholder: self.escape(text)}
        escaped = (fields[query_placeholder], fields[self.placeholder]) != (query, text)
        payload = json.dumps([self.name, query, text], ensure_ascii=False)
        key, seed = _keyed(meta, payload, attempt, escaped)
        pattern = "|".join(re.escape(name) for name in fields)
        return Job(key, text_sha256, attempt, re.sub(pattern, lambda m: fields[m.group()], template), seed)

    def record(
        self,
        meta: Meta,
        key: str,
        passage_sha256: str,
        attempt: int,
        reply: Reply,
        *,
        seed: int | None = None,
    ) -> dict:
        """The cache record of one reply (llm.cache.replies describes its fields), naming meta.provider
        (a batch's: the batch API that answered, Meta.from_journal); a rejected reply's text is stored
        cut (llm.cache.replies.raw_for_cache)."""
        fields = self.parsed(reply, meta.response_format)
        return {
            "key": key,
            "key_version": KEY_VERSION,
            "family": meta.family,
            "provider": meta.provider,
            "model": meta.model,
            **({"model_alias": meta.model_alias} if meta.model_alias else {}),
            "prompt_sha256": meta.prompt_sha256,
            "passage_sha256": passage_sha256,
            "max_tokens": meta.max_tokens,
            "temperature": meta.temperature,
            "seed": seed,
            **({"response_format": meta.response_format} if meta.response_format != "text" else {}),
            "attempt": attempt,
            **fields,
            **self.context.get(key, {}),
            "stop_reason": reply.stop_reason,
            "raw": reply.text if fields["rejected"] is None else raw_for_cache(reply.text),
            "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }

    def note(self, record: dict) -> str | None:
        """The one line a record rejected for a `noted` reason is worth, naming its request; else None."""
        expected = self.noted.get(record["rejected"] or "")
        if expected is None:
            return None
        return (
            f"the reply to request {record['key']} (text sha256 {record['passage_sha256'][:12]}) is rejected as "
            f"{record['rejected']}: {expected}; it is cached as rejected (its text cut to {RAW_KEPT_CHARS:,} "
            "characters) and the run goes on"
        )

    def parsed(self, reply: Reply, response_format: str) -> dict:
        """The task's fields of a reply; with json_schema a reply the parser would take but that is
        not one object of the schema (the server ignored it) is rejected as schema_mismatch."""
        fields = self.parse(reply.text, reply.stop_reason)
        if response_format == "json_schema" and fields["rejected"] is None and self.schema.mismatch(reply.text.strip()):
            fields = {**fields, "rejected": SCHEMA_MISMATCH}
        return fields


SCHEMA_MISMATCH = "schema_mismatch"


def _question_fields(text: str, stop_reason: str | None) -> dict:
    cleaned = clean_reply(text, stop_reason)
    return {"question": cleaned.question, "evidence": cleaned.evidence, "rejected": cleaned.rejected}


_NOTED = {reason: REJECT_REASONS[reason] for reason in ("oversize", "too_deep")}
QUESTIONS = Task(
    "questions",
    "{passage}",
    escape_passage,
    _question_fields,
    noted=_NOTED,
)


# The other question kinds (goldenset.kinds): each its own prompt placeholder, parser and schema, so
# its own cache keys (its prompt's sha256 is in them). MULTI's text is a passage group
# (passage_escape.passage_group), each passage escaped into its own <passage> block.
KEYWORDS = Task("keywords", "{passage}", escape_passage, kinds.keyword_fields, schema=KEYWORD_SCHEMA, noted=_NOTED)
MULTI = Task("multi", "{passages}", escape_group, kinds.multi_fields, schema=MULTI_SCHEMA, noted=_NOTED)
UNANSWERABLE = Task(
    "unanswerable", "{passage}", escape_passage, kinds.unanswerable_fields, schema=UNANSWERABLE_SCHEMA, noted=_NOTED
)
QUESTION_TASKS = {"single": QUESTIONS, "multi": MULTI, "unanswerable": UNANSWERABLE, "keyword": KEYWORDS}


def escape_classified(text: str) -> str:
    """A question as it stands in the kind classifier's prompt: anything a model could read as a
    <question> tag escaped (as escape_passage does); other text unchanged."""
    return escape_tags(text, ("question",))


# KIND_LABEL tells a real or hand-written question's kind from its words (generate.kind_classifier
# llm): the question between <question> tags; its records land in the question cache, keyed by the
# classifier prompt's sha256 and the question, and carry the question (context) so the cache reads on its own.
KIND_LABEL = Task(
    "kind_label",
    "{question}",
    escape_classified,
    kinds.kind_label_fields,
    wording=KIND_WORDING,
    schema=KIND_SCHEMA,
)


def escape_judged(text: str) -> str:
    """A question or chunk as it stands in the judge's prompt: anything a model could read as a
    <passage> or <query> tag escaped (as escape_passage does); other text unchanged."""
    return escape_tags(text, ("passage", "query"))


def _grade_fields(text: str, stop_reason: str | None) -> dict:
    graded = parse_grade(text, stop_reason)
    # `question` (null here, set from the task's context) keeps the record readable by llm.cache.replies.read_cache.
    return {"question": None, "grade": graded.grade, "rejected": graded.rejected}


JUDGE = Task(
    "judge",
    "{passage}",
    escape_judged,
    _grade_fields,
    query_placeholder="{query}",
    stage="judge",
    wording=JUDGE_WORDING,
    schema=GRADE_SCHEMA,
)
