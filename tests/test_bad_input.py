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


# ---------------------------------------------------------------------------------------------
# Inputs read from outside (issue 21, items 4, 7, 8): float params, run files, Python retrievers,
# the pipeline's own tables and arrays, TREC exports. Each case first has a good run and score,
# then breaks one input: exit 1, one `error:` line, and every earlier output byte for byte intact.
import math  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import uuid  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from retrieval_bench.params import DEFAULTS, PRICE_KEYS  # noqa: E402

DOCS = {
    "wal.md": "The write ahead log lets readers and writers run at the same time. " * 4,
    "vacuum.md": "VACUUM rebuilds the database file and reclaims the free pages. " * 4,
    "fts.md": "Full text search indexes words with the FTS5 virtual table module. " * 4,
}
KEPT = ["data/chunks.parquet", "data/run.parquet", "data/run_info.json", "metrics/metrics.json", "metrics/per_question.csv"]


def _good_pipeline(root):
    """load_chunks, a labelled golden set, unit vectors, then retrieve (dense) and score: the good
    outputs every case below must leave intact."""
    shutil.copytree(ROOT / "stages", root / "stages")
    shutil.copy(ROOT / "params.yaml", root)
    (root / "data" / "docs").mkdir(parents=True)
    for name, text in DOCS.items():
        (root / "data" / "docs" / name).write_text(text)
    set_params(root, **{"load.source": "data/docs", "retrieval.method": "dense", "retrieval.depth": 10})
    assert stage("load_chunks", root).returncode == 0
    chunk_ids = pd.read_parquet(root / "data" / "chunks.parquet")["chunk_id"].tolist()
    golden = [{"qid": f"q{i}", "question": f"question {i}", "relevant": {chunk_id: 1}} for i, chunk_id in enumerate(chunk_ids)]
    (root / "data" / "goldenset.jsonl").write_text("".join(json.dumps(row) + "\n" for row in golden))
    (root / "data" / "judged_pool.jsonl").write_text("\n")
    vectors = np.random.default_rng(0).normal(size=(len(chunk_ids), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embeddings = root / "data" / "embeddings"
    embeddings.mkdir()
    np.save(embeddings / "corpus.npy", vectors)
    np.save(embeddings / "questions.npy", vectors[::-1].copy())
    (embeddings / "corpus_ids.json").write_text(json.dumps(chunk_ids))
    (embeddings / "question_ids.json").write_text(json.dumps([row["qid"] for row in golden]))
    for name in ("retrieve", "score"):
        result = stage(name, root)
        assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def good_pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("good") / "project"
    _good_pipeline(root)
    return root


@pytest.fixture
def piped(good_pipeline, tmp_path):
    """A copy of the good pipeline's folder, to break."""
    shutil.copytree(good_pipeline, tmp_path / "project", symlinks=True)
    return tmp_path / "project"


def outputs(project):
    return {name: (project / name).read_bytes() for name in KEPT}


PROGRESS_BAR = re.compile(r"^[\w ()-]+: +\d+%\|")  # tqdm's lines on stderr, which retrieve draws


def said(result):
    """What a stage wrote on stderr, less the progress bar."""
    segments = [part for line in result.stderr.split("\n") for part in line.split("\r") if part.strip()]
    return "\n".join(part for part in segments if not PROGRESS_BAR.match(part))


def assert_refused_and_kept(project, name, monkeypatch, capsys, *fragments):
    """Run stage `name` in this process: one error line with `fragments` (beside the progress
    bar), no traceback, and every earlier output byte for byte intact."""
    before = outputs(project)
    result = stage_in_process(name, project, monkeypatch, capsys)
    assert_one_line_error(subprocess.CompletedProcess(result.args, result.returncode, result.stdout, said(result)), *fragments)
    assert "Traceback" not in result.stderr
    assert outputs(project) == before


def _float_keys(defaults, where=""):
    """Every float param of the schema (params.DEFAULTS), dotted: new float keys are covered here."""
    for key, value in defaults.items():
        if isinstance(value, dict):
            yield from _float_keys(value, f"{where}{key}.")
        elif isinstance(value, float):
            yield f"{where}{key}"


FLOAT_KEYS = sorted(_float_keys(DEFAULTS))


def test_the_float_keys_are_found():
    assert {"retrieval.weights.dense", "judge.max_cost_usd", "embed.ray.num_cpus_per_actor", "score.min_coverage"} <= set(FLOAT_KEYS)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_every_float_param_must_be_finite(piped, key, value, monkeypatch, capsys):
    set_params(piped, **{key: value})
    assert_refused_and_kept(piped, "load_chunks", monkeypatch, capsys, f"params.yaml: params.{key} must be a finite number, got {value!r}")


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("section", ["generate", "judge"])
@pytest.mark.parametrize("price_key", sorted(PRICE_KEYS))
def test_every_price_must_be_finite(piped, section, price_key, value, monkeypatch, capsys):
    set_params(piped, **{f"{section}.price": {**PRICE_KEYS, price_key: value}})
    assert_refused_and_kept(piped, "load_chunks", monkeypatch, capsys, f"params.{section}.price.{price_key} must be a finite number")


def _settings(**changes):
    from retrieval_bench.llm.settings import Settings

    fields = dict(provider="anthropic", model="claude-haiku-4-5", max_tokens=64, concurrency=1, max_retries=0, base_url=None,
                  input_per_mtok=1.0, output_per_mtok=5.0, batch_discount=0.5, max_cost_usd=1.0, batch_poll_seconds=1.0)
    return Settings(**{**fields, **changes})


@pytest.mark.parametrize("changes", [{"max_cost_usd": math.nan}, {"input_per_mtok": math.nan}, {"output_per_mtok": math.inf}],
                         ids=["nan-limit", "nan-price", "inf-price"])
@pytest.mark.parametrize("guard", ["generate", "judge"])
def test_the_cost_guards_refuse_what_is_not_finite(changes, guard):
    """The guards' own check, behind params.yaml's: NaN > limit is false, so NaN passed and paid."""
    from retrieval_bench.evaluation.judging import _check_cost
    from retrieval_bench.io import InputError
    from retrieval_bench.llm.cost import check_cost, estimate

    settings = _settings(**changes)
    with pytest.raises(InputError, match=f"both must be finite numbers of US dollars .*{guard}.max_cost_usd"):
        (check_cost if guard == "generate" else _check_cost)(estimate(["a prompt"] * 3, settings), settings, 0.0)


@pytest.mark.parametrize("price", [{"input_per_mtok": math.nan, "output_per_mtok": 1.0}, {"input_per_mtok": 1.0, "output_per_mtok": math.inf},
                                   {"input_per_mtok": 1.0, "output_per_mtok": 1.0, "batch_discount": math.nan}])
def test_a_price_that_is_not_finite_is_refused(price):
    from retrieval_bench.io import InputError
    from retrieval_bench.llm.prices import resolve

    with pytest.raises(InputError, match="generate.price: prices must be finite numbers >= 0"):
        resolve("anthropic", "claude-haiku-4-5", None, price)


def _first_chunk(project):
    return pd.read_parquet(project / "data" / "chunks.parquet")["chunk_id"].tolist()


def _run_file_lines(project, suffix, bad):
    """A run file for every question, its second row replaced by `bad` (a format string given the
    question and chunk of that row)."""
    chunk_ids = _first_chunk(project)
    rows = []
    for i, chunk_id in enumerate(chunk_ids):
        for rank, other in enumerate([chunk_id, *[c for c in chunk_ids if c != chunk_id][:2]], 1):
            if suffix == ".jsonl":
                rows.append(json.dumps({"qid": f"q{i}", "chunk_id": other, "score": 1.0 / rank}))
            else:
                rows.append(f"q{i} Q0 {other} {rank} {1.0 / rank} tag")
    rows[1] = bad.format(qid="q0", chunk=chunk_ids[1])
    return "\n".join(rows) + "\n"


LONG = "A" * 300
RUN_FILE_CASES = [
    (".trec", "{qid} Q0 {chunk} 2 nan tag", ":2: score must be a finite number, got nan"),
    (".trec", "{qid} Q0 {chunk} 2 inf tag", ":2: score must be a finite number, got inf"),
    (".trec", "{qid} Q0 {chunk} 2 -Infinity tag", ":2: score must be a finite number, got -inf"),
    (".trec", "{qid} Q0 {chunk} 2 " + LONG + " tag", ":2: score must be a number, got 'AAAAAAAA"),
    (".trec", "{qid} Q0 {chunk} 2 0.5", ":2: expected a TREC run line 'qid Q0 chunk_id rank score tag', got 5 fields"),
    (".jsonl", '{{"qid": "{qid}", "chunk_id": "{chunk}", "score": NaN}}', ":2: score must be a finite number, got nan"),
    (".jsonl", '{{"qid": "{qid}", "chunk_id": "{chunk}", "score": -Infinity}}', ":2: score must be a finite number, got -inf"),
    (".jsonl", '{{"qid": "{qid}", "chunk_id": "{chunk}", "score": null}}', ":2: expected a JSON object with qid, chunk_id and a numeric score"),
    (".jsonl", '{{"qid": "{qid}", "chunk_id": "{chunk}", "score": "high"}}', ":2: expected a JSON object with qid, chunk_id and a numeric score"),
    (".jsonl", '{{"qid": "{qid}", "chunk_id": "' + LONG + '", "score": 0.5}}', "1 chunk ids are not in the chunk table, e.g. 'AAAA"),
    (".jsonl", '{{"qid": "{qid}", "chunk_id": "\\u001b[2J\\nx", "score": 0.5}}', "chunk ids are not in the chunk table, e.g. '\\x1b[2J\\nx'"),
]


@pytest.mark.parametrize("suffix,bad,fragment", RUN_FILE_CASES, ids=[f"{s}-{f[:30]}" for s, _, f in RUN_FILE_CASES])
def test_a_bad_run_file_is_refused_before_the_run_is_replaced(piped, suffix, bad, fragment, monkeypatch, capsys):
    """One NaN on a non-relevant chunk (row 2) was accepted and shifted MRR; a long field was
    echoed whole; an id with control characters split the error line."""
    (piped / "runs").mkdir()
    (piped / "runs" / f"engine{suffix}").write_text(_run_file_lines(piped, suffix, bad))
    set_params(piped, **{"retrieval.method": "run-file", "retrieval.run_file": f"runs/engine{suffix}"})
    assert_refused_and_kept(piped, "retrieve", monkeypatch, capsys, fragment)


def test_the_echo_of_a_run_file_field_is_capped(piped, monkeypatch, capsys):
    (piped / "runs").mkdir()
    (piped / "runs" / "engine.trec").write_text(_run_file_lines(piped, ".trec", "{qid} Q0 {chunk} 2 " + LONG + " tag"))
    set_params(piped, **{"retrieval.method": "run-file", "retrieval.run_file": "runs/engine.trec"})
    result = stage_in_process("retrieve", piped, monkeypatch, capsys)
    assert result.returncode == 1 and "A" * 40 not in said(result) and len(said(result)) < 200, said(result)


def _plugin(project, body):
    """A Python retriever module in the project root with `search(questions, depth)`; its name."""
    name = f"plugin_{uuid.uuid4().hex[:12]}"
    (project / f"{name}.py").write_text(
        "import sys\nimport math\nimport pandas as pd\n"
        f"CHUNKS = {_first_chunk(project)!r}\n"
        "def search(questions, depth):\n" + "".join(f"    {line}\n" for line in body.splitlines())
    )
    return name


# The body of search(); first row's shape or value broken. `q` = the questions' ids, C = the chunk ids.
PLUGIN_CASES = [
    ("return None", "returned None (NoneType); expected (qid, chunk_id, score) triples"),
    ("return 42", "returned 42 (int); expected"),
    ("return 'q0 c 1.0'", "returned 'q0 c 1.0' (str); expected"),
    ("return 1.5", "returned 1.5 (float); expected"),
    ("return [('q0', CHUNKS[0])]", "row 1 is ('q0', "),
    ("return [('q0', CHUNKS[0], 1.0, 'extra')]", "row 1 is ('q0', "),
    ("return ['q0']", "row 1 is 'q0'; expected a (qid, chunk_id, score) triple"),
    ("return [{'qid': 'q0', 'chunk_id': CHUNKS[0], 'score': 1.0}]", "row 1 is {'qid': 'q0', "),
    ("return [('q0', CHUNKS[0], '0.9')]", "row 1: score must be a finite number, got '0.9'"),
    ("return [('q0', CHUNKS[0], None)]", "row 1: score must be a finite number, got None"),
    ("return [('q0', CHUNKS[0], float('nan'))]", "row 1: score must be a finite number, got nan"),
    ("return [('q0', CHUNKS[0], 1.0), ('q0', CHUNKS[1], float('nan'))]", "row 2: score must be a finite number, got nan"),
    ("return [('q0', CHUNKS[0], math.inf)]", "row 1: score must be a finite number, got inf"),
    ("return [('q0', CHUNKS[0], True)]", "row 1: score must be a finite number, got True"),
    ("return [(None, CHUNKS[0], 1.0)]", "row 1: 'qid' must be a non-empty string (or an integer), got null"),
    ("return [('q0', 2.5, 1.0)]", "row 1: 'chunk_id' must be a non-empty string (or an integer), got the number 2.5"),
    ("return [(['q0'], CHUNKS[0], 1.0)]", "row 1: 'qid' must be a non-empty string (or an integer), got a list"),
    ("return {'q0': 5}", "question 'q0' maps to 5; expected a list of (chunk_id, score) pairs"),
    ("return {'q0': 'abc'}", "question 'q0' maps to 'abc'; expected a list of (chunk_id, score) pairs"),
    ("return {'q0': [(CHUNKS[0], 1.0, 3)]}", "question 'q0' has hit ("),
    ("return {'q0': [(CHUNKS[0], 'high')]}", "row 1: score must be a finite number, got 'high'"),
    ("return {'q0': [(CHUNKS[0], float('nan'))]}", "row 1: score must be a finite number, got nan"),
    ("return pd.DataFrame({'query': ['q0'], 'doc': [CHUNKS[0]], 'score': [1.0]})", "returned a DataFrame without column qid, chunk_id"),
    ("return pd.DataFrame({'qid': ['q0'], 'chunk_id': [CHUNKS[0]], 'score': [float('nan')]})", "row 1: score must be a finite number, got nan"),
    ("raise ValueError('the index is down')", "raised ValueError: the index is down"),
    ("raise KeyError('q0')", "raised KeyError: 'q0'"),
    ("return [1 / 0]", "raised ZeroDivisionError: division by zero"),
    ("yield ('q0', CHUNKS[0], 1.0)\nraise RuntimeError('lost the connection')", "raised RuntimeError: lost the connection"),
    ("sys.exit(0)", "called sys.exit(0) instead of returning a run"),
    ("sys.exit(3)", "called sys.exit(3) instead of returning a run"),
    ("sys.exit('bye')", "called sys.exit('bye') instead of returning a run"),
    ("raise SystemExit", "called sys.exit(None) instead of returning a run"),
    ("return []", "no question of the golden set is in the run"),
    ("return [('q0', 'no-such-chunk', 1.0)]", "1 chunk ids are not in the chunk table, e.g. 'no-such-chunk'"),
    ("return [('q0', CHUNKS[0], 1.0), ('q0', CHUNKS[0], 0.5)]", "question 'q0' lists chunk"),
]


@pytest.mark.parametrize("body,fragment", PLUGIN_CASES, ids=[body[:40] for body, _ in PLUGIN_CASES])
def test_a_python_retriever_that_misbehaves_is_refused_in_one_line(piped, body, fragment, monkeypatch, capsys):
    name = _plugin(piped, body)
    set_params(piped, **{"retrieval.method": "python", "retrieval.python": f"{name}:search"})
    assert_refused_and_kept(piped, "retrieve", monkeypatch, capsys, f"retrieval.python {name}:search: {fragment}"
                            if "golden set" not in fragment and "chunk table" not in fragment and "lists chunk" not in fragment
                            else f"retrieval.python {name}:search", fragment)


@pytest.mark.parametrize("module,fragment", [
    ("def search(questions, depth)\n    return []\n", "cannot import it (SyntaxError: "),
    ("raise ImportError('needs faiss')\n", "cannot import it (ImportError: needs faiss)"),
    ("import sys\nsys.exit(0)\n", "cannot import it (SystemExit"),
    ("x = 1\n", "cannot import it (AttributeError: "),
], ids=["syntax-error", "import-raises", "exit-on-import", "no-function"])
def test_a_python_retriever_that_cannot_be_imported_is_refused(piped, module, fragment, monkeypatch, capsys):
    name = f"plugin_{uuid.uuid4().hex[:12]}"
    (piped / f"{name}.py").write_text(module)
    set_params(piped, **{"retrieval.method": "python", "retrieval.python": f"{name}:search"})
    assert_refused_and_kept(piped, "retrieve", monkeypatch, capsys, f"retrieval.python {name}:search: {fragment}")


def test_a_python_retriever_may_return_a_dataframe(piped, monkeypatch, capsys):
    name = _plugin(piped, "return pd.DataFrame({'qid': [q['qid'] for q in questions], 'chunk_id': CHUNKS[:len(questions)], "
                          "'score': [1.0] * len(questions)})")
    set_params(piped, **{"retrieval.method": "python", "retrieval.python": f"{name}:search"})
    assert stage_in_process("retrieve", piped, monkeypatch, capsys).returncode == 0
    assert len(pd.read_parquet(piped / "data" / "run.parquet")) == len(_first_chunk(piped))
