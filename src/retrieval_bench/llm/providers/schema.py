"""The JSON schema of a task's reply, sent with <section>.response_format json_schema (OpenAI's
`response_format`, Anthropic's `output_config.format`), and the check every reply is held to in that
mode, whether the server honoured the schema or ignored it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from retrieval_bench.core.question_sets import WORDED_KINDS

# JSON Schema types as Python sees them (a bool is not an integer).
_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "object": (dict,), "array": (list,)}


@dataclass(frozen=True)
class ReplySchema:
    """A reply's schema: an object of typed fields, all required, no others (strict mode's shape); a
    field may be an array of strings (a multi-evidence question's excerpts)."""

    name: str
    properties: dict[str, dict[str, Any]]

    @property
    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": self.properties,
            "required": list(self.properties),
            "additionalProperties": False,
        }

    def mismatch(self, text: str) -> str | None:
        """Why `text` is not one JSON object of this schema (None: it is)."""
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return "not JSON"
        except RecursionError:  # json's C decoder stops at Python's recursion limit, cleanly
            return "JSON nested too deep to read"
        if not isinstance(value, dict):
            return "not a JSON object"
        missing = [key for key in self.properties if key not in value]
        extra = sorted(set(value) - set(self.properties))
        if missing or extra:
            return f"keys missing {missing}, unexpected {extra}"
        for key, rule in self.properties.items():
            field = value[key]
            if isinstance(field, bool) or not isinstance(field, _TYPES[rule["type"]]):
                return f"{key} is not a {rule['type']}"
            if "enum" in rule and field not in rule["enum"]:
                return f"{key} is not one of {rule['enum']}"
            items = field if isinstance(field, list) and "items" in rule else []
            if not all(isinstance(item, _TYPES[rule["items"]["type"]]) for item in items):
                return f"{key} holds an item that is not a {rule['items']['type']}"
        return None


QUESTION_SCHEMA = ReplySchema("question", {"question": {"type": "string"}, "evidence": {"type": "string"}})
# The other question kinds' replies (goldenset.kinds): a search-box query; a question needing several
# passages with one excerpt from each, in order; a near-miss question with the fact it changed.
KEYWORD_SCHEMA = ReplySchema("keyword_query", {"query": {"type": "string"}, "evidence": {"type": "string"}})
MULTI_SCHEMA = ReplySchema(
    "multi_question", {"question": {"type": "string"}, "evidence": {"type": "array", "items": {"type": "string"}}}
)
UNANSWERABLE_SCHEMA = ReplySchema(
    "unanswerable_question",
    {"question": {"type": "string"}, "evidence": {"type": "string"}, "changed_fact": {"type": "string"}},
)
# A real or hand-written question's kind, as its wording tells it (generate.kind_classifier llm).
KIND_SCHEMA = ReplySchema("question_kind", {"kind": {"type": "string", "enum": list(WORDED_KINDS)}})
GRADE_SCHEMA = ReplySchema("grade", {"grade": {"type": "integer", "enum": [0, 1, 2, 3]}})
