"""Duplicate chunks: exact (normalised text) and near (MinHash over word shingles) detection at
load, and the judged view counting a copy of a relevant chunk as relevant: a planted copy of a
gold chunk is a miss in the strict view and a hit in the judged one."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from retrieval_bench.core.run_table import from_records
from retrieval_bench.corpus.chunk import chunk_spans
from retrieval_bench.corpus.duplicates import find_duplicates, jaccard, normalise, shingles
from retrieval_bench.corpus.load import chunk_documents, read_documents_folder
from retrieval_bench.evaluation.score.judged import JudgedInputs, judged_summary
from retrieval_bench.evaluation.score.metrics import summarize
from retrieval_bench.evaluation.score.scoring import score_run_both_views
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.build import handwritten_rows, read_handwritten

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample" / "sqlite"
KS = [1, 3, 5, 10]
WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon "
    "phi chi psi omega one two three four five six seven eight nine ten"
).split()


def text(seed: int, n: int = 60) -> str:
    return " ".join(WORDS[(seed * 7 + i * i * 3 + i) % len(WORDS)] + str((seed + i) % 11) for i in range(n))


def table(texts: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"chunk_id": list(texts), "text": list(texts.values())})


def test_an_overlapping_window_of_the_same_document_is_never_counted_as_a_copy():
    """A chunking with a large overlap makes windows of one passage near-duplicates: the judged view
    credited a window holding none of a question's evidence as a copy of the one holding it
    (judged MRR 1 where strict was 0). A copy of that window in another document still counts."""
    from retrieval_bench import api

    words = text(3, 80).split()
    first, second = " ".join(words[:70]), " ".join(words[4:74])  # one document, windows 4 words apart
    document = " ".join(words)
    start_of_second = len(" ".join(words[:4])) + 1
    chunks = pd.DataFrame(
        {
            "chunk_id": ["d:a", "d:b", "e:a"],
            "doc_id": ["d", "d", "e"],
            "start": [0, start_of_second, 0],
            "end": [len(first), start_of_second + len(second), len(first)],
            "text": [first, second, first.upper()],
        }
    )
    assert document.startswith(first) and document[start_of_second:].startswith(second)
    duplicates = find_duplicates(chunks, near=True, min_jaccard=0.8)
    assert set(duplicates["chunk_id"]) == {"d:a", "d:b", "e:a"} and duplicates["group"].nunique() == 1
    evidence = {"qid": "q1", "question": "Where?", "doc_id": "d", "start": 0, "end": start_of_second - 1}
    window = api.score([evidence], {"q1": {"d:b": 1.0, "d:a": 0.5}}, chunks=chunks, duplicates=duplicates, k=[1])
    # metrics.json carries judged_* only where the views differ: here they must not
    assert window.metrics["recall@1"] == 0.0 and window.metrics.get("judged_recall@1", 0.0) == 0.0
    # the window touching the evidence below min_coverage was kept in the collapse with the gold's gain
    touching = {**evidence, "end": start_of_second + 3}
    scored = api.score([touching], {"q1": {"d:b": 1.0, "d:a": 0.5}}, chunks=chunks, duplicates=duplicates, k=[1])
    assert scored.metrics["mrr"] == 0.5 and scored.metrics.get("judged_mrr", 0.5) == 0.5
    quote = api.score([evidence], {"q1": {"e:a": 1.0, "d:a": 0.5}}, chunks=chunks, duplicates=duplicates, k=[1])
    assert quote.metrics["recall@1"] == 0.0 and quote.metrics["judged_recall@1"] == 1.0


def test_exact_duplicates_ignore_case_spacing_and_unicode_forms():
    chunks = table(
        {"a": "Hello  World.\nSame text", "b": "hello world. same\u00a0TEXT ", "c": "Hello World. Other text"}
    )
    found = find_duplicates(chunks, near=False)
    assert found.to_dict("records") == [
        {"chunk_id": "a", "group": "a", "kind": "exact", "similarity": 1.0},
        {"chunk_id": "b", "group": "a", "kind": "exact", "similarity": 1.0},
    ]
    assert normalise("Ａ  b") == "a b"


def test_near_duplicates_are_found_at_the_threshold_and_distinct_texts_are_not():
    base = text(1)
    one_word = base.replace(base.split()[30], "changed", 1)
    many_words = " ".join(w if i % 4 else "x" for i, w in enumerate(base.split()))
    chunks = table({"base": base, "edit": one_word, "far": many_words, "other": text(2), "copy": base.upper()})
    assert jaccard(shingles(base), shingles(one_word)) >= 0.8 > jaccard(shingles(base), shingles(many_words))
    found = find_duplicates(chunks, near=True, min_jaccard=0.8).set_index("chunk_id")
    assert set(found.index) == {"base", "edit", "copy"} and set(found["group"]) == {"base"}
    assert found.loc["copy", "kind"] == "exact" and found.loc["edit", "kind"] == "near"
    assert 0.8 <= found.loc["edit", "similarity"] < 1
    assert find_duplicates(chunks, near=True, min_jaccard=0.8).equals(
        find_duplicates(chunks, near=True, min_jaccard=0.8)
    )
    assert set(find_duplicates(chunks, near=False)["chunk_id"]) == {"base", "copy"}


def test_overlapping_chunks_of_one_document_are_not_duplicates():
    documents = read_documents_folder(SAMPLE)
    chunks = chunk_documents(
        documents[documents["doc_id"].isin(["wal.md", "lockingv3.md", "howtocorrupt.md"])], 800, 100
    )
    assert find_duplicates(chunks).empty


def test_the_bundled_sample_has_one_pair_of_identical_chunks():
    chunks = chunk_documents(read_documents_folder(SAMPLE), 800, 100)
    found = find_duplicates(chunks)
    assert found["chunk_id"].tolist() == ["different.md:1325-1877", "serverless.md:415-967"]
    assert set(found["kind"]) == {"exact"}


# --- the judged view: a planted copy of a gold chunk -------------------------------------------
@pytest.fixture(scope="module")
def planted():
    """Two sample documents, a third (faq.md) that is a copy of one question's gold chunk, the
    hand-written questions for them, and the chunks (load.chunking 800/100)."""
    documents = read_documents_folder(SAMPLE)
    documents = documents[documents["doc_id"].isin(["wal.md", "inmemorydb.md"])].reset_index(drop=True)
    chunks = chunk_documents(documents, 800, 100)
    golden, _ = handwritten_rows(read_handwritten(ROOT / "data" / "handwritten_questions.jsonl"), documents, chunks)
    golden = [row for row in golden if row["kind"] == "single"]  # one evidence span each
    # A question whose evidence one chunk holds whole.
    row = next(
        r for r in golden if any(s <= r["start"] and r["end"] <= e for s, e in zip(chunks["start"], chunks["end"]))
    )
    gold = chunks[
        (chunks["start"] <= row["start"]) & (chunks["end"] >= row["end"]) & (chunks["doc_id"] == row["doc_id"])
    ].iloc[0]
    copy = gold["text"]
    assert chunk_spans(copy, 800, 100) == [(0, len(copy))]  # the copy is one chunk of its own
    documents = pd.concat([documents, pd.DataFrame({"doc_id": ["faq.md"], "text": [copy]})], ignore_index=True)
    chunks = chunk_documents(documents, 800, 100)
    return golden, chunks, row, gold["chunk_id"]


def scores(golden, chunks, run, pool=()):
    duplicates = find_duplicates(chunks)
    table = score_run_both_views(golden, chunks, run, Scoring(ks=tuple(KS)), JudgedInputs(duplicates, list(pool)))
    return table.set_index("qid"), {**summarize(table, KS, len(chunks)), **judged_summary(table, KS, duplicates)}


def test_a_copy_of_the_gold_chunk_is_a_strict_miss_and_a_judged_hit(planted):
    golden, chunks, row, gold_id = planted
    copy_id = next(c for c in chunks["chunk_id"] if c.startswith("faq.md"))
    others = [c for c in chunks["chunk_id"] if c not in (gold_id, copy_id)]
    records = []
    for r in golden:  # every other question: its gold first; the planted question: the copy first, no gold
        first = copy_id if r["qid"] == row["qid"] else r["gold_chunk_id"]
        records += [(r["qid"], first, 100.0)] + [
            (r["qid"], c, 50.0 - i) for i, c in enumerate(others[:9]) if c != first
        ]
    run = from_records(records, 10)
    per_question, summary = scores(golden, chunks, run)
    planted_row = per_question.loc[row["qid"]]
    assert (
        planted_row["hit@1"] == 0 and planted_row["hit@10"] == 0 and planted_row["reciprocal_rank"] == 0
    )  # strict: a miss
    assert planted_row["judged_hit@1"] == 1 and planted_row["judged_reciprocal_rank"] == 1  # judged: a hit
    assert planted_row["judged_recall@1"] == 1.0 and planted_row["judged_ndcg@10"] == 1.0
    assert planted_row["n_duplicate_relevant"] == 1 and planted_row["judged_n_relevant"] == 1
    assert summary["n_duplicate_chunks"] == 1 and summary["n_questions_gaining_duplicate"] == 1
    assert summary["judged_hit@1"] - summary["hit@1"] == pytest.approx(1 / len(golden))
    for name in ("hit@1", "mrr", "ndcg@10", "recall@5"):  # only the planted question differs
        rest = per_question.drop(index=row["qid"])
        column = "reciprocal_rank" if name == "mrr" else name
        assert (rest[column] == rest[f"judged_{column}"]).all()


def test_copies_count_once_the_best_placed_one(planted):
    golden, chunks, row, gold_id = planted
    copy_id = next(c for c in chunks["chunk_id"] if c.startswith("faq.md"))
    other = next(c for c in chunks["chunk_id"] if c not in (gold_id, copy_id))
    # Gold and copy tied at the top (identical texts score the same), then another chunk.
    run = from_records([(row["qid"], gold_id, 9.0), (row["qid"], copy_id, 9.0), (row["qid"], other, 1.0)])
    per_question, _ = scores([row], chunks, run)
    result = per_question.loc[row["qid"]]
    assert result["hit@1"] == 0.5  # strict: the gold is first in half of the orders of the tie
    assert result["judged_hit@1"] == 1.0 and result["judged_ndcg@10"] == 1.0 and result["judged_n_relevant"] == 1
    # Copy first, gold third: the gold's place is the copy's, counted once (no second relevant chunk).
    run = from_records([(row["qid"], copy_id, 9.0), (row["qid"], other, 5.0), (row["qid"], gold_id, 1.0)])
    result = scores([row], chunks, run)[0].loc[row["qid"]]
    assert result["reciprocal_rank"] == pytest.approx(1 / 3) and result["judged_reciprocal_rank"] == 1.0
    assert result["judged_map@10"] == 1.0 and result["judged_recall@3"] == 1.0


def test_a_chunk_real_labels_judge_keeps_its_label_whatever_the_llm_says():
    chunks = pd.DataFrame(
        {"chunk_id": ["a", "b", "c"], "doc_id": ["a", "b", "c"], "start": 0, "end": 5, "text": ["x y", "z w", "u v"]}
    )
    golden = [{"qid": "q", "question": "?", "relevant": {"a": 1, "b": 0}}]
    run = from_records([("q", "b", 3.0), ("q", "c", 2.0), ("q", "a", 1.0)])
    pool = [{"qid": "q", "chunk_id": "b", "grade": 3}, {"qid": "q", "chunk_id": "c", "grade": 3}]
    per_question, summary = scores(golden, chunks, run, pool)
    assert per_question.loc["q", "reciprocal_rank"] == pytest.approx(1 / 3)
    assert per_question.loc["q", "judged_reciprocal_rank"] == pytest.approx(1 / 2)  # c, not b
    assert summary["n_questions_gaining_judged"] == 1 and summary["judge_relevant_share"] == 1.0


def test_the_chunk_stage_writes_the_duplicates_and_says_how_many(tmp_path, monkeypatch, capsys):
    from retrieval_bench.core import paths
    from retrieval_bench.core.stage import run_stage
    from stages import chunk, load_chunks

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(text(3) + "\n\n" + text(4))
    (tmp_path / "docs" / "b.md").write_text(text(4))
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["load"].update(source="docs", chunking={"chars": 500, "overlap": 0})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    run_stage(load_chunks.main)
    run_stage(lambda: chunk.main([paths.DEFAULT]), own_arguments=True)
    duplicates = pd.read_parquet(tmp_path / paths.DUPLICATES)
    assert len(duplicates) >= 2 and duplicates["chunk_id"].str.startswith("b.md").any()
    assert "chunks duplicate another" in capsys.readouterr().out
    assert json.loads(json.dumps(duplicates.to_dict("records")))  # plain values


def test_chunks_without_a_word_are_no_near_duplicates_of_each_other():
    """Tables of symbols and rules of dashes have no shingle: they were all linked at similarity 1.0."""
    chunks = pd.DataFrame(
        {
            "chunk_id": ["rule", "arrows", "prose", "table", "rule-again"],
            "text": ["=== *** ===", "--> --> -->", "Real words here in a chunk.", "| -- | -- |", "=== *** ==="],
        }
    )
    found = find_duplicates(chunks)
    assert found["chunk_id"].tolist() == ["rule", "rule-again"] and set(found["kind"]) == {"exact"}


def test_many_templated_pages_are_grouped_as_comparing_every_pair_groups_them_and_fast(monkeypatch):
    """3,000 boilerplate pages differing in one number took 97 s (every candidate pair compared);
    pairs already in one group are no longer compared. The groups are those of every pair's Jaccard,
    found with about one comparison a page, not one a pair (44,850 here)."""
    from retrieval_bench.corpus import duplicates

    compared = []
    exact = duplicates.jaccard
    monkeypatch.setattr(duplicates, "jaccard", lambda a, b: compared.append(1) or exact(a, b))
    import random

    rng = random.Random(3)
    words = [f"w{n}" for n in range(400)]
    base = " ".join(rng.choice(words) for _ in range(120))
    texts = [f"{base} item {i}" for i in range(300)] + [
        " ".join(rng.choice(words) for _ in range(120)) for _ in range(40)
    ]
    chunks = pd.DataFrame({"chunk_id": [f"c{i:03d}" for i in range(len(texts))], "text": texts})
    found = find_duplicates(chunks)
    sets = [shingles(text) for text in texts]
    parent = list(range(len(texts)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if jaccard(sets[i], sets[j]) >= 0.8:
                parent[max(root(i), root(j))] = min(root(i), root(j))
    groups = {f"c{i:03d}": f"c{root(i):03d}" for i in range(len(texts))}
    sizes = pd.Series(list(groups.values())).value_counts()
    expected = {chunk: group for chunk, group in groups.items() if sizes[group] > 1}
    assert dict(zip(found["chunk_id"], found["group"], strict=True)) == expected and len(expected) == 300
    assert len(compared) < 3 * len(texts)


def test_pairs_just_above_the_threshold_are_found_as_lsh_promises():
    """The hash family never wrapped, so every permutation picked the same shingle and a pair was a
    candidate with chance J (0.854 here: 168 of these 200 pairs found), not 1 - (1 - J^4)^16
    (0.99999): about one pair in six at this similarity was missed."""
    import random

    rng = random.Random(8)
    words = [f"w{n}" for n in range(5000)]
    texts, similarities = [], []
    for _ in range(200):
        base = [rng.choice(words) for _ in range(80)]
        variant = base[:40] + [rng.choice(words) for _ in range(2)] + base[42:]  # J = 70 / 82 = 0.854
        texts += [" ".join(base), " ".join(variant)]
        similarities.append(jaccard(shingles(texts[-2]), shingles(texts[-1])))
    assert 0.8 <= min(similarities) and max(similarities) < 0.9
    chunks = pd.DataFrame({"chunk_id": [f"c{i:03d}" for i in range(len(texts))], "text": texts})
    found = find_duplicates(chunks)
    pairs_found = found["group"].nunique()
    assert pairs_found >= 196 and len(found) == 2 * pairs_found


@pytest.fixture(scope="module")
def sample_similarities():
    """The sample's 800/100 chunks and the Jaccard similarity of every pair above 0.25, compared one by one."""
    import itertools

    chunks = chunk_documents(read_documents_folder(SAMPLE), 800, 100)
    sets = [shingles(normalise(text)) for text in chunks["text"]]
    similar = {}
    for i, j in itertools.combinations(range(len(sets)), 2):
        if sets[i] and sets[j] and len(sets[i] & sets[j]) * 4 > min(len(sets[i]), len(sets[j])):  # J > 0.25 needs it
            if (found := jaccard(sets[i], sets[j])) > 0.25:
                similar[i, j] = found
    return chunks, similar


@pytest.mark.parametrize("min_jaccard", [0.3, 0.5, 0.75])
def test_a_lower_min_jaccard_finds_the_pairs_comparing_every_pair_finds(sample_similarities, min_jaccard):
    """Bands of 4 rows, tuned for 0.8, proposed a pair at 0.1 with probability 0.002: at 0.1 the
    sample's windows had 114 chunks in pairs and 12 were found. The banding now follows the bar."""
    from retrieval_bench.corpus.duplicates import banding

    chunks, similar = sample_similarities
    expected = {chunks["chunk_id"][k] for pair, found in similar.items() if found >= min_jaccard for k in pair}
    assert expected and set(find_duplicates(chunks, True, min_jaccard)["chunk_id"]) == expected
    bands, rows = banding(min_jaccard)
    assert 1 - (1 - min_jaccard**rows) ** bands >= 0.999 and banding(0.8) == (16, 4)  # the default: as before
