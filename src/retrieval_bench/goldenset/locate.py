"""Questions brought with their evidence (hand-written, imported), found in the corpus: the
document and span of each one's evidence, and the passage that holds that span best. Built once
per corpus, so a set of 100,000 questions costs a substring search and a look at one document's
passages per question, not a scan of every document or passage.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from retrieval_bench.core.relevance import coverage
from retrieval_bench.goldenset.evidence import locate_evidence


class EvidenceFinder:
    """Where evidence lies in the documents `texts` {doc_id: text}, for many questions: the
    documents are joined once (in id order), so evidence without a doc_id is found by one substring
    search of the corpus, not a regular-expression scan of every document."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self.texts = texts
        self.ids = sorted(texts)
        # NUL between documents: an excerpt without one cannot match across two of them.
        self.joined = "\0".join(texts[doc_id] for doc_id in self.ids)
        self.starts, position = [], 0
        for doc_id in self.ids:
            self.starts.append(position)
            position += len(texts[doc_id]) + 1

    def locate(self, evidence: str, doc_id: str | None = None) -> tuple[str, tuple[int, int]] | None:
        """(document, span) of `evidence`: in document `doc_id` (locate_evidence); with no doc_id in
        the first document (by id) that holds it exactly, else in the first that holds it with
        case and spacing forgiven."""
        # An exact match is locate_evidence's first choice (the first one, as near is 0); found here
        # by str.find, without compiling the excerpt's regular expressions, which costs more.
        excerpt = evidence.strip()
        if doc_id is not None:
            start = self.texts[doc_id].find(excerpt) if excerpt else -1
            if start >= 0:
                return doc_id, (start, start + len(excerpt))
            span = locate_evidence(self.texts[doc_id], evidence)
            return None if span is None else (doc_id, span)
        if excerpt and "\0" not in excerpt:
            found = self.joined.find(excerpt)
            if found >= 0:
                number = bisect_right(self.starts, found) - 1
                start = found - self.starts[number]
                return self.ids[number], (start, start + len(excerpt))
        for candidate in self.ids:
            span = locate_evidence(self.texts[candidate], evidence)
            if span is not None:
                return candidate, span
        return None

    def occurrences(self, doc_id: str, span: tuple[int, int], anywhere: bool) -> int:
        """How many times the text at `span` of `doc_id` occurs: in that document, or `anywhere`
        (evidence given without a doc_id) in the whole corpus. More than one: the evidence does
        not pin its passage, and the first occurrence was taken."""
        text = self.texts[doc_id][span[0] : span[1]]
        return (self.joined if anywhere else self.texts[doc_id]).count(text) if text else 0


def passage_finder(passages: pd.DataFrame) -> Callable[[str, int, int], dict | None]:
    """best(doc_id, start, end): the passage of `doc_id` (a dict of its columns) that overlaps
    [start, end) the most, the first of equals; None if the document has none. The passages are
    grouped by document once, so a call looks at its own document's only."""
    by_doc = passages.groupby("doc_id", sort=False).indices
    columns = {column: passages[column].to_numpy() for column in passages.columns}

    def best(doc_id: str, start: int, end: int) -> dict | None:
        rows = by_doc.get(doc_id)
        if rows is None:
            return None
        row = rows[int(np.argmax(coverage(columns["start"][rows], columns["end"][rows], start, end)))]
        return {column: values[row] for column, values in columns.items()}

    return best
