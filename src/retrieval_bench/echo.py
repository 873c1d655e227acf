"""The echo gauge: does a question give its answer away by copying the words of its passage?

A question that repeats its passage's wording is easy for any lexical retriever and flatters
every method; real users rarely type the document's own phrases. For every question this
measures, against its gold passage (the reference passage its evidence lies in):

- ``echo_content_share``: the share of the question's distinct content words (lowercased,
  English stop words removed, Snowball-stemmed: retrieval_bench.lexical.tokenize) that also
  occur in the passage;
- ``echo_longest_ngram``: the length, in words, of the longest run of consecutive words
  (lowercased, stop words included, not stemmed) that the question shares with the passage;
- ``bm25_rank``: the rank of the gold passage among all reference passages when BM25
  (retrieval_bench.lexical) searches with the question; 1 = first.

The rule (ECHO_RULE): a question echoes its passage if it shares a run of
ECHO_MIN_NGRAM (5) or more words with it, or if at least ECHO_MIN_SHARE (90%) of its content
words occur in it and it has at least ECHO_MIN_CONTENT_WORDS (3) of them (a two-word
question naming its topic is not an echo). Paraphrased questions, like the bundled
hand-written ones, share no five-word run and at most 86% of their content words.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from retrieval_bench.lexical import bm25_scores, tokenize
from retrieval_bench.rank import judged_ranks

ECHO_MIN_NGRAM = 5
ECHO_MIN_SHARE = 0.9
ECHO_MIN_CONTENT_WORDS = 3
ECHO_RULE = (
    f"longest word run shared with the gold passage >= {ECHO_MIN_NGRAM} words, or >= {ECHO_MIN_SHARE:.0%} "
    f"of the question's content words (at least {ECHO_MIN_CONTENT_WORDS}) found in it"
)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def words(text: str) -> list[str]:
    """Lowercased words: letters and digits, keeping inner apostrophes (don't, SQLite's)."""
    return [w.replace("’", "'") for w in _WORD.findall(text.lower())]


def longest_shared_run(question: str, passage: str) -> int:
    """Length in words of the longest run of consecutive words found in both texts."""
    a, b = words(question), words(passage)
    if not a or not b:
        return 0
    best = 0
    previous = [0] * (len(b) + 1)
    for word in a:
        current = [0] * (len(b) + 1)
        for j, other in enumerate(b, 1):
            if word == other:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best = current[j]
        previous = current
    return best


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


def measure(question: str, passage: str, passage_tokens: set[str] | None = None) -> Echo:
    """The echo measures of one question against its passage (tokens may be given pre-computed)."""
    question_tokens = set(tokenize([question])[0])
    if passage_tokens is None:
        passage_tokens = set(tokenize([passage])[0])
    share = len(question_tokens & passage_tokens) / len(question_tokens) if question_tokens else 0.0
    return Echo(round(share, 4), len(question_tokens), longest_shared_run(question, passage))


def is_echo(question: str, passage: str) -> bool:
    return measure(question, passage).flagged


def bm25_ranks(passage_texts: list[str], questions: list[str], gold_indices: list[int]) -> list[int]:
    """Rank (1 = best) of each question's gold passage among all passages under BM25, ties broken
    pessimistically as in scoring."""
    if not questions:
        return []
    judged = [np.array([gold]) for gold in gold_indices]
    return [int(ranks[0]) for ranks in judged_ranks(bm25_scores(passage_texts, questions), len(questions), judged)]


def gauge(rows: list[dict], passage_texts: dict[str, str], all_passages: list[str], all_ids: list[str]) -> dict:
    """Mark every row (in place) with its echo measures and return the summary.

    `passage_texts` maps a row's gold_chunk_id to its passage text; `all_passages`/`all_ids` are
    every reference passage, the BM25 candidates. Rows whose gold passage is unknown get null
    measures and are left out of the summary."""
    token_cache: dict[str, set[str]] = {}
    measured = [row for row in rows if row.get("gold_chunk_id") in passage_texts]
    for row in measured:
        text = passage_texts[row["gold_chunk_id"]]
        if row["gold_chunk_id"] not in token_cache:
            token_cache[row["gold_chunk_id"]] = set(tokenize([text])[0])
        echo = measure(row["question"], text, token_cache[row["gold_chunk_id"]])
        row.update(echo=echo.flagged, echo_content_share=echo.content_share, echo_longest_ngram=echo.longest_ngram)
    position = {chunk_id: index for index, chunk_id in enumerate(all_ids)}
    ranked = [row for row in measured if row["gold_chunk_id"] in position]
    ranks = bm25_ranks(all_passages, [r["question"] for r in ranked], [position[r["gold_chunk_id"]] for r in ranked])
    for row, rank in zip(ranked, ranks):
        row["bm25_rank"] = rank
    measured_ids = {id(row) for row in measured}
    for row in rows:
        if id(row) not in measured_ids:
            row.update(echo=None, echo_content_share=None, echo_longest_ngram=None)
        row.setdefault("bm25_rank", None)
    n = len(measured)
    return {
        "echo_rate": round(sum(r["echo"] for r in measured) / n, 4) if n else None,
        "echo_rule": ECHO_RULE,
        "bm25_mrr": round(float(np.mean([1 / r for r in ranks])), 4) if ranks else None,
        "bm25_recall@1": round(float(np.mean([r == 1 for r in ranks])), 4) if ranks else None,
        "n_measured": n,
    }
