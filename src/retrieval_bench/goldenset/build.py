"""Golden rows: questions anchored to evidence spans in documents, or real labels; de-duplication
and sampling (retrieval_bench.goldenset.assemble puts them together).

A synthetic question is anchored to the evidence it was written from (a span of its document),
not to a chunk, so the same golden set scores any chunking of the corpus.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.files import numbered_jsonl
from retrieval_bench.core.question_form import CORE_INTERROGATIVES, reads_as_question
from retrieval_bench.core.question_sets import QUESTION_KINDS, check_handwritten
from retrieval_bench.goldenset.echo import SHORT_QUERY_WORDS, words
from retrieval_bench.goldenset.evidence import UNLOCATED_NAMED, locate_in_passage, not_located_line
from retrieval_bench.goldenset.formats import MAX_PIECES, SOURCES, hashed_qid, normalise_question, read_question_set
from retrieval_bench.goldenset.locate import EvidenceFinder, passage_finder
from retrieval_bench.retrieval.bm25 import tokenize

# Fields a golden row gets after _row (the echo gauge, hygiene flags, its question set, chunk labels):
# a record's own field of one of these names is kept as own_<name>, never read as ours.
LATER_FIELDS = frozenset(
    {
        "question_set",
        "echo",
        "echo_content_share",
        "echo_longest_ngram",
        "context_dependent",
        "near_duplicate_of",
        "relevant",
        "relevant_spans",
    }
)
# The formats whose questions carry evidence texts, located in the documents as hand-written ones.
EVIDENCE_FORMATS = tuple(SOURCES)
# The formats whose question with several evidence texts is a multi-evidence question (each text a
# piece); LlamaIndex's several relevant nodes stay one question anchored to the first, as before.
MULTI_CONTEXT_FORMATS = ("ragas", "deepeval")


def question_id(doc_id: str, question: str) -> str:
    return hashed_qid(question, doc_id)


def read_handwritten(path: str | Path) -> list[dict]:
    """Questions the user brings: hand-written JSONL (question, evidence, doc_id, optional qid and
    any other fields), a ragas testset (CSV/JSONL), a LlamaIndex EmbeddingQAFinetuneDataset (JSON)
    or DeepEval goldens (see evidence_records). A missing file is an InputError, as it is to
    `dvc repro` (the stage depends on it): a mistyped path must not plan, or pay for, questions
    as if there were none; an empty file holds none."""
    path = check_handwritten(path)
    if not path.read_bytes().strip():  # the way to have none under `dvc repro`, which needs the file
        return []
    lines: list[int] = []  # a JSONL file's: the line of each record
    if path.suffix.lower() == ".jsonl":
        for line, record in numbered_jsonl(path):
            # doc_id may be left out (generate-goldenset.md): the evidence is then looked for everywhere
            needed = {"question"} | ({"evidence"} if record.get("kind") not in ("multi", "unanswerable") else set())
            missing = needed - set(record)
            own_format = {"user_input", "reference_contexts"} <= set(record) or "input" in record
            if missing and not (own_format or {"reference_context", "metadata"} <= set(record)):
                raise InputError(f"{path}:{line}: record {len(lines) + 1} lacks {', '.join(sorted(missing))}")
            lines.append(line)
    kind, questions = read_question_set(path)
    if kind not in EVIDENCE_FORMATS:
        raise InputError(
            f"{path}: generate.handwritten takes hand-written JSONL, a ragas testset, a LlamaIndex dataset, "
            f"DeepEval goldens or a Giskard testset, not a {kind} set"
        )
    records = evidence_records(kind, questions)
    for number, record in enumerate(records, 1):  # a JSONL file's questions are its records, in order
        record["where"] = f"{path}:{lines[number - 1]}" if lines else f"{path}: record {number}"
    return records


def evidence_records(kind: str, questions: list[dict]) -> list[dict]:
    """Records handwritten_rows locates, from read_question_set's `questions` of format `kind`:
    qid (None: derived), question, evidence (the first text), doc_id (None: any document), source
    (the tool that wrote the set: hand-written, ragas, llamaindex, deepeval, giskard), extra (the
    source's other fields, kept as-is), the question's kind and, for a multi-evidence question,
    its pieces [{doc_id, evidence}]: a hand-written multi question's, or a ragas or DeepEval
    question's several contexts (doc_id None: any document)."""
    records = []
    for question in questions:
        texts = question["evidence"]
        question_kind = question.get("kind") or ("multi" if kind in MULTI_CONTEXT_FORMATS and len(texts) > 1 else None)
        pieces = question.get("pieces") or [{"doc_id": None, "evidence": text} for text in texts]
        if question_kind == "multi" and len(pieces) > MAX_PIECES:
            raise InputError(
                f"{SOURCES[kind]} question {quoted(question['question'])}: {len(pieces)} contexts, a multi-evidence "
                f"question takes at most {MAX_PIECES}"
            )
        records.append(
            {
                "qid": question["qid"],  # None: derived from document and question, as it always was
                "question": question["question"],
                "evidence": texts[0] if texts else "",
                "doc_id": question.get("doc_id"),
                "source": SOURCES[kind],
                "extra": question["extra"],
                **({"kind": question_kind} if question_kind else {}),  # unsaid: assigned by rule (assigned_kind)
                **({"pieces": pieces} if question_kind == "multi" else {}),
            }
        )
    return records


def _corpus_ids(texts: Mapping[str, str]) -> Callable[[object], object]:
    """A question's doc_id as this corpus spells it: the same in either Unicode form (a file name
    copied from macOS is decomposed, NFD; typed, composed, NFC); None stays None (anywhere)."""
    by_form = {unicodedata.normalize("NFC", doc_id): doc_id for doc_id in texts}

    def corpus_id(doc_id: object) -> object:
        if doc_id is None or doc_id in texts:
            return doc_id
        return by_form.get(unicodedata.normalize("NFC", str(doc_id)), doc_id)

    return corpus_id


def _other_corpus_line(record: Mapping, doc_id: object, texts: Mapping[str, str]) -> str:
    """Why a question was skipped: its doc_id, and a document id it may have meant (another case,
    or a path ending in it)."""

    def folded(text: str) -> str:
        return unicodedata.normalize("NFC", text).casefold()

    wanted = folded(str(doc_id))
    near = [d for d in texts if folded(d) == wanted or folded(d).endswith("/" + wanted.lstrip("./"))]
    hint = f" (did you mean {quoted(near[0])}?)" if near else ""
    return f"{record.get('where', 'a hand-written question')}: doc_id {quoted(str(doc_id))} is not a document id of this corpus{hint}"


def handwritten_rows(
    records: list[dict], documents: pd.DataFrame, passages: pd.DataFrame, unlocated: list[str] | None = None
) -> tuple[list[dict], dict[str, int]]:
    """Golden rows for questions brought with their evidence (evidence_records) found in this
    corpus. A row's source is its record's (the tool's); rows of a tool other than hand-written
    JSONL say `question_set: hand-written`. A field of the record's own that a golden row also
    has (its own `source`, say) is kept as own_<field>. The first UNLOCATED_NAMED questions whose
    evidence is not found are described in `unlocated` (not_located_line), and so are those whose
    evidence occurs more than once (counts: ambiguous_evidence). A multi-evidence
    question is kept when every piece is found (its row: the first piece, and evidence_spans); an
    unanswerable one has no evidence to find (its doc_id, when given, must be in the corpus)."""
    texts = dict(zip(documents["doc_id"], documents["text"], strict=True))
    finder, best_passage = EvidenceFinder(texts), passage_finder(passages)
    counts = {"other_corpus": 0, "not_located": 0, "ambiguous_evidence": 0}
    corpus_id = _corpus_ids(texts)
    rows = []
    for record in records:
        kind = record.get("kind", "single")
        record = {**record, "doc_id": corpus_id(record.get("doc_id"))}
        pieces = [{**piece, "doc_id": corpus_id(piece["doc_id"])} for piece in record.get("pieces") or ()] or [
            {"doc_id": record["doc_id"], "evidence": record["evidence"]}
        ]  # its doc_id mapped above
        if lacking := next((p["doc_id"] for p in pieces if p["doc_id"] is not None and p["doc_id"] not in texts), None):
            counts["other_corpus"] += 1
            if unlocated is not None and counts["other_corpus"] <= UNLOCATED_NAMED:
                unlocated.append(_other_corpus_line(record, lacking, texts))
            continue
        source = record.get("source", "hand-written")
        if kind == "unanswerable":
            row = unanswerable_row(record["question"], record.get("doc_id"), source)
        else:
            spans = []
            for piece in pieces:
                found = finder.locate(piece["evidence"], piece["doc_id"])
                if found is None:
                    break
                spans.append(found)
            if len(spans) < len(pieces):
                counts["not_located"] += 1
                if unlocated is not None and counts["not_located"] <= UNLOCATED_NAMED:
                    unlocated.append(not_located_line({**record, **pieces[len(spans)]}, texts))
                continue
            repeats = [
                (found, finder.occurrences(*found, anywhere=piece["doc_id"] is None), piece["doc_id"] is None)
                for piece, found in zip(pieces, spans, strict=True)
            ]
            if any(n > 1 for _, n, _ in repeats):
                counts["ambiguous_evidence"] += 1
                (doc, (a, b)), n, anywhere = next(item for item in repeats if item[1] > 1)
                if unlocated is not None and counts["ambiguous_evidence"] <= UNLOCATED_NAMED:
                    unlocated.append(
                        f"{record.get('where', 'a hand-written question')}: evidence {quoted(texts[doc][a:b], 60)} occurs "
                        f"{n} times{' in the corpus' if anywhere else ''}; the first (in {doc}) is taken: "
                        "quote more of the passage to pin it"
                    )
            doc_id, span = spans[0]
            passage = best_passage(doc_id, *span)
            assert passage is not None  # the evidence was found in the document, which has passages
            row = _row(record["question"], passage, span, source, None, True)
            if kind == "multi":
                row["evidence_spans"] = [{"doc_id": d, "start": int(a), "end": int(b)} for d, (a, b) in spans]
            # the kind the source said, else the rule's (and kind_by rule)
            row.update({"kind": record["kind"]} if record.get("kind") else by_rule(row))
        if record.get("qid") is not None:
            row["qid"] = str(record["qid"])
        if source != "hand-written":
            row["question_set"] = "hand-written"
        extra = record.get("extra", {})
        rows.append({**{f"own_{k}" if k in row or k in LATER_FIELDS else k: v for k, v in extra.items()}, **row})
    return rows, counts


def assigned_kind(row: Mapping) -> str:
    """The kind of a real or hand-written question (golden row), by rule, in this order: the kind its
    row says; unanswerable when none of its evidence is relevant (no gold chunk and no relevant
    grade); multi with two or more evidence spans; keyword for echo.SHORT_QUERY_WORDS words or
    fewer that do not read as a question; else single. Golden rows carry it (the rule is what
    generate.kinds match reads the real questions' mix by)."""
    if row.get("kind") in QUESTION_KINDS:
        return str(row["kind"])
    relevant = row.get("relevant")
    if (row.get("gold_chunk_id") is None and not row.get("evidence_spans")) or (
        relevant is not None and not any(grade > 0 for grade in relevant.values())
    ):
        return "unanswerable"
    if len(row.get("evidence_spans") or []) >= 2:
        return "multi"
    if len(words(row["question"])) <= SHORT_QUERY_WORDS and not reads_as_question(row["question"]):
        return "keyword"
    return "single"


RULE = "rule"  # a row's kind_by: its kind came from assigned_kind (goldenset.kind_classifier may ask the LLM)


def by_rule(row: Mapping) -> dict[str, str]:
    """The fields of a row whose source names no kind: its kind by assigned_kind, and kind_by rule."""
    return {"kind": assigned_kind(row), "kind_by": RULE}


def unanswerable_row(question: str, near_doc_id: str | None, source: str) -> dict:
    """A golden row for a question the corpus does not answer: no evidence, no relevant chunk;
    near_doc_id, the document it was written near, when known."""
    return {
        "qid": question_id(near_doc_id or "", question),
        "question": question,
        "gold_chunk_id": None,
        "doc_id": None,
        "start": None,
        "end": None,
        "chunk_sha256": None,
        "source": source,
        "prompt_sha256": None,
        "evidence_located": None,
        "kind": "unanswerable",
        "evidence_spans": [],
        **({"near_doc_id": near_doc_id} if near_doc_id is not None else {}),
    }


def generated_row(record: dict, passage: Mapping, document: str) -> dict:
    """A golden row for a cached generated question over `passage`; the evidence excerpt is looked
    for in the passage that was sent only (never elsewhere in the document, where a chunk's text
    could steer it), else the whole passage is the evidence."""
    passage_text = document[passage["start"] : passage["end"]]
    span = locate_in_passage(record.get("evidence") or "", passage_text)
    if span is not None:
        span = (span[0] + int(passage["start"]), span[1] + int(passage["start"]))
    located = span is not None
    if span is None:
        span = (int(passage["start"]), int(passage["end"]))
    return _row(record["question"], passage, span, record["model"], record["prompt_sha256"], located)


def _row(
    question: str, passage: Mapping, span: tuple[int, int], source: str, prompt_sha256: str | None, located: bool
) -> dict:
    return {
        "qid": question_id(passage["doc_id"], question),
        "question": question,
        "gold_chunk_id": passage["chunk_id"],
        "doc_id": passage["doc_id"],
        "start": int(span[0]),
        "end": int(span[1]),
        "chunk_sha256": passage["text_sha256"],
        "source": source,
        "prompt_sha256": prompt_sha256,
        "evidence_located": located,
    }


def evidence_texts(rows: list[dict], texts: Mapping[str, str]) -> list[list[str]]:
    """Each row's evidence: its span of its document (a multi-evidence question: each of its
    evidence_spans), or for chunk labels the relevant chunks' texts: where their relevant_spans
    say, else by chunk id (`texts` maps document ids, which are the chunk ids of a pre-chunked
    corpus); none for an unanswerable question."""
    evidence = []
    for row in rows:
        if row.get("evidence_spans"):  # a multi-evidence question's pieces
            evidence.append(
                [texts[p["doc_id"]][p["start"] : p["end"]] for p in row["evidence_spans"] if p["doc_id"] in texts]
            )
        elif row.get("relevant_spans"):
            evidence.append([texts[d][s:e] for d, s, e, grade in row["relevant_spans"] if grade > 0 and d in texts])
        elif row.get("relevant") is not None:
            evidence.append([texts[c] for c, grade in row["relevant"].items() if grade > 0 and c in texts])
        elif row.get("doc_id") in texts and row.get("start") is not None:
            evidence.append([texts[row["doc_id"]][int(row["start"]) : int(row["end"])]])
        else:
            evidence.append([])
    return evidence


def label_rows(labels: list[dict]) -> list[dict]:
    """Golden rows for real labels: several relevant chunks per question, graded, and where those
    chunks lie (relevant_spans, when the labels carry them: judged so under another chunking)."""
    rows = []
    for label in labels:
        graded = sorted(label["relevant"].items(), key=lambda item: -item[1])
        rows.append(
            {
                "qid": label["qid"],
                "question": label["question"],
                "gold_chunk_id": graded[0][0],
                "doc_id": None,
                "start": None,
                "end": None,
                "chunk_sha256": None,
                "source": "qrels",
                "prompt_sha256": None,
                "evidence_located": None,
                "relevant": label["relevant"],
                **({"relevant_spans": label["relevant_spans"]} if "relevant_spans" in label else {}),
            }
        )
        rows[-1].update(by_rule(rows[-1]))
    return rows


def deduplicate(rows: list[dict]) -> tuple[list[dict], int]:
    """Keep the first of identical questions (same text, ignoring case) and of repeated qids:
    one question labelled with two different chunks is an ambiguous label."""
    seen: set[str] = set()
    kept = []
    for row in rows:
        key = normalise_question(row["question"])
        if key in seen or row["qid"] in seen:
            continue
        seen.update((key, row["qid"]))
        kept.append(row)
    return kept, len(rows) - len(kept)


def sample_rows(rows: list[dict], max_questions: int, seed: int) -> list[dict]:
    """A reproducible random subset of at most `max_questions` rows (0 = all), in qid order: the
    first by sha256(seed, qid), so a question is kept or not by its own hash. Raising max_questions
    by one adds one question, adding a question displaces at most one (a draw of positions swapped
    about 40% of them, and compare pairs runs by qid)."""
    rows = sorted(rows, key=lambda row: row["qid"])
    if max_questions and len(rows) > max_questions:
        ranked = sorted(
            rows, key=lambda row: (hashlib.sha256(f"{seed}\0{row['qid']}".encode()).hexdigest(), row["qid"])
        )
        rows = sorted(ranked[:max_questions], key=lambda row: row["qid"])
    return rows


# --------------------------------------------------------------------------------------------
# Question hygiene: questions that need their passage in view, and near-duplicate questions
# --------------------------------------------------------------------------------------------
_DOCUMENT_PART = (
    r"(?:passage|text|excerpt|snippet|paragraph|section|document|article|page|chapter|context|chunk|extract)s?"
)
_POINTED_THING = r"(?:passage|excerpt|snippet|chunk|example|table|figure|diagram|code|listing|list|section|paragraph|statement|command)s?"
_CONTEXT_PHRASE = re.compile(
    rf"""\b(?:
        (?:in|from|of|within|per|according\ to|based\ on)\s+(?:this|the|these)\s+{_DOCUMENT_PART}
      | (?:this|these|above|below|the\ above|the\ following|the\ preceding)\s+{_POINTED_THING}
      | the\s+(?:above|following|preceding|aforementioned)
      | (?:mentioned|described|shown|given|listed|discussed|defined|presented|stated|outlined|explained)\s+(?:above|here|below|earlier|previously)
      | according\ to\ the\ (?:author|writer|passage|text|document|article)
    )\b""",
    re.IGNORECASE | re.VERBOSE,
)
# A question's opening words: the core interrogatives (question_form's) and the words that extend
# one ("how long", "how many", "which of").
_LEAD = CORE_INTERROGATIVES | {"of", "long", "much", "many", "often"}
_POINTING = {"it", "this", "that", "these", "those", "they", "them", "its", "their", "he", "she", "his", "her"}
_BE = {"is", "was", "isn't", "wasn't", "would", "will"}
_EXPLETIVE_TAIL = {"to", "for", "if", "when", "whether", "that"}
_IDIOMS = {"take", "takes", "matter", "matters"}  # "how long does it take to ...", "does it matter whether ..."
# "Is it worth enabling WAL mode?", "Is it faster with an index?": a yes/no question opening "is it"
# whose predicate runs on says what it asks about; a short one ("Is it thread-safe?") points.
_COPULA = {"is", "was", "isn't", "wasn't"}
_PREDICATE_WORDS = 3


def context_dependent(question: str) -> str | None:
    """What makes `question` need its passage in view, or None: a phrase pointing at the text ("in
    this section", "the above example", "according to the passage", "which of the following"), or
    an opening pronoun with nothing to refer to ("What does it return?", "How does this work?").
    The dummy `it` of "is it safe to ...", "why is it bad for ... when", "does it matter whether"
    and of a yes/no "is it ..." whose predicate runs on ("is it worth enabling WAL mode?") is not one."""
    match = _CONTEXT_PHRASE.search(question)
    if match:
        return match.group(0)
    tokens = words(question)
    lead = 0
    while lead < min(len(tokens), 4) and tokens[lead] in _LEAD:
        lead += 1
    if lead >= len(tokens) or tokens[lead] not in _POINTING:
        return None
    after = tokens[lead + 1 : lead + 6]
    if tokens[lead] == "it" and (
        (lead and tokens[lead - 1] in _BE and _EXPLETIVE_TAIL & set(after))
        or (after and after[0] in _IDIOMS)
        or (lead == 1 and tokens[0] in _COPULA and len(tokens) - 2 >= _PREDICATE_WORDS)
    ):
        return None
    return " ".join(tokens[: lead + 1])


_QUESTION_WORDS: frozenset[str] | None = None


def content_words(questions: list[str]) -> list[frozenset[str]]:
    """Each question's stemmed content words: retrieval.bm25.tokenize (English stop words out) less
    the words every question has (how, what, do, can, I, my, ...); one tokenize call for all."""
    global _QUESTION_WORDS
    if _QUESTION_WORDS is None:
        common = sorted(_LEAD | _POINTING | {"i", "me", "my", "we", "our", "you", "your", "there", "get", "use", "way"})
        _QUESTION_WORDS = frozenset(word for words_of in tokenize(common) for word in words_of) | frozenset(common)
    return [frozenset(tokens) - _QUESTION_WORDS for tokens in tokenize(list(questions))] if questions else []


class QuestionIndex:
    """Questions seen so far, to find a new one's exact or near duplicate: the same normalised
    text, or a Jaccard similarity of their content words (content_words) >= `near_jaccard`. Lexical,
    not embeddings: the golden set is built before (and independently of) the embed stage, so
    changing embed.model never changes it.

    Near duplicates by prefix filtering (Chaudhuri et al., 2006): two word sets with Jaccard >= t
    share a word among the first n - floor(t*n) + 1 of each (n: its size) in one fixed word order,
    so only those prefixes are indexed and probed, not every word, and a pair whose first shared
    word comes too late to share enough is not compared (PPJoin's positional filter); `frequency`
    (word -> how many questions hold it, when they are known in advance) puts rare words first,
    which keeps a word every question has out of the prefixes. The answers are those of comparing
    every pair; the work grows with the pairs that could be near, not with every pair."""

    def __init__(self, near_jaccard: float | None = None, frequency: Mapping[str, int] | None = None) -> None:
        self.near_jaccard = near_jaccard
        self.frequency = frequency or {}
        self.exact: dict[str, str] = {}
        self.sets: list[tuple[frozenset[str], str]] = []
        # word -> (size of a set, the word's position in its prefix) -> the sets: the positional
        # filter below rules out a whole group at once.
        self.by_word: dict[str, dict[tuple[int, int], list[int]]] = {}

    def _prefix(self, words_of: frozenset[str]) -> list[str]:
        ordered = sorted(words_of, key=lambda word: (self.frequency.get(word, 0), word))
        near_jaccard = self.near_jaccard
        assert near_jaccard is not None  # only near-duplicate checks use the prefixes
        return ordered[: max(0, len(ordered) - int(near_jaccard * len(ordered)) + 1)]

    def add(self, question: str, label: str = "", words_of: frozenset[str] | None = None) -> None:
        """Index `question` (`words_of`: its content_words, when already known)."""
        self.exact.setdefault(normalise_question(question), label)
        if self.near_jaccard is None:
            return
        words_of = content_words([question])[0] if words_of is None else words_of
        for position, word in enumerate(self._prefix(words_of)):
            self.by_word.setdefault(word, {}).setdefault((len(words_of), position), []).append(len(self.sets))
        self.sets.append((words_of, label))

    def __contains__(self, question: str) -> bool:
        return normalise_question(question) in self.exact

    def near(self, question: str, words_of: frozenset[str] | None = None) -> tuple[str, float] | None:
        """(label, similarity) of the most similar earlier question at or above the threshold."""
        if self.near_jaccard is None:
            return None
        words_of = content_words([question])[0] if words_of is None else words_of
        size, threshold = len(words_of), self.near_jaccard
        # At the first prefix word two sets share (word `mine` of this one, `theirs` of the other),
        # no earlier word of either is shared: they share at most 1 + the words after it in the
        # smaller rest, and Jaccard >= t needs t*(n+m)/(1+t) shared words (less a rounding margin).
        # A later shared word only lets a set through that the exact comparison then rules out.
        candidates = set()
        for mine, word in enumerate(self._prefix(words_of)):
            for (other, theirs), sets in self.by_word.get(word, {}).items():
                if 1 + min(size - mine - 1, other - theirs - 1) >= threshold * (size + other) / (1 + threshold) - 1e-9:
                    candidates.update(sets)
        best = None
        for i in sorted(candidates):
            other_words, label = self.sets[i]
            similarity = len(words_of & other_words) / len(words_of | other_words)
            if similarity >= self.near_jaccard and (best is None or similarity > best[1]):
                best = (label, round(similarity, 4))
        return best


@dataclass(frozen=True)
class Hygiene:
    """What the generate section says about unhygienic questions: regenerate (then drop) them or not."""

    drop_context_dependent: bool = False
    drop_near_duplicates: bool = False
    near_jaccard: float = 0.7

    @classmethod
    def from_params(cls, params: Mapping) -> "Hygiene":
        return cls(
            bool(params.get("drop_context_dependent", False)),
            bool(params.get("drop_near_duplicates", False)),
            float(params.get("near_duplicate_jaccard", cls.near_jaccard)),
        )

    def reason(self, question: str, seen: "QuestionIndex", words_of: frozenset[str] | None = None) -> str | None:
        """Why `question` is not used given the questions `seen` (exact duplicates always), or None."""
        if question in seen:
            return "duplicate_question"
        if self.drop_near_duplicates and seen.near(question, words_of):
            return "near_duplicate_question"
        if self.drop_context_dependent and context_dependent(question):
            return "context_dependent"
        return None

    def index(self, questions: Iterable[str] = (), frequency: Mapping[str, int] | None = None) -> "QuestionIndex":
        index = QuestionIndex(self.near_jaccard if self.drop_near_duplicates else None, frequency)
        for question in questions:
            index.add(question)
        return index


def word_frequency(word_sets: list[frozenset[str]]) -> Counter:
    """How many of the word sets hold each word: QuestionIndex's order, rare words first."""
    return Counter(word for words_of in word_sets for word in words_of)


def drop_unhygienic(rows: list[dict], hygiene: Hygiene) -> tuple[list[dict], list[dict]]:
    """Hand-written rows without those hygiene drops (a near-duplicate of an earlier row, one that
    needs its passage), and the rejects to list: (kept, rejects)."""
    kept, rejects = [], []
    word_sets = content_words([row["question"] for row in rows]) if hygiene.drop_near_duplicates else [None] * len(rows)
    index = hygiene.index(frequency=word_frequency([w for w in word_sets if w is not None]))
    for row, words_of in zip(rows, word_sets, strict=True):
        reason = hygiene.reason(row["question"], index, words_of)
        if reason is None:
            kept.append(row)
            index.add(row["question"], row["qid"], words_of)
        else:
            rejects.append(
                {
                    "reason": reason,
                    "source": row["source"],
                    "chunk_id": row["gold_chunk_id"],
                    "doc_id": row["doc_id"],
                    "question": row["question"],
                    "regenerated": False,
                }
            )
    return kept, rejects


def mark_hygiene(rows: list[dict], near_jaccard: float) -> dict:
    """Flag (in place) questions that need their passage (`context_dependent`: the phrase) and
    near-duplicates of an earlier row (`near_duplicate_of`: its qid); the keys are added to flagged
    rows only. Returns the counts for metrics/goldenset.json."""
    word_sets = content_words([row["question"] for row in rows])
    index = QuestionIndex(near_jaccard, word_frequency(word_sets))
    for row, words_of in zip(rows, word_sets, strict=True):
        phrase = context_dependent(row["question"])
        if phrase:
            row["context_dependent"] = phrase
        near = index.near(row["question"], words_of)
        if near:
            row["near_duplicate_of"] = near[0]
        index.add(row["question"], row["qid"], words_of)
    return {
        "context_dependent_flagged": sum("context_dependent" in row for row in rows),
        "near_duplicate_flagged": sum("near_duplicate_of" in row for row in rows),
    }
