"""The echo gauge: does a question give its answer away by copying the words of its evidence?

A question that repeats its evidence's wording is easy for any lexical retriever and flatters
every method; real users rarely type the document's own phrases. For every question this
measures, against each of its evidence texts (the evidence span it was written from; for
chunk-labelled questions the relevant chunks), keeping the highest:

- ``echo_content_share``: the share of the question's distinct content words (lowercased,
  English stop words removed, Snowball-stemmed: retrieval_bench.retrieval.bm25.tokenize) that also
  occur in the evidence;
- ``echo_longest_ngram``: the length, in words, of the longest run of consecutive words
  (lowercased, stop words included, not stemmed) that the question shares with the evidence.

The rule (ECHO_RULE): a question echoes its evidence if it shares a run of ECHO_MIN_NGRAM (5)
or more words with it, or if at least ECHO_MIN_SHARE (90%) of its content words occur in it and
it has at least ECHO_MIN_CONTENT_WORDS (3) of them (a two-word question naming its topic is not
an echo). `bm25_ranks` adds the lexical view: the rank BM25 gives a question's first relevant
chunk among the chunks being scored (retrieval-bench gauge).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np

from retrieval_bench.retrieval.bm25 import bm25_scores, tokenize
from retrieval_bench.retrieval.rank import judged_ranks

ECHO_MIN_NGRAM = 5
ECHO_MIN_SHARE = 0.9
ECHO_MIN_CONTENT_WORDS = 3
ECHO_RULE = (
    f"longest word run shared with the evidence >= {ECHO_MIN_NGRAM} words, or >= {ECHO_MIN_SHARE:.0%} "
    f"of the question's content words (at least {ECHO_MIN_CONTENT_WORDS}) found in it"
)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def words(text: str) -> list[str]:
    """Lowercased words: letters and digits, keeping inner apostrophes (don't, SQLite's)."""
    return [w.replace("’", "'") for w in _WORD.findall(text.lower())]


def longest_shared_run(question: str, evidence: str) -> int:
    """Length in words of the longest run of consecutive words found in both texts."""
    a, b = words(question), words(evidence)
    if not a or not b:
        return 0
    return SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b)).size


@dataclass(frozen=True)
class Echo:
    content_share: float
    content_words: int
    longest_ngram: int

    @property
    def flagged(self) -> bool:
        return self.longest_ngram >= ECHO_MIN_NGRAM or (
            self.content_words >= ECHO_MIN_CONTENT_WORDS and self.content_share >= ECHO_MIN_SHARE
        )


def measure(question: str, evidence: str | list[str]) -> Echo:
    """The echo measures of one question against its evidence text(s): the highest of each."""
    texts = [evidence] if isinstance(evidence, str) else evidence
    return _measure(question, texts, tokenize([question])[0], tokenize(texts) if texts else [])


def _measure(question: str, texts: list[str], question_tokens: list[str], text_tokens: list[list[str]]) -> Echo:
    """measure, with the question and its texts already tokenized (tokenize is far cheaper on many
    texts at once than once per text)."""
    question_set = set(question_tokens)
    share, longest = 0.0, 0
    for text, tokens in zip(texts, text_tokens, strict=True):
        if question_set:
            share = max(share, len(question_set & set(tokens)) / len(question_set))
        longest = max(longest, longest_shared_run(question, text))
    return Echo(round(share, 4), len(question_set), longest)


def is_echo(question: str, evidence: str | list[str]) -> bool:
    return measure(question, evidence).flagged


def mark(rows: list[dict], evidence: list[list[str]]) -> dict:
    """Mark every row (in place) with its echo measures against its evidence texts and return the
    summary; rows without evidence get null measures and are left out of it."""
    flagged = measured = 0
    with_texts = [(row, texts) for row, texts in zip(rows, evidence, strict=True) if texts]
    question_tokens = tokenize([row["question"] for row, _ in with_texts]) if with_texts else []
    text_tokens = iter(tokenize([text for _, texts in with_texts for text in texts]) if with_texts else [])
    for row, texts in zip(rows, evidence, strict=True):
        if not texts:
            row.update(echo=None, echo_content_share=None, echo_longest_ngram=None)
            continue
        echo = _measure(row["question"], texts, question_tokens[measured], [next(text_tokens) for _ in texts])
        row.update(echo=echo.flagged, echo_content_share=echo.content_share, echo_longest_ngram=echo.longest_ngram)
        measured += 1
        flagged += echo.flagged
    return {
        "echo_rate": round(flagged / measured, 4) if measured else None,
        "echo_flagged": flagged,
        "n_measured": measured,
    }


def bm25_ranks(chunk_texts: list[str], questions: list[str], relevant: list[np.ndarray]) -> list[int | None]:
    """Rank (1 = best) BM25 gives each question's best-placed relevant chunk among `chunk_texts`,
    a tied chunk counted after those it ties with; None for a question without relevant chunk."""
    if not questions:
        return []
    ranks = []
    for positions in judged_ranks(bm25_scores(chunk_texts, questions), len(questions), relevant):
        worst_case = positions.better + positions.tied
        ranks.append(int(worst_case.min()) if len(worst_case) else None)
    return ranks
