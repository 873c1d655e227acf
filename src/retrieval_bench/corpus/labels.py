"""Real relevance labels (queries and qrels over the source's chunks): one per judged query, with
where its judged chunks lie in their documents, so a golden set built from them still scores a
re-chunking of the same documents (retrieval_bench.core.relevance.judge)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.relevance import with_label_spans
from retrieval_bench.core.values import checked_qid, visible


def build_labels(
    queries: dict[str, str],
    judgements: list[tuple[str, str, int]],
    chunks: pd.DataFrame,
    missing_relevant: str,
    qrels_path: Path,
) -> tuple[list[dict], list[str]]:
    """One label per judged query: its text, {chunk id: grade} (grade 0 = judged not relevant) and
    relevant_spans, where each judged chunk of `chunks` lies in its document (with_label_spans)."""
    chunk_ids = set(chunks["chunk_id"])
    relevant: dict[str, dict[str, int]] = {}
    for query_id, corpus_id, grade in judgements:
        relevant.setdefault(query_id, {})[corpus_id] = grade
    no_text = [q for q in relevant if q not in queries]
    if no_text:
        raise InputError(
            f"{qrels_path}: {len(no_text)} judged queries have no text in the queries file, e.g. {', '.join(no_text[:5])}"
        )
    for query_id in relevant:  # as an imported set's: a TSV or TREC line must hold it whole
        checked_qid(query_id, f"{qrels_path}: judged query {quoted(query_id)}", "query id")
    blank = [q for q in relevant if not visible(queries[q])]
    if blank:  # an empty question (or one of invisible characters) would be embedded and scored: a 0 on every metric
        raise InputError(
            f"{qrels_path}: {len(blank)} judged queries have a blank text (or only invisible characters) in the "
            f"queries file, e.g. {', '.join(quoted(q) for q in blank[:5])}; each judged query needs its question"
        )
    notes = []
    missing = {q: sorted(c for c in grades if c not in chunk_ids) for q, grades in relevant.items()}
    missing = {q: ids for q, ids in missing.items() if ids}
    if missing:
        examples = "; ".join(f"{q} -> {', '.join(ids[:3])}" for q, ids in list(missing.items())[:3])
        if missing_relevant == "error":
            raise InputError(
                f"{qrels_path}: {len(missing)} queries judge chunk ids that are not in the corpus, or whose text is "
                f"empty ({examples}); set load.missing_relevant: drop to drop those judgements"
            )
        notes.append(f"dropped judgements of chunk ids not in the corpus for {len(missing)} queries ({examples})")
    labels, unanswerable = [], 0
    for query_id, grades in relevant.items():
        grades = {c: g for c, g in grades.items() if c in chunk_ids}
        if not any(g > 0 for g in grades.values()):
            unanswerable += 1
            continue
        labels.append({"qid": query_id, "question": queries[query_id], "relevant": grades})
    if unanswerable:
        notes.append(f"dropped {unanswerable} queries with no relevant chunk in the corpus")
    if not labels:
        raise InputError(f"{qrels_path}: no query has a relevant chunk in the corpus")
    return with_label_spans(labels, chunks), notes
