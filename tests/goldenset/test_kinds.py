"""Question kinds (generate.kinds): the shares split by hand, each kind's reply parser and schema,
multi groups by rare terms, the unanswerable check, the short-query echo rule, and the stage
writing every kind against the stub server (the real anthropic and openai SDKs); single alone keeps
today's cache keys."""

from __future__ import annotations

import hashlib
import json
import random
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from conftest import set_params
from stub_llm import StubLLM, read_jsonl, run_stage_here, run_stage_on_openai, stage_project

from retrieval_bench.corpus.load import chunk_documents
from retrieval_bench.goldenset import echo
from retrieval_bench.goldenset.kinds import Corpus, allocate
from retrieval_bench.llm.cache.replies import CacheWriter, cache_key
from retrieval_bench.llm.checks.kinds import keyword_fields, multi_fields, unanswerable_fields
from retrieval_bench.llm.providers.schema import MULTI_SCHEMA, UNANSWERABLE_SCHEMA
from retrieval_bench.llm.runs.tasks import QUESTION_TASKS

GOLDEN = "data/goldenset.jsonl"
ALL_KINDS = {"single": 0.4, "multi": 0.3, "unanswerable": 0.15, "keyword": 0.15}


# --- shares ---------------------------------------------------------------------------------------------
def _sainte_lague(total: int, shares: list[tuple[str, Fraction]]) -> dict[str, int]:
    """Sainte-Laguë seat by seat with exact fractions: each next question to the kind with the
    largest share / (2c + 1), c its questions so far (ties: the earlier kind)."""
    counts = {kind: 0 for kind, _ in shares}
    for _ in range(total):
        best = max(range(len(shares)), key=lambda i: (shares[i][1] / (2 * counts[shares[i][0]] + 1), -i))
        counts[shares[best][0]] += 1
    return counts


def test_shares_split_the_questions_by_sainte_lague_and_more_questions_never_take_one_from_a_kind():
    rng = random.Random(46)
    kinds = ["single", "multi", "unanswerable", "keyword"]
    for _ in range(300):
        chosen = rng.sample(kinds, rng.randint(1, 4))
        weights = [rng.randint(1, 20) for _ in chosen]
        shares = [(kind, Fraction(w, sum(weights))) for kind, w in zip(chosen, weights, strict=True)]
        total = rng.randint(0, 500)
        counts = allocate(total, tuple((kind, float(share)) for kind, share in shares))
        assert sum(counts.values()) == total
        assert counts == _sainte_lague(total, shares)
        more = allocate(total + 1, tuple((kind, float(share)) for kind, share in shares))
        assert all(more[kind] >= counts[kind] for kind in counts)
    # the case a review found: largest remainders gave multi 6 -> 7 and unanswerable 6 -> 5
    shares = (("single", 0.39), ("multi", 0.13), ("unanswerable", 0.11), ("keyword", 0.37))
    before, after = allocate(299, shares), allocate(300, shares)
    assert all(after[kind] >= before[kind] for kind in before) and sum(after.values()) == 300


# --- replies ----------------------------------------------------------------------------------------------
def test_multi_reply_needs_two_or_three_excerpts():
    ok = multi_fields(
        json.dumps({"question": "How do WAL and rollback journals differ?", "evidence": ["a b", "c d"]}), None
    )
    assert ok["rejected"] is None and ok["evidence_pieces"] == ["a b", "c d"] and ok["evidence"] == "a b"
    for evidence in (["only one"], ["a", "b", "c", "d"], "a string", ["a", ""], ["a", 3]):
        reply = json.dumps({"question": "How do WAL and rollback journals differ?", "evidence": evidence})
        assert multi_fields(reply, None)["rejected"] == "evidence_pieces", evidence
    assert multi_fields("Sure! What is it?", "max_tokens")["rejected"] == "truncated"
    assert MULTI_SCHEMA.mismatch(json.dumps({"question": "q?", "evidence": ["a", 1]})) is not None
    assert MULTI_SCHEMA.mismatch(json.dumps({"question": "q?", "evidence": ["a", "b"]})) is None


def test_unanswerable_reply_must_say_the_changed_fact():
    base = {"question": "When did SQLite remove WAL mode?", "evidence": "WAL mode is supported"}
    assert unanswerable_fields(json.dumps({**base, "changed_fact": "WAL removed"}), None)["rejected"] is None
    assert unanswerable_fields(json.dumps({**base, "changed_fact": "  "}), None)["rejected"] == "no_changed_fact"
    assert unanswerable_fields(json.dumps(base), None)["rejected"] == "no_changed_fact"
    assert UNANSWERABLE_SCHEMA.mismatch(json.dumps(base)) is not None


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("wal checkpoint size", None),
        ("How big can the WAL get?", None),
        ("wal", "keyword_too_short"),
        ("how do i make the write ahead log smaller", "keyword_too_long"),
    ],
)
def test_keyword_reply_is_two_to_six_words_and_need_not_ask(query, reason):
    assert keyword_fields(json.dumps({"query": query, "evidence": "x"}), None)["rejected"] == reason


def test_single_kind_task_and_prompt_are_todays():
    assert QUESTION_TASKS["single"].name == "questions"
    assert {task.placeholder for kind, task in QUESTION_TASKS.items() if kind != "multi"} == {"{passage}"}


# --- multi groups and the unanswerable check ---------------------------------------------------------------
def _passages(texts: dict[str, str]) -> pd.DataFrame:
    documents = pd.DataFrame({"doc_id": list(texts), "text": list(texts.values())})
    return chunk_documents(documents, 10_000, 0)


FILLER = [f"Common words appear here in document number {i}, about storage and files." for i in range(60)]


def test_a_multi_group_joins_the_passages_sharing_the_most_rare_terms():
    texts = {f"f{i}": text for i, text in enumerate(FILLER)}
    texts |= {
        "a": "The zorblax codec compresses quuxlet frames before storage.",
        "b": "Decoding needs the zorblax codec and a vellum buffer.",
        "c": "A vellum buffer holds decoded quuxlet frames in memory.",
        "d": "The plinth format was designed for storage by Ombrel.",
        "e": "Ombrel also wrote a plinth reader.",
    }
    corpus = Corpus(_passages(texts))
    anchor = next(r for r in corpus.records if r["doc_id"] == "a")
    (group,) = list(corpus.groups([anchor]))
    # zorblax, quuxlet and vellum are each in two passages (rare): a shares one with b and one with c
    # (a tie: the earlier passage, b, comes first); c shares vellum with b as well, so it joins them.
    assert [p["doc_id"] for p in group["passages"]] == ["a", "b", "c"]
    assert json.loads(group["text"]) == [texts["a"], texts["b"], texts["c"]]
    (pair,) = list(corpus.groups([next(r for r in corpus.records if r["doc_id"] == "d")]))
    assert [p["doc_id"] for p in pair["passages"]] == ["d", "e"]  # no third shares a rare term with both
    lonely = next(r for r in corpus.records if r["doc_id"] == "f0")
    assert list(corpus.groups([lonely])) == []  # no rare term shared with anyone: no multi question


def test_no_two_multi_units_group_the_same_passages():
    """A's best partner is B and B's is A: both anchors made the unit {A, B}, asked (and paid for)
    twice and weighted twice in every multi mean (259 repeats in the sample's 1,138 units)."""
    texts = {f"f{i}": text for i, text in enumerate(FILLER)}
    texts |= {"d": "The plinth format was designed for storage by Ombrel.", "e": "Ombrel also wrote a plinth reader."}
    corpus = Corpus(_passages(texts))
    anchors = [next(r for r in corpus.records if r["doc_id"] == name) for name in ("d", "e")]
    assert [[p["doc_id"] for p in unit["passages"]] for unit in corpus.groups(anchors)] == [["d", "e"]]
    sample = sorted((Path(__file__).parents[2] / "data" / "sample" / "sqlite").glob("*.md"))
    documents = pd.DataFrame(
        {"doc_id": [p.name for p in sample], "text": [p.read_text(encoding="utf-8") for p in sample]}
    )
    passages = chunk_documents(documents, 800, 100)
    units = list(Corpus(passages).groups(passages.to_dict("records")))
    sets = [frozenset(p["chunk_id"] for p in unit["passages"]) for unit in units]
    assert len(units) > 500 and len(set(sets)) == len(sets)


def test_the_unanswerable_check_finds_a_passage_holding_every_content_word():
    text = "SQLite supports WAL mode since version 3.7.0."
    corpus = Corpus(_passages({"a": text, "b": "Vacuum rebuilds files."}))
    assert corpus.holding_all("Which version of SQLite supports WAL mode?") == f"a:0-{len(text)}"
    assert corpus.holding_all("When did SQLite drop WAL mode?") is None  # "drop" is in no passage


# --- the echo gauge for short queries ---------------------------------------------------------------------
def test_a_short_query_quoting_rare_terms_of_its_passage_is_an_echo():
    passages = [f"plain text about databases number {i}" for i in range(100)] + [
        "The zorblax codec compresses quuxlet frames."
    ]
    rare = echo.rare_terms([list(set(tokens)) for tokens in echo.tokenize(passages)])
    evidence = passages[-1]
    assert echo.is_echo("zorblax quuxlet", evidence, rare)  # two rare terms quoted
    assert not echo.is_echo("zorblax quuxlet", evidence)  # the old rule alone: too short to judge
    assert not echo.is_echo("databases codec text", evidence, rare)  # one rare term (codec), common words
    assert not echo.is_echo("shrink video pictures", evidence, rare)  # paraphrase
    long_query = "what does the zorblax codec do to quuxlet frames in storage today"
    assert echo.rare_quoted(long_query, evidence, rare) == 0  # longer than a search box query: the other rule


def test_mark_flags_keyword_rows_by_the_short_rule_only():
    evidence = [["The zorblax codec compresses quuxlet frames."]] * 2
    rows = [{"question": "zorblax quuxlet", "kind": "keyword"}, {"question": "zorblax quuxlet"}]
    summary = echo.mark(rows, evidence, frozenset({"zorblax", "quuxlet"}))
    assert rows[0]["echo"] is True and rows[0]["echo_rare_terms"] == 2
    assert rows[1]["echo"] is False and "echo_rare_terms" not in rows[1]
    assert summary["echo_flagged"] == 1


# --- the stage --------------------------------------------------------------------------------------------
def _located(documents: dict[str, str], row: dict) -> list[str]:
    return [documents[s["doc_id"]][s["start"] : s["end"]] for s in row["evidence_spans"]]


def test_every_kind_through_the_stage_with_its_fields(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 20, "generate.kinds": ALL_KINDS})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub, "--dry-run")
        assert status == 0, err
        assert not stub.generation_requests()
        for kind in ALL_KINDS:
            assert f"generate_goldenset: {kind}: " in out and "requests to anthropic" in out
        assert "kinds: single 8, multi 6, unanswerable 3, keyword 3" in out
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        requests = len(stub.generation_requests())
    rows = read_jsonl(project / GOLDEN)
    documents = pd.read_parquet(project / "data/documents.parquet")
    texts = dict(zip(documents["doc_id"], documents["text"], strict=True))
    by_kind = {kind: [row for row in rows if row["kind"] == kind] for kind in ALL_KINDS}
    assert {kind: len(found) for kind, found in by_kind.items()} == {
        "single": 8,
        "multi": 6,
        "unanswerable": 3,
        "keyword": 3,
    }
    assert requests == len(rows)
    for row in by_kind["multi"]:
        assert 2 <= len(row["evidence_spans"]) <= 3
        first = row["evidence_spans"][0]
        assert (row["doc_id"], row["start"], row["end"]) == (first["doc_id"], first["start"], first["end"])
        # each span is its passage's first words, as the stub quotes them
        assert all(len(piece.split()) >= 3 for piece in _located(texts, row))
    for row in by_kind["unanswerable"]:
        assert [row[k] for k in ("gold_chunk_id", "doc_id", "start", "end")] == [None] * 4
        assert row["evidence_spans"] == [] and row["near_doc_id"] in texts
    for row in by_kind["keyword"] + by_kind["single"]:
        assert row["doc_id"] in texts and "evidence_spans" not in row
    assert all(2 <= len(row["question"].split()) <= 6 for row in by_kind["keyword"])
    report = json.loads((project / "metrics/goldenset.json").read_text())
    assert report["n_by_kind"] == {"keyword": 3, "multi": 6, "single": 8, "unanswerable": 3}
    assert report["unanswerable_check"].startswith("lexical")


def test_the_kinds_share_what_is_generated_when_the_corpus_has_fewer_passages_than_the_budget(tmp_path):
    """8 passages, max_questions 100: the shares were taken of 100 (single 40, multi 30, ...), so
    every kind was cut to 8 and the mix came out 25% each, under a plan line promising 8 questions."""
    project = stage_project(tmp_path / "p", docs=["inmemorydb.md"])
    set_params(
        project, **{"generate.provider": "anthropic", "generate.max_questions": 100, "generate.kinds": ALL_KINDS}
    )
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub, "--dry-run")
    assert status == 0, err
    assert "8 passages get a generated question (of 8 eligible)" in out
    assert "kinds: single 3, multi 3, unanswerable 1, keyword 1" in out


def test_the_cost_limit_covers_all_kinds_before_any_is_asked(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(
        project,
        **{
            "generate.provider": "anthropic",
            "generate.max_questions": 20,
            "generate.kinds": ALL_KINDS,
            "generate.max_cost_usd": 0.015,  # above the single kind's estimate alone, below all kinds'
        },
    )
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert not stub.generation_requests()
    assert status == 1 and err.startswith("error:") and len(err.strip().splitlines()) == 1, err
    assert "max_cost_usd" in err


def test_single_alone_keeps_todays_cache_keys(tmp_path):
    """A cache written before generate.kinds existed (keys from the prompt file's bytes and the
    passage text) is used as it is: no request."""
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 0})
    prompt_sha256 = hashlib.sha256((project / "data/question_prompt.txt").read_bytes()).hexdigest()
    documents = pd.read_parquet(project / "data/documents.parquet")
    passages = chunk_documents(documents, 800, 100).drop_duplicates("text_sha256")
    writer = CacheWriter(project / "data/question_cache.jsonl")
    for i, passage in enumerate(passages.to_dict("records")):
        writer.append(
            {
                "key": cache_key("anthropic", "claude-haiku-4-5", prompt_sha256, passage["text"]),
                "model": "claude-haiku-4-5",
                "prompt_sha256": prompt_sha256,
                "passage_sha256": passage["text_sha256"],
                "attempt": 0,
                "question": f"Where is subject number {i} explained?",
                "evidence": " ".join(passage["text"].split()[:6]),
                "rejected": None,
            }
        )
    writer.close()
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert status == 0, err
        assert not stub.generation_requests()
    rows = read_jsonl(project / GOLDEN)
    assert len(rows) == len(passages) and {row["kind"] for row in rows} == {"single"}


def test_openai_sdk_with_json_schema_writes_every_kind(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(
        project,
        **{
            "generate.max_questions": 8,
            "generate.response_format": "json_schema",
            "generate.kinds": {"single": 0.25, "multi": 0.25, "unanswerable": 0.25, "keyword": 0.25},
        },
    )
    with StubLLM() as stub:
        status, _, err = run_stage_on_openai(project, stub)
        assert status == 0, err
        schemas = {request.body["response_format"]["json_schema"]["name"] for request in stub.generation_requests()}
    assert schemas == {"question", "multi_question", "unanswerable_question", "keyword_query"}
    assert sorted(row["kind"] for row in read_jsonl(project / GOLDEN)) == sorted(
        ["single", "multi", "unanswerable", "keyword"] * 2
    )


# --- the walk: each kind's replies checked where its passages are known -------------------------------------
def _walk(kind: str, units: list[dict], corpus: Corpus, replies: list[dict]):
    from retrieval_bench.core.params_schema import DEFAULTS
    from retrieval_bench.goldenset.generate_settings import GenerateSettings
    from retrieval_bench.goldenset.selection import CacheIndex, KindRun, walk
    from retrieval_bench.llm.cost.settings import Meta

    meta = Meta("anthropic", "anthropic", "m", "p" * 64, 300)
    task = QUESTION_TASKS[kind]
    run = KindRun(kind, task, task.placeholder, meta, units, None, corpus)
    keys = [task.job(meta, task.placeholder, unit["text"], unit["text_sha256"], 0).key for unit in units]
    records = {key: {"key": key, "rejected": None, **reply} for key, reply in zip(keys, replies, strict=True)}
    settings = GenerateSettings.from_params({**DEFAULTS["generate"], "kinds": {kind: 1.0}})
    return walk(run, CacheIndex(records, meta, by_key=True), set(), settings, generating=True)


def test_a_multi_reply_with_an_excerpt_outside_its_own_passage_is_asked_again():
    texts = {f"f{i}": text for i, text in enumerate(FILLER)}
    texts |= {
        "a": "The zorblax codec compresses frames.",
        "b": "Decoding needs the zorblax codec and a buffer.",
        "c": "The plinth format was designed by Ombrel.",
        "d": "Ombrel also wrote a plinth reader.",
    }
    corpus = Corpus(_passages(texts))
    units = list(corpus.groups([r for r in corpus.records if r["doc_id"] in ("a", "c")]))
    question = "Which codec both packs and unpacks the stream?"
    good = {"question": question, "evidence_pieces": ["compresses frames", "needs the zorblax codec"]}
    # the second group is c's: its second excerpt must be in d, its second passage
    both_from_c = {
        "question": "Who designed the plinth format?",
        "evidence_pieces": ["The plinth format", "designed by Ombrel"],
    }
    plan = _walk("multi", units, corpus, [good, both_from_c])
    assert [unit["chunk_id"] for unit, _ in plan.accepted] == [units[0]["chunk_id"]]
    assert [(r["reason"], r["kind"], r["regenerated"]) for r in plan.rejects] == [
        ("evidence_not_in_passage", "multi", True)
    ]
    assert [job.attempt for job in plan.misses] == [1]


def test_an_unanswerable_question_the_corpus_may_answer_is_asked_again():
    text = "SQLite supports WAL mode since version 3.7.0."
    corpus = Corpus(_passages({"a": text, "b": "Vacuum rebuilds files."}))
    units = [r for r in corpus.records if r["doc_id"] == "a"]
    answered = {"question": "Which version of SQLite supports WAL mode?", "changed_fact": "x", "evidence": ""}
    plan = _walk("unanswerable", units, corpus, [answered])
    assert [r["reason"] for r in plan.rejects] == ["answer_may_be_in_corpus"] and not plan.accepted
    near_miss = {
        "question": "When did SQLite drop WAL mode?",
        "changed_fact": "WAL dropped",
        "evidence": "supports WAL",
    }
    assert len(_walk("unanswerable", units, corpus, [near_miss]).accepted) == 1


def test_real_and_handwritten_questions_get_their_kind_by_rule():
    from retrieval_bench.goldenset.kinds import assigned_kind, mix

    span = {"doc_id": "d", "start": 0, "end": 5}
    rows = [
        {"question": "How do I reset the counter?", "gold_chunk_id": "c"},
        {"question": "reset autoincrement counter", "gold_chunk_id": "c"},
        {"question": "reset counter?", "gold_chunk_id": "c"},  # short but asks: a question
        {"question": "Which two files hold it?", "gold_chunk_id": "c", "evidence_spans": [span, span]},
        {"question": "When was WAL removed?", "gold_chunk_id": None},
        {"question": "What is it?", "gold_chunk_id": "c", "relevant": {"c": 0}},  # a real query, nothing relevant
        {"question": "reset autoincrement counter", "gold_chunk_id": "c", "kind": "single"},  # its own kind wins
    ]
    kinds = [assigned_kind(row) for row in rows]
    assert kinds == ["single", "keyword", "single", "multi", "unanswerable", "unanswerable", "single"]
    assert mix(rows) == (("single", 3 / 7), ("multi", 1 / 7), ("unanswerable", 2 / 7), ("keyword", 1 / 7))


def test_each_question_sets_mix_is_reported_when_real_or_handwritten_questions_are_present():
    from retrieval_bench.goldenset.assemble import kinds_report

    generated = [{"question": "How is it reset?", "gold_chunk_id": "c", "source": "m", "kind": "multi"}]
    handwritten = [
        {"question": "reset autoincrement counter", "gold_chunk_id": "c", "source": "hand-written"},  # keyword by rule
        {"question": "How do I reset the counter?", "gold_chunk_id": "c", "source": "hand-written"},
        {"question": "When was WAL removed?", "gold_chunk_id": None, "source": "hand-written"},
        {"question": "How is WAL switched on?", "gold_chunk_id": "c", "source": "hand-written"},
    ]
    report = kinds_report(generated + handwritten, {})
    assert report["mix_by_question_set"] == {
        "generated": {"multi": 1.0},
        "hand-written": {"single": 0.5, "unanswerable": 0.25, "keyword": 0.25},
    }
    assert "mix_by_question_set" not in kinds_report([dict(row) for row in generated], {})  # nothing to set it against


def test_a_passage_that_is_only_a_heading_gets_no_generated_question():
    """A document holding just "# Notes" got a generated question (a paid request, a junk question)."""
    import hashlib

    import pandas as pd

    from retrieval_bench.goldenset.selection import rank_passages

    texts = ["# Notes", "## Installing on Windows", "WAL lets readers run while a writer writes to the log."]
    passages = pd.DataFrame(
        {
            "chunk_id": [f"p{i}" for i in range(3)],
            "text": texts,
            "text_sha256": [hashlib.sha256(t.encode()).hexdigest() for t in texts],
        }
    )
    assert [p["chunk_id"] for p in rank_passages(passages, 0, set())] == ["p2"]
