"""Whether a text reads as a question: the one list of interrogative openings, shared by reply
hygiene (a reply must be a question), the golden set's context check and the style gap."""

from __future__ import annotations

# The wh-words and auxiliaries that open a question: the golden set's context check skips exactly
# these (and the words that extend one); its set is fixed, since changing it changes which cached
# questions are flagged and so which are paid for again.
CORE_INTERROGATIVES = frozenset(
    {
        "how",
        "what",
        "why",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "is",
        "are",
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
        "doesn't",
        "don't",
        "didn't",
        "won't",
        "wasn't",
    }
)
# Openings that make a question without a question mark ("how to enable WAL mode"); a statement
# or a command ("Explain WAL mode.") is not a search question.
INTERROGATIVES = CORE_INTERROGATIVES | {
    "what's",
    "whats",
    "whether",
    "am",
    "cannot",
    "wouldn't",
    "shouldn't",
    "couldn't",
    "weren't",
    "hasn't",
    "haven't",
}
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
