"""generate.imported: question sets made by other tools (ragas, DeepEval, LlamaIndex, hand-written
JSONL, BEIR) as named question sets of the golden set, through the generate_goldenset stage with
the real anthropic SDK against the stub server: each set's rows say their question set, keep the
tool's provenance and their own fields, are located in the documents, never reach the LLM and take
nothing of generate.max_questions. Bad names and missing files are one line naming the key."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run, set_params
from stub_llm import StubLLM, read_jsonl, run_stage_here, stage_project

from retrieval_bench.core.errors import InputError
from retrieval_bench.evaluation.score.segments import question_set, segments
from retrieval_bench.goldenset.formats import read_question_set

GOLDEN = "data/goldenset.jsonl"
REPORT = "metrics/goldenset.json"
WAL_ADVANTAGE = "WAL provides more concurrency as readers do not block writers and a writer does not block readers."
WAL_NETWORK = (
    "All processes using a database must be on the same host computer; WAL does not work over a network filesystem."
)


def write_sets(project) -> dict[str, str]:
    """One file per format in data/imported/, each with the evidence of wal.md; {name: path}."""
    folder = project / "data" / "imported"
    (folder / "beir" / "qrels").mkdir(parents=True)
    with open(folder / "ragas.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["user_input", "reference_contexts", "reference", "synthesizer_name"])
        writer.writerow(["Do readers wait for a writer in WAL mode?", json.dumps([WAL_ADVANTAGE]), "No.", "single_hop"])
    deepeval = [
        {
            "input": "Can WAL be used on a network file system?",
            "expected_output": "No: every process must be on the same host.",
            "context": [WAL_NETWORK],
            "source_file": "wal.md",
        }
    ]
    (folder / "deepeval.json").write_text(json.dumps(deepeval))
    llamaindex = {
        "queries": {"node-q1": "Which journal mode lets a reader run while a write is in progress?"},
        "corpus": {"node-7": WAL_ADVANTAGE},
        "relevant_docs": {"node-q1": ["node-7"]},
        "mode": "text",
    }
    (folder / "llamaindex.json").write_text(json.dumps(llamaindex))
    handwritten = {
        "qid": "t1",
        "question": "Does write-ahead logging work across machines sharing a disk over the network?",
        "doc_id": "wal.md",
        "evidence": WAL_NETWORK,
        "source": "support tickets",
    }
    (folder / "team.jsonl").write_text(json.dumps(handwritten) + "\n")
    (folder / "beir" / "queries.jsonl").write_text(
        json.dumps({"_id": "b1", "text": "autoincrement versus rowid in sqlite"}) + "\n"
    )
    (folder / "beir" / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nb1\tautoinc.md\t2\nb1\twal.md\t1\nb1\tnot-here.md\t1\n"
    )
    return {
        "ragas_v1": "data/imported/ragas.csv",
        "deepeval": "data/imported/deepeval.json",
        "llama": "data/imported/llamaindex.json",
        "team": "data/imported/team.jsonl",
        "beir_logs": "data/imported/beir",
    }


@pytest.fixture
def project(tmp_path):
    project = stage_project(tmp_path / "p")
    sample = Path(__file__).resolve().parents[2] / "data" / "sample" / "sqlite"
    (project / "data" / "sample_texts").mkdir()
    for name in ("wal.md", "autoinc.md"):
        (project / "data" / "sample_texts" / name).write_text((sample / name).read_text())
    return project


def test_every_format_is_a_named_set_with_its_provenance_and_takes_no_budget(project):
    sets = write_sets(project)
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 3, "generate.imported": sets})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        sent = [request.body["messages"][-1]["content"] for request in stub.generation_requests()]
    assert len(sent) == 3  # generate.max_questions: the imported questions take none of it
    golden = read_jsonl(project / GOLDEN)
    by_set = {}
    for row in golden:
        by_set.setdefault(question_set(row), []).append(row)
    assert {name: len(rows) for name, rows in by_set.items()} == {
        "generated": 3,
        "ragas_v1": 1,
        "deepeval": 1,
        "llama": 1,
        "team": 1,
        "beir_logs": 1,
    }
    imported = [row for row in golden if "question_set" in row]
    assert not any(row["question"] in prompt for row in imported for prompt in sent)  # never sent to the LLM
    one = {row["question_set"]: row for row in imported}
    assert {name: row["source"] for name, row in one.items()} == {
        "ragas_v1": "ragas",
        "deepeval": "deepeval",
        "llama": "llamaindex",
        "team": "hand-written",
        "beir_logs": "qrels",
    }
    assert one["team"]["own_source"] == "support tickets" and one["team"]["qid"] == "team:t1"
    assert one["deepeval"]["source_file"] == "wal.md" and one["deepeval"]["expected_output"].startswith("No:")
    assert one["ragas_v1"]["synthesizer_name"] == "single_hop" and one["llama"]["qid"] == "llama:node-q1"
    wal = (project / "data" / "sample_texts" / "wal.md").read_text()
    for name, evidence in (("ragas_v1", WAL_ADVANTAGE), ("deepeval", WAL_NETWORK), ("llama", WAL_ADVANTAGE)):
        row = one[name]
        assert row["doc_id"] == "wal.md" and wal[row["start"] : row["end"]] == evidence
        assert row["gold_chunk_id"].startswith("wal.md") and row["echo"] is not None
    # The BEIR set: graded and multi-relevant, judgements of documents not in this corpus dropped.
    assert one["beir_logs"]["relevant"] == {"autoinc.md": 2, "wal.md": 1}
    assert one["beir_logs"]["gold_chunk_id"] == "autoinc.md"
    assert [span[0] for span in one["beir_logs"]["relevant_spans"]] == ["autoinc.md", "wal.md"]
    assert len({row["qid"] for row in golden}) == len(golden)
    report = json.loads((project / REPORT).read_text())
    assert report["n_by_question_set"] == {name: len(rows) for name, rows in sorted(by_set.items())}
    assert report["n_generated"] == 3 and report["n_handwritten"] == 0 and report["n_questions"] == 8
    assert report["imported"]["beir_logs"] == {
        "file": "data/imported/beir",
        "format": "beir",
        "read": 1,
        "other_corpus": 0,
        "not_located": 0,
        "relevant_elsewhere": 1,  # not-here.md, judged relevant, is no document of this corpus
        "no_relevant": 0,
        "duplicate_questions_dropped": 0,
    }
    assert {name: entry["format"] for name, entry in report["imported"].items()} == {
        "beir_logs": "beir",
        "deepeval": "deepeval",
        "llama": "llamaindex",
        "ragas_v1": "ragas",
        "team": "handwritten",
    }
    assert "question set deepeval: 1 questions from data/imported/deepeval.json (deepeval)" in out
    assert segments(golden)["question_set"].tolist() == [question_set(row) for row in golden]


def test_an_imported_set_goes_through_the_same_echo_gauge_and_drop(project):
    quoting = {"question": f"What is meant by {WAL_ADVANTAGE}", "doc_id": "wal.md", "evidence": WAL_ADVANTAGE}
    asking = {"question": "Can one machine's process share a WAL database with another's?", "evidence": WAL_NETWORK}
    (project / "data" / "quoting.jsonl").write_text("".join(json.dumps(q) + "\n" for q in (quoting, asking)))
    set_params(project, **{"generate.imported": {"quoting": "data/quoting.jsonl"}, "generate.max_questions": 0})
    with StubLLM() as stub:
        assert run_stage_here(project, stub)[0] == 0
        echoes = {row["question"]: row["echo"] for row in read_jsonl(project / GOLDEN) if row.get("question_set")}
        assert echoes == {quoting["question"]: True, asking["question"]: False}
        set_params(project, **{"generate.drop_echo": True})
        assert run_stage_here(project, stub)[0] == 0
    rejects = read_jsonl(project / "metrics" / "generate_rejects.jsonl")
    assert [(r["reason"], r["question_set"], r["question"]) for r in rejects] == [
        ("echo", "quoting", quoting["question"])
    ]
    assert [row["question"] for row in read_jsonl(project / GOLDEN)] == [asking["question"]]


def test_generate_handwritten_keeps_a_ragas_row_s_own_provenance(project):
    with open(project / "data" / "testset.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["user_input", "reference_contexts", "source"])
        writer.writerow(["Do readers wait for a writer in WAL mode?", json.dumps([WAL_ADVANTAGE]), "ragas 0.2 run 7"])
    set_params(project, **{"generate.handwritten": "data/testset.csv"})
    with StubLLM() as stub:
        assert run_stage_here(project, stub)[0] == 0
    [row] = read_jsonl(project / GOLDEN)
    assert (row["source"], row["question_set"], row["own_source"]) == ("ragas", "hand-written", "ragas 0.2 run 7")
    assert question_set(row) == "hand-written"
    assert json.loads((project / REPORT).read_text())["n_handwritten"] == 1


def test_question_set_prefers_the_row_s_own_over_its_source():
    assert question_set({"source": "hand-written", "question_set": "ragas_v1"}) == "ragas_v1"
    assert question_set({"source": "qrels", "question_set": "beir_logs"}) == "beir_logs"
    assert question_set({"source": "ragas", "question_set": "hand-written"}) == "hand-written"
    assert question_set({"source": "qrels"}) == "real"
    assert question_set({"source": "hand-written"}) == "hand-written"
    assert question_set({"source": "claude-haiku-4-5"}) == "generated"


def test_deepeval_goldens_are_read_from_json_and_jsonl(tmp_path):
    golden = {"input": " How big can a WAL file get? ", "context": ["", "The WAL file grows."], "source_file": "a.md"}
    (tmp_path / "goldens.json").write_text(json.dumps([golden]))
    (tmp_path / "goldens.jsonl").write_text(json.dumps(golden) + "\n")
    for name in ("goldens.json", "goldens.jsonl"):
        kind, [question] = read_question_set(tmp_path / name)
        assert kind == "deepeval" and question["question"] == "How big can a WAL file get?"
        assert question["evidence"] == ["The WAL file grows."] and question["extra"] == {"source_file": "a.md"}
    (tmp_path / "bad.json").write_text(json.dumps([{"input": "q?", "context": "not a list"}]))
    with pytest.raises(InputError, match=r"bad.json: golden 1: a DeepEval golden's `context` must be a list"):
        read_question_set(tmp_path / "bad.json")


def check_params(project) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "stages.check_params"], cwd=project, check=False)


@pytest.mark.parametrize(
    ("imported", "expected"),
    [
        ({"real": "data/x.jsonl"}, "generate.imported.real: 'real' is the name of a question set"),
        ({"all": "data/x.jsonl"}, "(reserved: real, hand-written, generated, all)"),
        ({"my.set": "data/x.jsonl"}, "generate.imported name 'my.set' is not usable"),
        ({"ok": 5}, "generate.imported.ok must be the path of a question set file"),
        ({"ragas_v1": "data/nowhere.csv"}, "generate.imported.ragas_v1: data/nowhere.csv: no such file or folder"),
        ([1, 2], "generate.imported must be a mapping of names to files"),
    ],
)
def test_a_bad_imported_set_is_one_line_naming_its_key(project, imported, expected):
    set_params(project, **{"generate.imported": imported})
    result = check_params(project)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0]


def test_the_stage_names_the_key_of_a_missing_or_unreadable_set(project):
    (project / "data" / "odd.jsonl").write_text(json.dumps({"text": "no question here"}) + "\n")
    for file, expected in (
        ("data/gone.jsonl", "error: generate.imported.gone: data/gone.jsonl: no such file or folder"),
        ("data/odd.jsonl", "error: generate.imported.gone: data/odd.jsonl:1: not a known question set"),
    ):
        set_params(project, **{"generate.imported": {"gone": file}})
        with StubLLM() as stub:
            status, out, err = run_stage_here(project, stub)
        assert status == 1 and err.strip().splitlines() == [err.strip()], err
        assert err.startswith(expected) and not (project / GOLDEN).exists()


def test_an_empty_imported_value_is_no_set(project):
    set_params(project, **{"generate.imported": None})
    assert check_params(project).returncode == 0
    assert json.loads((project / "data" / "imported_stamp.json").read_text()) == {}


def test_the_stamp_changes_with_an_imported_file_only(project):
    sets = write_sets(project)
    set_params(project, **{"generate.imported": {"team": sets["team"], "beir_logs": sets["beir_logs"]}})
    assert check_params(project).returncode == 0
    first = json.loads((project / "data" / "imported_stamp.json").read_text())
    assert sorted(first) == ["beir_logs", "team"] and first["beir_logs"]["files"] == 2
    with open(project / sets["team"], "a") as handle:
        handle.write(json.dumps({"question": "Is WAL faster?", "doc_id": "wal.md", "evidence": "WAL is"}) + "\n")
    assert check_params(project).returncode == 0
    second = json.loads((project / "data" / "imported_stamp.json").read_text())
    assert second["team"]["md5"] != first["team"]["md5"] and second["beir_logs"] == first["beir_logs"]


def test_drop_echo_never_drops_a_question_judged_by_labels():
    """An imported BEIR set's real query is gauged against its whole labelled document, where it
    shares its words by nature ("How does VACUUM rebuild the database file?": echo share 1.0): it
    was rejected as an echo. A span-anchored echo is still dropped."""
    from retrieval_bench.goldenset.assemble import drop_echoes

    base = {"source": "qrels", "gold_chunk_id": "c", "doc_id": "d", "question": "q?", "echo": True}
    labelled = {**base, "qid": "b1", "relevant": {"lang_vacuum.md": 2}}
    quoting = {**base, "qid": "s1", "source": "hand-written"}
    kept, rejects = drop_echoes([labelled, quoting])
    assert [row["qid"] for row in kept] == ["b1"] and [r["reason"] for r in rejects] == ["echo"]


def test_an_imported_set_none_of_whose_questions_is_in_the_corpus_is_one_line(project):
    """An export-beir folder (its qrels name chunk ids) imported as a BEIR set gave "question set rt:
    0 questions; 216 are for documents not in this corpus" and a passing stage."""
    beir = project / "data" / "rt"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "wal.md:0-800", "text": "x"}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "How does WAL work?"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\twal.md:0-800\t1\n")
    set_params(project, **{"generate.imported": {"rt": "data/rt"}})
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
    assert status == 1 and not (project / GOLDEN).exists()
    assert err.strip() == (
        "error: generate.imported.rt: data/rt: none of its 1 questions is in this corpus: 1 are for documents it "
        "lacks, 0 could not be located (a BEIR set names document ids; an `export-beir` folder names chunk ids: "
        "read it back as load.source)"
    )


def test_an_imported_beir_sets_lost_judgements_are_an_error_or_counted(tmp_path):
    """A qrels qid with no query text vanished uncounted, and a kept question's relevant document
    missing from this corpus left its recall's denominator unsaid ("0 are for documents not in
    this corpus")."""
    from retrieval_bench.goldenset.formats import read_beir
    from retrieval_bench.goldenset.imported import found_line, judged_rows

    beir = tmp_path / "logs"
    (beir / "qrels").mkdir(parents=True)
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "1", "text": "How does WAL work?"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("1\twal.md\t1\n1\tgone.md\t1\n1\tgone2.md\t0\n77777\twal.md\t1\n")
    with pytest.raises(InputError, match=r"test.tsv: 1 judged queries have no text in .*queries.jsonl, e.g. '77777'"):
        read_beir(beir, "test")
    (beir / "qrels" / "test.tsv").write_text("1\twal.md\t1\n1\tgone.md\t1\n1\tgone2.md\t0\n")
    rows, counts = judged_rows(read_beir(beir, "test"), {"wal.md": "WAL text"})
    assert len(rows) == 1 and rows[0]["relevant"] == {"wal.md": 1}
    assert counts == {"other_corpus": 0, "not_located": 0, "relevant_elsewhere": 1, "no_relevant": 0}  # gone2.md: 0
    line = found_line("logs", rows, {**counts, "duplicate_questions_dropped": 0})
    assert line.endswith(
        "; 1 relevant documents of the questions kept are not in this corpus (dropped from their judgements)"
    )
    # Judged, nothing relevant (every grade 0 or below, the documents in this corpus): not "for
    # documents it lacks", as the error and the count line said.
    (beir / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": str(i), "text": f"Question {i}?"}) + "\n" for i in (1, 2, 3))
    )
    (beir / "qrels" / "test.tsv").write_text("1\twal.md\t0\n2\twal.md\t-1\n2\tfaq.md\t0\n3\tgone.md\t1\n")
    rows, counts = judged_rows(read_beir(beir, "test"), {"wal.md": "WAL text", "faq.md": "FAQ text"})
    assert rows == [] and counts["no_relevant"] == 2 and counts["other_corpus"] == 1
    line = found_line("logs", rows, {**counts, "duplicate_questions_dropped": 0})
    assert "1 are for documents not in this corpus, 0 could not be located, 2 have no judgement above grade 0" in line
