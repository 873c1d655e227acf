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
an echo). A short query (a keyword row: SHORT_QUERY_WORDS words or fewer) is held to a rule of
its own (SHORT_ECHO_RULE), since two or three words never reach those bars: it echoes when
SHORT_MIN_RARE (2) or more of its content words are rare terms of the corpus (rare_terms: in at
most RARE_SHARE of the passages, or 2) found in its evidence: a search box query that quotes the
passage's distinctive terms gives the answer away to any lexical retriever (``echo_rare_terms``:
how many it quotes). `bm25_ranks` adds the lexical view: the rank BM25 gives a question's first relevant
chunk among the chunks being scored (retrieval-bench gauge).
"""

from __future__ import annotations

import re
from collections import Counter
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

SHORT_QUERY_WORDS = 6
SHORT_MIN_RARE = 2
RARE_SHARE = 0.02
SHORT_ECHO_RULE = (
    f"a query of {SHORT_QUERY_WORDS} words or fewer (kind keyword) quoting >= {SHORT_MIN_RARE} of its evidence's "
    f"rare terms (in at most {RARE_SHARE:.0%} of the passages, or 2)"
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


def is_echo(question: str, evidence: str | list[str], rare: frozenset[str] | None = None) -> bool:
    """Whether `question` echoes its evidence; with the corpus's `rare` terms (rare_terms), a short
    query is held to SHORT_ECHO_RULE as well."""
    return measure(question, evidence).flagged or (
        rare is not None and rare_quoted(question, evidence, rare) >= SHORT_MIN_RARE
    )


def rare_terms(token_lists: list[list[str]]) -> frozenset[str]:
    """The terms (tokenize's) found in at most RARE_SHARE of the texts (at least 2 allowed), from
    each text's tokens: what makes a passage findable by its words alone."""
    frequency = Counter(term for tokens in token_lists for term in set(tokens))
    most = max(2, int(RARE_SHARE * len(token_lists)))
    return frozenset(term for term, n in frequency.items() if n <= most)


def rare_quoted(question: str, evidence: str | list[str], rare: frozenset[str]) -> int:
    """How many of a short query's content words (tokenize's) are `rare` terms found in its
    evidence; 0 for a query of more than SHORT_QUERY_WORDS words (the other rule holds it)."""
    if len(words(question)) > SHORT_QUERY_WORDS:
        return 0
    texts = [evidence] if isinstance(evidence, str) else evidence
    return len(set(tokenize([question])[0]) & rare & {term for tokens in tokenize(texts) for term in tokens})


def mark(rows: list[dict], evidence: list[list[str]], rare: frozenset[str] | None = None) -> dict:
    """Mark every row (in place) with its echo measures against its evidence texts and return the
    summary; rows without evidence get null measures and are left out of it. With the corpus's
    `rare` terms, keyword rows are also held to SHORT_ECHO_RULE (`echo_rare_terms`)."""
    flagged = measured = 0
    with_texts = [(row, texts) for row, texts in zip(rows, evidence, strict=True) if texts]
    question_tokens = tokenize([row["question"] for row, _ in with_texts]) if with_texts else []
    text_tokens = iter(tokenize([text for _, texts in with_texts for text in texts]) if with_texts else [])
    for row, texts in zip(rows, evidence, strict=True):
        if not texts:
            row.update(echo=None, echo_content_share=None, echo_longest_ngram=None)
            continue
        echo = _measure(row["question"], texts, question_tokens[measured], [next(text_tokens) for _ in texts])
        flag = echo.flagged
        row.update(echo=flag, echo_content_share=echo.content_share, echo_longest_ngram=echo.longest_ngram)
        if rare is not None and row.get("kind") == "keyword":
            row["echo_rare_terms"] = rare_quoted(row["question"], texts, rare)
            flag = row["echo"] = flag or row["echo_rare_terms"] >= SHORT_MIN_RARE
        measured += 1
        flagged += flag
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
