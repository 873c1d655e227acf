"""Whether a text reads as a question: the one list of interrogative openings, shared by reply
hygiene (a reply must be a question), the golden set's context check and the style gap."""

from __future__ import annotations

# Openings that make a question without a question mark ("how to enable WAL mode"); a statement
# or a command ("Explain WAL mode.") is not a search question.
INTERROGATIVES = frozenset(
    {
        "how",
        "what",
        "what's",
        "whats",
        "why",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "whether",
        "is",
        "are",
        "am",
        "was",
        "were",
        "can",
        "could",
        "do",
        "does",
        "did",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "has",
        "have",
        "had",
        "isn't",
        "aren't",
        "can't",
        "cannot",
        "doesn't",
        "don't",
        "didn't",
        "won't",
        "wouldn't",
        "shouldn't",
        "couldn't",
        "wasn't",
        "weren't",
        "hasn't",
        "haven't",
    }
)
_PREPOSITIONS = {"in", "on", "at", "for", "from", "to", "with", "by", "under", "after", "before", "during", "of"}


def reads_as_question(question: str) -> bool:
    """Ends with a question mark, or opens like a question ("how to ...", "in which file ...")."""
    if question.rstrip(" \"'”’)»*").endswith(("?", "？")):
        return True
    words = [w.strip("\"'“”‘’(*").replace("’", "'").lower() for w in question.split()[:2]]
    if not words:
        return False
    return words[0] in INTERROGATIVES or (
        len(words) > 1 and words[0] in _PREPOSITIONS and words[1] in {"what", "which", "whom", "whose", "how"}
    )
