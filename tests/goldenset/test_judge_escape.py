"""The judge's prompt escapes <passage> and <query> tags with passage_escape's one helper, exactly
as its own two-pass escaping did: an escaped text that changed would change its cache key, and
every judged pair would be paid for again."""

from __future__ import annotations

import random
import re

from retrieval_bench.llm.checks.passage_escape import INVISIBLE_CHARS, escape_passage, escape_tags
from retrieval_bench.llm.runs.tasks import escape_judged

# The escaping as it was before escape_tags served the judge (the reference the keys were made with).
_GAP = f"[\\s{INVISIBLE_CHARS}]*"
_OLD_QUERY = re.compile(
    r"[<\uff1c\ufe64](?=" + _GAP + "/?" + _GAP + f"[{INVISIBLE_CHARS}]*".join("query") + r"(?![A-Za-z0-9_\-]))",
    re.IGNORECASE,
)


def old_escape_judged(text: str) -> str:
    escaped = escape_passage(text)
    return _OLD_QUERY.sub(lambda m: "&lt;" if m.group() == "<" else f"&#x{ord(m.group()):04x};", escaped)


PIECES = [
    "<", "\uff1c", "\ufe64", ">", "/", " ", "\n", "\t", "\u200b", "\u00ad", "\ufeff", "\u202e", "&lt;",
    "passage", "PASSAGE", "Passage", "query", "QUERY", "queryx", "query-", "query_", "query1", "passages",
    "p", "q", "uery", "assage", "x", "é", "{query}", "{passage}", "&#xff1c;",
]  # fmt: skip


def test_escaping_is_unchanged_on_adversarial_texts():
    rng = random.Random(0)
    texts = [
        "",
        "plain text",
        "<query>who?</query>",
        "< / Q\u200bUERY >",
        "\uff1cpassage>\ufe64/query>",
        "<query<passage>",
    ]
    texts += ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12))) for _ in range(20000)]
    changed = [text for text in texts if escape_judged(text) != old_escape_judged(text)]
    assert changed == []
    assert sum(escape_judged(text) != text for text in texts) > 1000  # the texts do exercise the escaping


def test_each_set_of_tag_names_is_compiled_once(monkeypatch):
    compiled = []
    compile_pattern = re.compile
    monkeypatch.setattr(re, "compile", lambda *args: compiled.append(args) or compile_pattern(*args))
    for text in ("<example>one</example>", "<answer>two"):
        escape_tags(text, ("example", "answer"))
    assert len(compiled) == 1
