"""A task: what the model is asked about one text, and how its reply is read.

A Task is a prompt template's placeholder, how the text is made safe to stand in it, and a reply
parser whose fields go into the cache record. Providers and runners know nothing of tasks
beyond Job (a rendered prompt and its cache key) and Task.record (a reply as a cache record), so
a new task (relevance judging, say) is a new Task here and its parser, and no provider code.

QUESTIONS writes one search question a passage answers: the passage goes between the prompt's
<passage> tags escaped (goldenset.evidence.escape_passage), the reply is read by
hygiene.clean_reply.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from retrieval_bench.goldenset.cache import cache_key
from retrieval_bench.goldenset.evidence import escape_passage
from retrieval_bench.llm.hygiene import clean_reply
from retrieval_bench.llm.provider import Reply
from retrieval_bench.llm.settings import Meta


@dataclass(frozen=True)
class Job:
    key: str
    passage_sha256: str
    attempt: int
    prompt: str


@dataclass(frozen=True)
class Task:
    name: str
    placeholder: str  # in the prompt template, replaced by the (escaped) text
    escape: Callable[[str], str]  # the text as it stands in the prompt; unchanged text keeps its cache key
    parse: Callable[[str, str | None], dict]  # (reply text, stop reason) -> the task's fields of the cache record

    def prompt(self, template: str, text: str) -> str:
        """The prompt for one text: str.replace, so braces elsewhere in the template are literal."""
        return template.replace(self.placeholder, self.escape(text))

    def job(self, meta: Meta, template: str, text: str, text_sha256: str, attempt: int) -> Job:
        escaped = self.escape(text)
        key = cache_key(meta.family, meta.model, meta.prompt_sha256, text, meta.max_tokens, attempt,
                        escaped=escaped != text)
        return Job(key, text_sha256, attempt, template.replace(self.placeholder, escaped))

    def record(self, meta: Meta, key: str, passage_sha256: str, attempt: int, reply: Reply, provider: str | None = None) -> dict:
        """The cache record of one reply (goldenset.cache describes its fields)."""
        return {
            "key": key,
            "family": meta.family,
            "provider": provider or meta.provider,
            "model": meta.model,
            "prompt_sha256": meta.prompt_sha256,
            "passage_sha256": passage_sha256,
            "max_tokens": meta.max_tokens,
            "attempt": attempt,
            **self.parse(reply.text, reply.stop_reason),
            "stop_reason": reply.stop_reason,
            "raw": reply.text,
            "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }


def _question_fields(text: str, stop_reason: str | None) -> dict:
    cleaned = clean_reply(text, stop_reason)
    return {"question": cleaned.question, "evidence": cleaned.evidence, "rejected": cleaned.rejected}


QUESTIONS = Task("questions", "{passage}", escape_passage, _question_fields)
