"""Question kinds (generate.kinds): how their shares split the questions to generate, what each
kind's question is written from, when a reply of the kind is usable, and its golden row.

- single: one passage answers it (the golden set as it always was).
- keyword: a 2-6-word search-box query one passage answers; a row as single's. Held to the echo
  gauge's short-query rule (echo.SHORT_ECHO_RULE) besides the usual one.
- multi: a question that needs 2-3 passages that belong together, with one excerpt quoted from
  each, each anchored as its own evidence span (`evidence_spans`). The passages are chosen by
  their words, never by the embedding model under test (so no system is favoured): with each
  anchor passage (in the kind's seeded ranking) go the passage sharing the most rare terms with
  it (echo.rare_terms: in at most 2% of the passages; the score is the sum of the shared terms'
  IDF, log(N / document frequency); a tie goes to a passage of the same document, then to the
  earlier passage), and a third passage when one shares a rare term with both (the best by the
  sum of its two scores). Passages that overlap the anchor's text in its document never pair with
  it (the overlap would be their shared terms). An anchor that shares no rare term with any
  passage gets no multi question.
- unanswerable: a near-miss question on a passage's topic whose answer the corpus does not hold
  (the passage's key fact changed: the reply quotes the fact and says what it changed). Gold: no
  relevant chunk. Kept only when the reply states the changed fact and not every content word of
  the question occurs in one passage of the corpus (UNANSWERABLE_CHECK); with the judge on, the
  judge's grades are checked when scoring (evaluation.score.abstention).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping

import pandas as pd

from retrieval_bench.core.question_sets import QUESTION_KINDS
from retrieval_bench.goldenset import echo
from retrieval_bench.goldenset.build import assigned_kind, content_words, generated_row, question_id
from retrieval_bench.goldenset.evidence import evidence_in_passage, evidence_text, locate_in_passage
from retrieval_bench.llm.checks.passage_escape import passage_group
from retrieval_bench.retrieval.bm25 import tokenize

UNANSWERABLE_CHECK = (
    "lexical: the reply states the changed fact, and no reference passage holds every content word of the "
    "question (stemmed, stop words out); with the judge on, scoring leaves out any question a pooled chunk is "
    "graded as answering (n_unanswerable_contradicted in metrics.json)"
)
# The golden set's reasons for a kind's reply not being used (beside the reply checks' own).
REJECT_REASONS = {
    "answer_may_be_in_corpus": "an unanswerable question whose content words all occur in one passage (it may be answered)",
}


def allocate(total: int, kinds: tuple[tuple[str, float], ...]) -> dict[str, int]:
    """`total` questions split by the kinds' shares, by Sainte-Laguë's divisor method: the `total`
    largest of share / (2c + 1) over every kind and c = 0, 1, ... (ties: the earlier kind). It is
    the largest-remainder split but for rare cases, and, unlike it, never takes a question from a
    kind when `total` grows (the Alabama paradox: 299 to 300 questions gave an unanswerable one to
    multi and dropped a generated question)."""
    if total <= 0:
        return {kind: 0 for kind, _ in kinds}
    # Enough divisors per kind: a kind gets at most ceil(share * total) + 1 here.
    candidates = [
        (-round(share / (2 * c + 1), 12), order, c)
        for order, (kind, share) in enumerate(kinds)
        if share > 0
        for c in range(math.ceil(share * total) + 2)
    ]
    counts = {kind: 0 for kind, _ in kinds}
    for _, order, _ in sorted(candidates)[:total]:
        counts[kinds[order][0]] += 1
    return counts


def mix(rows: list[dict]) -> tuple[tuple[str, float], ...]:
    """The kinds of `rows` (assigned_kind) and their shares, in QUESTION_KINDS order."""
    counts = Counter(assigned_kind(row) for row in rows)
    return tuple((kind, counts[kind] / len(rows)) for kind in QUESTION_KINDS if counts[kind])


def ranking_seed(seed: int, kind: str) -> str:
    """The seed a kind's passages are ranked by: generate.seed for single (its choice as it always
    was), the seed and the kind's name for the others (each kind its own draw)."""
    return str(seed) if kind == "single" else f"{seed}/{kind}"


class Corpus:
    """The reference passages' words, for multi groups (rare terms) and the unanswerable check
    (content words); tokenized once, when first needed."""

    def __init__(self, passages: pd.DataFrame) -> None:
        self.records = passages.to_dict("records")
        self._tokens: list[set[str]] | None = None
        self._postings: dict[str, set[int]] | None = None
        self._rare: frozenset[str] | None = None
        self._idf: dict[str, float] | None = None  # rare term -> log(N / document frequency)
        self._position: dict[str, int] = {}

    @property
    def tokens(self) -> list[set[str]]:
        if self._tokens is None:
            self._tokens = [set(t) for t in tokenize([r["text"] for r in self.records])] if self.records else []
        return self._tokens

    @property
    def postings(self) -> dict[str, set[int]]:
        """term -> the passages holding it."""
        if self._postings is None:
            self._postings = defaultdict(set)
            for position, terms in enumerate(self.tokens):
                for term in terms:
                    self._postings[term].add(position)
        return self._postings

    def rare(self) -> frozenset[str]:
        if self._rare is None:
            self._rare = echo.rare_terms([list(t) for t in self.tokens])
        return self._rare

    def holding_all(self, question: str) -> str | None:
        """The chunk id of a passage holding every content word of `question`, or None."""
        terms = content_words([question])[0]
        if not terms:
            return None
        found: set[int] | None = None
        for term in sorted(terms, key=lambda t: len(self.postings.get(t, ()))):
            found = set(self.postings.get(term, ())) if found is None else found & self.postings.get(term, set())
            if not found:
                return None
        assert found  # terms is not empty
        return str(self.records[min(found)]["chunk_id"])

    def groups(self, anchors: Iterable[Mapping]) -> "Groups":
        """Multi-evidence units for `anchors` in order (see the module's docstring), made as a walk
        first reaches them: each a passage group with the fields of a passage (`text`: the
        passage_group) and its `passages`."""
        return Groups(self, anchors)

    def group(self, anchor: Mapping) -> dict | None:
        """The multi-evidence unit anchored at passage `anchor`, or None when it shares no rare term."""
        if self._idf is None:
            rare, n = self.rare(), len(self.records)
            self._idf = {term: math.log(n / len(self.postings[term])) for term in rare}
            self._position = {r["chunk_id"]: i for i, r in enumerate(self.records)}
        first = self._position[anchor["chunk_id"]]
        scores = self._partners(first)
        if not scores:
            return None
        ranked = sorted(scores, key=lambda i: (-scores[i], self._other_document(first, i), i))
        chosen = [first, ranked[0]]
        second = self._partners(ranked[0])
        thirds = [i for i in ranked[1:] if i in second and self.records[i]["text_sha256"] not in self._shas(chosen)]
        if thirds:
            chosen.append(max(thirds, key=lambda i: (scores[i] + second[i], -i)))
        return self._unit([self.records[i] for i in chosen])

    def _partners(self, first: int) -> dict[int, float]:
        """Passages sharing a rare term with passage `first` (not overlapping it, not its text): their scores."""
        assert self._idf is not None  # set by group()
        idf = self._idf
        scores: dict[int, float] = defaultdict(float)
        mine = self.records[first]
        for term in self.tokens[first] & idf.keys():
            for other in self.postings[term]:
                record = self.records[other]
                overlapping = record["doc_id"] == mine["doc_id"] and (
                    record["start"] < mine["end"] and mine["start"] < record["end"]
                )
                if other != first and not overlapping and record["text_sha256"] != mine["text_sha256"]:
                    scores[other] += idf[term]
        return dict(scores)

    def _other_document(self, first: int, other: int) -> bool:
        return self.records[first]["doc_id"] != self.records[other]["doc_id"]

    def _shas(self, chosen: list[int]) -> set[str]:
        return {self.records[i]["text_sha256"] for i in chosen}

    @staticmethod
    def _unit(passages: list[dict]) -> dict:
        text = passage_group([p["text"] for p in passages])
        return {
            "chunk_id": passages[0]["chunk_id"],
            "doc_id": passages[0]["doc_id"],
            "text": text,
            "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "passages": passages,
        }


class Groups:
    """Corpus.groups' units, each made when a walk first reaches it and kept (a walk goes only as far
    down the ranking as its budget needs, and walks again each round)."""

    def __init__(self, corpus: Corpus, anchors: Iterable[Mapping]) -> None:
        self._corpus = corpus
        self._anchors = iter(anchors)
        self._made: list[dict] = []
        self._seen: set[frozenset[str]] = set()  # the passage sets already made into a unit

    def __iter__(self) -> Iterator[dict]:
        position = 0
        while position < len(self._made) or self._make():
            yield self._made[position]
            position += 1

    def _make(self) -> bool:
        """Make the next anchor's unit (anchors without one, or whose passages an earlier unit already
        groups, are passed over: A's best partner B often has A as its own, and one group asked twice
        is paid twice and weighted twice in every mean); False when none is left."""
        for anchor in self._anchors:
            unit = self._corpus.group(anchor)
            if unit is None:
                continue
            passages = frozenset(str(p["chunk_id"]) for p in unit["passages"])
            if passages not in self._seen:
                self._seen.add(passages)
                self._made.append(unit)
                return True
        return False


def evidence_reason(kind: str, record: dict, unit: dict) -> str | None:
    """evidence_not_in_passage when a reply's excerpt is not in the passage it was written from (a
    multi reply: an excerpt not in its own passage, or not one per passage); else None. An empty
    excerpt of a one-passage kind anchors the question to its whole passage."""
    if kind == "multi":
        pieces = record.get("evidence_pieces") or []
        located = len(pieces) == len(unit["passages"]) and all(
            evidence_in_passage(piece, passage["text"]) for piece, passage in zip(pieces, unit["passages"], strict=True)
        )
        return None if located else "evidence_not_in_passage"
    evidence = record.get("evidence") or ""
    return "evidence_not_in_passage" if evidence and not evidence_in_passage(evidence, unit["text"]) else None


def corpus_reason(kind: str, record: dict, corpus: Corpus) -> str | None:
    """answer_may_be_in_corpus for an unanswerable question one passage holds every content word of."""
    if kind == "unanswerable" and corpus.holding_all(record["question"]) is not None:
        return "answer_may_be_in_corpus"
    return None


def echoes(kind: str, record: dict, unit: dict, corpus: Corpus) -> bool:
    """Whether a reply echoes its evidence (the whole passage when it quotes none): every excerpt
    of a multi question; a keyword query by the short-query rule too; never a near miss, whose
    answer no passage holds."""
    if kind == "unanswerable":
        return False
    if kind == "multi":
        texts = [
            evidence_text(piece, p["text"])
            for piece, p in zip(record["evidence_pieces"], unit["passages"], strict=True)
        ]
        return echo.is_echo(record["question"], texts)
    evidence = evidence_text(record.get("evidence") or "", unit["text"])
    return echo.is_echo(record["question"], evidence, corpus.rare() if kind == "keyword" else None)


def kind_row(kind: str, record: dict, unit: dict, texts: Mapping[str, str]) -> dict:
    """The golden row of a usable reply of `kind` over `unit` (`texts`: the documents by id)."""
    if kind in ("single", "keyword"):
        return {**generated_row(record, unit, texts[unit["doc_id"]]), "kind": kind}
    if kind == "unanswerable":
        return {
            "qid": question_id(unit["doc_id"], record["question"]),
            "question": record["question"],
            "gold_chunk_id": None,
            "doc_id": None,
            "start": None,
            "end": None,
            "chunk_sha256": None,
            "source": record["model"],
            "prompt_sha256": record["prompt_sha256"],
            "evidence_located": None,
            "kind": kind,
            "evidence_spans": [],
            "near_doc_id": unit["doc_id"],
        }
    spans = []
    for piece, passage in zip(record["evidence_pieces"], unit["passages"], strict=True):
        start = int(passage["start"])
        span = locate_in_passage(piece, texts[passage["doc_id"]][start : int(passage["end"])])
        assert span is not None  # walk kept only replies whose every excerpt is in its passage
        spans.append({"doc_id": passage["doc_id"], "start": span[0] + start, "end": span[1] + start})
    first = unit["passages"][0]
    row = generated_row({**record, "evidence": record["evidence_pieces"][0]}, first, texts[first["doc_id"]])
    return {**row, "kind": kind, "evidence_spans": spans}
