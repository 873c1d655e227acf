"""Bad input: one line naming the file or key, exit status 1, and no output written."""
import json
import shutil
import sys

import pytest
import yaml
from conftest import ROOT, run, set_params


@pytest.fixture
def workdir(tmp_path):
    """The stage scripts, params and a two-document corpus, without git or DVC."""
    shutil.copytree(ROOT / "stages", tmp_path / "stages")
    shutil.copy(ROOT / "params.yaml", tmp_path)
    (tmp_path / "data" / "docs").mkdir(parents=True)
    for name in ("question_prompt.txt", "handwritten_questions.jsonl"):
        shutil.copy(ROOT / "data" / name, tmp_path / "data")
    (tmp_path / "data" / "docs" / "a.md").write_text("SQLite is a library. " * 30)
    set_params(tmp_path, **{"load.source": "data/docs"})
    return tmp_path


def stage(name, cwd):
    """A stage as a subprocess: the wiring (exit status, stderr) is what these tests check."""
    return run([sys.executable, "-m", f"stages.{name}"], cwd=cwd, check=False)


def stage_in_process(name, cwd, monkeypatch, capsys):
    """The same stage run in this process (no interpreter start-up): its exit status and output."""
    import importlib
    import subprocess

    from retrieval_bench.io import run_stage

    monkeypatch.chdir(cwd)
    capsys.readouterr()
    try:
        run_stage(importlib.import_module(f"stages.{name}").main)
        status = 0
    except SystemExit as stop:
        status = stop.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([name], status, out, err)


def assert_one_line_error(result, *fragments):
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize(
    "changes,fragments",
    [
        ({"load.source": "nowhere"}, ["load.source nowhere: no such file or folder"]),
        ({"load.chunk_size": 5}, ["params.yaml: unknown key params.load.chunk_size", "valid keys under params.load: chunking, "]),
        ({"score.k": [5, 0]}, ["params.yaml: score.k must be a non-empty list of distinct positive integers"]),
        ({"score.k": "5"}, ["params.yaml: params.score.k must be list"]),
        ({"load.chunking": {"chars": 100, "overlap": 100}}, ["params.yaml: load.chunking needs chars > 0 and 0 <= overlap < chars"]),
        ({"retrieval.method": "magic"}, ["params.yaml: retrieval.method must be one of ", "bm25, dense, hybrid"]),
        ({"embed.batch_size": None}, ["params.yaml: params.embed.batch_size must be int, got null"]),
        ({"load.source": None}, ["params.yaml: params.load.source must be str, got null"]),
    ],
)
def test_bad_params_and_sources(workdir, changes, fragments, monkeypatch, capsys):
    set_params(workdir, **changes)
    assert_one_line_error(stage_in_process("load_chunks", workdir, monkeypatch, capsys), *fragments)
    assert not (workdir / "data" / "chunks.parquet").exists()


def test_unknown_section_and_broken_yaml(workdir, monkeypatch, capsys):
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["scoring"] = {}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    assert_one_line_error(stage_in_process("load_chunks", workdir, monkeypatch, capsys), "unknown key params.scoring", "did you mean params.score?", "valid keys under params: embed, generate, ")
    (workdir / "params.yaml").write_text("load: [unclosed\n")
    assert_one_line_error(stage("load_chunks", workdir), "params.yaml: invalid YAML")


def test_malformed_chunks_file_names_the_line(workdir):
    (workdir / "data" / "chunks.jsonl").write_text('{"id": "1", "text": "fine"}\n{"id": "2", "text": oops}\n')
    set_params(workdir, **{"load.source": "data/chunks.jsonl"})
    assert_one_line_error(stage("load_chunks", workdir), "data/chunks.jsonl:2: invalid JSON")
    assert not any((workdir / "data").glob("*.parquet"))


def test_no_question_for_the_corpus_is_a_clear_error(workdir):
    assert stage("load_chunks", workdir).returncode == 0
    result = stage("generate_goldenset", workdir)  # the hand-written questions are for another corpus
    assert_one_line_error(result, "no usable question for any passage", "set generate.provider")
    assert not (workdir / "data" / "goldenset.jsonl").exists()


def test_unknown_model_offline_is_a_clear_error(workdir):
    assert stage("load_chunks", workdir).returncode == 0
    (workdir / "data" / "goldenset.jsonl").write_text('{"qid": "q1", "question": "what is SQLite?"}\n')
    set_params(workdir, **{"embed.model": "nobody/no-such-model"})
    assert_one_line_error(stage("embed_questions", workdir), "embed.model 'nobody/no-such-model'", "HF_HUB_OFFLINE is set")
    assert not (workdir / "data" / "embeddings").exists()


def test_a_golden_set_emptied_by_the_echo_filter_is_an_error(workdir):
    (workdir / "data" / "docs" / "a.md").write_text("The write ahead log lets readers and writers run at the same time.\n")
    (workdir / "data" / "handwritten_questions.jsonl").write_text(json.dumps({
        "question": "Does the write ahead log let readers and writers run at the same time?",
        "doc_id": "a.md", "evidence": "The write ahead log lets readers and writers run at the same time."}) + "\n")
    set_params(workdir, **{"generate.drop_echo": True})
    assert stage("load_chunks", workdir).returncode == 0
    assert_one_line_error(stage("generate_goldenset", workdir), "no usable question for any passage")
    assert not (workdir / "data" / "goldenset.jsonl").exists()


@pytest.mark.parametrize(
    "content,fragments",
    [
        ('{"id": "1", "text": "fine"}\n{"id": null, "text": "no id"}\n',
         ["data/chunks.jsonl: record 2: 'id' must be a non-empty string (or an integer), got null"]),
        ('{"id": "1", "text": "fine"}\n{"id": "2", "text": 3.5}\n', ["data/chunks.jsonl: record 2: 'text' must be a string, got the number 3.5"]),
    ],
)
def test_null_ids_and_non_string_texts_are_refused_by_the_stage(workdir, content, fragments, monkeypatch, capsys):
    (workdir / "data" / "chunks.jsonl").write_text(content)
    set_params(workdir, **{"load.source": "data/chunks.jsonl"})
    assert_one_line_error(stage_in_process("load_chunks", workdir, monkeypatch, capsys), *fragments)
    assert not any((workdir / "data").glob("*.parquet"))


def test_a_beir_folder_without_its_corpus_is_named_by_the_stage(workdir, monkeypatch, capsys):
    beir = workdir / "data" / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "what"}\n')
    (beir / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    set_params(workdir, **{"load.source": "data/beir"})
    assert_one_line_error(stage_in_process("load_chunks", workdir, monkeypatch, capsys), "data/beir/corpus.jsonl: not found", "looks like a BEIR folder")
