"""The passage inside a prompt is data, never instructions or delimiters: a passage goes between
<passage> and </passage>, and escape_passage keeps any text in it from reading as one of those
tags; unescape_passage undoes it for an excerpt a model quotes back from the escaped text.

Used by the LLM tasks (the prompt) and by the golden set (matching evidence in the passage sent)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence

# Characters that render as nothing (zero-width, soft hyphen, bidi controls, BOM): text that hides
# them inside a tag name still reads as that tag to a model.
INVISIBLE_CHARS = "\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_IGNORABLE = f"[{INVISIBLE_CHARS}]*"
_GAP = f"[\\s{INVISIBLE_CHARS}]*"


def _tag_tail(name: str) -> str:
    return _GAP + "/?" + _GAP + _IGNORABLE.join(name) + r"(?![A-Za-z0-9_\-])"


@functools.lru_cache(maxsize=None)  # a few tag-name sets, each asked for once per text escaped
def _delimiter(names: tuple[str, ...]) -> re.Pattern[str]:
    """An opening or closing tag of any of `names`, however spaced, cased or interleaved with invisible characters."""
    return re.compile(r"[<\uff1c\ufe64](?=(?:" + "|".join(_tag_tail(name) for name in names) + "))", re.IGNORECASE)


_TAG_TAIL = _tag_tail("passage")
_DELIMITER = _delimiter(("passage",))
_ESCAPED_DELIMITER = re.compile(r"&(lt|#x[0-9a-f]{4});(?=" + _TAG_TAIL + ")", re.IGNORECASE)


def escape_passage(passage: str) -> str:
    """The passage as it is put between the prompt's <passage> and </passage>: every '<' (or
    full-width look-alike) that starts something a model could read as one of those tags becomes
    an HTML entity ('&lt;'), so no chunk can close the block (its text would stand outside it, as
    instructions) or open a fake one. Any other passage is returned unchanged, so its prompt and
    cache key are what they always were."""
    return _DELIMITER.sub(_entity, passage)


def escape_tags(text: str, names: tuple[str, ...]) -> str:
    """`text` with every opening or closing tag of `names` escaped as escape_passage escapes <passage>."""
    return _delimiter(names).sub(_entity, text)


def _entity(match: re.Match[str]) -> str:
    return "&lt;" if match.group() == "<" else f"&#x{ord(match.group()):04x};"


def unescape_passage(text: str) -> str:
    """Undo escape_passage (for text a model quotes back from an escaped passage)."""
    return _ESCAPED_DELIMITER.sub(lambda m: "<" if m.group(1).lower() == "lt" else chr(int(m.group(1)[2:], 16)), text)


def passage_group(texts: Sequence[str]) -> str:
    """Several passages as one text (JSON, in order): what a multi-evidence question's job is keyed
    by, and what escape_group renders into its prompt."""
    return json.dumps(list(texts), ensure_ascii=False)


def escape_group(group: str) -> str:
    """A passage_group as it stands in a prompt: each passage between its own <passage> and
    </passage> lines, escaped as escape_passage escapes one, a blank line between them."""
    return "\n\n".join(f"<passage>\n{escape_passage(text)}\n</passage>" for text in json.loads(group))
