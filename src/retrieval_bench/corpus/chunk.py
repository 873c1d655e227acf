"""Cut documents into overlapping character windows that end at natural boundaries."""

from __future__ import annotations

import re

from retrieval_bench.core.paths import DEFAULT as DEFAULT_CHUNKING

# Preferred places to end a chunk, best first: a paragraph break, a sentence end, any whitespace.
# A full-width sentence end (Chinese, Japanese) needs no space after it: those scripts put none
# between sentences or words.
_BREAKS = (
    re.compile(r"\n\s*\n"),
    re.compile(r"[.!?:;][\"')\]]?\s|[。！？；][」』）\]]?"),
    re.compile(r"\s"),
)


# Han and kana (Chinese, Japanese: no spaces between words, and a character is a word or a
# syllable of one), CJK punctuation and full-width forms: any two of them have a boundary between
# them. Not Hangul (Korean spaces its words), nor Thai, Lao, Khmer or Myanmar (unspaced, but a
# word is many characters, vowel signs among them: a start there would cut a word).
_UNSPACED = re.compile(
    "[\u3000-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f]"
)


def _unspaced(character: str) -> bool:
    return _UNSPACED.match(character) is not None


def _break_point(text: str, start: int, hard_end: int, min_len: int) -> int:
    """The end of the best boundary in text[start + min_len : hard_end], or hard_end if none."""
    window_start = start + min_len
    for pattern in _BREAKS:
        ends = [m.end() for m in pattern.finditer(text, window_start, hard_end)]
        if ends:
            return ends[-1]
    return hard_end


def chunk_spans(text: str, chars: int, overlap: int) -> list[tuple[int, int]]:
    """Character spans [start, end) of chunks of at most `chars` characters.

    Each chunk ends at the last paragraph break, else sentence end, else whitespace found in its
    second half, and the next chunk starts about `overlap` characters before that end, moved
    forward to a word start so no chunk begins mid-word. Leading and trailing whitespace is
    trimmed from every span; whitespace-only text yields no span.
    """
    if chars <= 0:
        raise ValueError(f"chunk length must be positive, got {chars}")
    if not 0 <= overlap < chars:
        raise ValueError(f"chunk overlap must be in [0, chars), got {overlap} with chars {chars}")
    spans: list[tuple[int, int]] = []
    n = len(text)
    start = _skip_space(text, 0)
    while start < n:
        hard_end = min(start + chars, n)
        end = n if hard_end == n else _break_point(text, start, hard_end, chars // 2)
        trimmed_end = end
        while trimmed_end > start and text[trimmed_end - 1].isspace():
            trimmed_end -= 1
        spans.append((start, trimmed_end))
        if end >= n:
            break
        next_start = max(end - overlap, start + 1)
        # Move forward to the start of a word, but never past the end of this chunk.
        while next_start < end and not (
            text[next_start - 1].isspace() or _unspaced(text[next_start - 1]) or _unspaced(text[next_start])
        ):
            next_start += 1
        start = _skip_space(text, next_start)
    return spans


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def chunk_id(doc_id: str, start: int, end: int) -> str:
    """A chunk's id: its document and character span, so it is stable across runs."""
    return f"{doc_id}:{start}-{end}"


def takes_source_chunks(chunking: str, source_chunks: int) -> bool:
    """Whether `chunking` is the source's own chunks (`source_chunks` of them: ready chunks, BEIR, a
    store) rather than cut from the documents: the `default` chunking of a source that has some."""
    return source_chunks > 0 and chunking == DEFAULT_CHUNKING
