"""Bad input: one line naming the file or key, exit status 1, and no output written."""

import json
import math
import re
import shutil
import subprocess
import sys
import uuid

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, set_params
from stage_helpers import assert_one_line_error, stage, stage_in_process

from retrieval_bench.core import paths
from retrieval_bench.core.params import DEFAULTS, PRICE_KEYS


@pytest.mark.parametrize(
    "changes,fragments",
    [
        ({"load.source": "nowhere"}, ["load.source nowhere: no such file or folder"]),
        (
            {"load.chunk_size": 5},
            ["params.yaml: unknown key params.load.chunk_size", "valid keys under params.load: chunking, "],
        ),
        ({"score.k": [5, 0]}, ["params.yaml: score.k must be a non-empty list of distinct positive integers"]),
        ({"score.k": "5"}, ["params.yaml: params.score.k must be list"]),
        (
            {"load.chunking": {"chars": 100, "overlap": 100}},
            ["params.yaml: load.chunking needs chars > 0 and 0 <= overlap < chars"],
        ),
        ({"retrieval.method": "magic"}, ["params.yaml: retrieval.method must be one of ", "bm25, dense, hybrid"]),
        ({"embed.batch_size": None}, ["params.yaml: params.embed.batch_size must be int, got null"]),
        ({"load.source": None}, ["params.yaml: params.load.source must be str, got null"]),
    ],
)
def test_bad_params_and_sources(workdir, changes, fragments, monkeypatch, capsys):
    set_params(workdir, **changes)
    assert_one_line_error(stage_in_process("load_chunks", workdir, monkeypatch, capsys), *fragments)
    assert not (workdir / paths.DOCUMENTS).exists() and not (workdir / paths.SOURCE_CHUNKS).exists()


def test_unknown_section_and_broken_yaml(workdir, monkeypatch, capsys):
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["scoring"] = {}
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    assert_one_line_error(
        stage_in_process("load_chunks", workdir, monkeypatch, capsys),
        "unknown key params.scoring",
        "did you mean params.score?",
        "valid keys under params: chunkings, costs, embed, embedders, generate, ",
    )
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
    assert_one_line_error(
        stage("embed_questions", workdir), "embed.model 'nobody/no-such-model'", "HF_HUB_OFFLINE is set"
    )
    assert not (workdir / "data" / "embeddings").exists()


def test_a_golden_set_emptied_by_the_echo_filter_is_an_error(workdir):
    (workdir / "data" / "docs" / "a.md").write_text(
        "The write ahead log lets readers and writers run at the same time.\n"
    )
    (workdir / "data" / "handwritten_questions.jsonl").write_text(
        json.dumps(
            {
                "question": "Does the write ahead log let readers and writers run at the same time?",
                "doc_id": "a.md",
                "evidence": "The write ahead log lets readers and writers run at the same time.",
            }
        )
        + "\n"
    )
    set_params(workdir, **{"generate.drop_echo": True})
    assert stage("load_chunks", workdir).returncode == 0
    assert_one_line_error(stage("generate_goldenset", workdir), "no usable question for any passage")
    assert not (workdir / "data" / "goldenset.jsonl").exists()


@pytest.mark.parametrize(
    "content,fragments",
    [
        (
            '{"id": "1", "text": "fine"}\n{"id": null, "text": "no id"}\n',
            ["data/chunks.jsonl: record 2: 'id' must be a non-empty string (or an integer), got null"],
        ),
        (
            '{"id": "1", "text": "fine"}\n{"id": "2", "text": 3.5}\n',
            ["data/chunks.jsonl: record 2: 'text' must be a string, got the number 3.5"],
        ),
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
    assert_one_line_error(
        stage_in_process("load_chunks", workdir, monkeypatch, capsys),
        "data/beir/corpus.jsonl: not found",
        "looks like a BEIR folder",
    )


# ---------------------------------------------------------------------------------------------
# Inputs read from outside (issue 21, items 4, 7, 8): float params, run files, Python retrievers,
# the pipeline's own tables and arrays, TREC exports. Each case first has a good run and score,
# then breaks one input: exit 1, one `error:` line, and every earlier output byte for byte intact.
CHUNKS = {  # ready chunks; one id holds a space (a TREC run cannot carry it)
    "wal": "The write ahead log lets readers and writers run at the same time.",
    "vacuum": "VACUUM rebuilds the database file and reclaims the free pages.",
    "full text": "Full text search indexes words with the FTS5 virtual table module.",
}
KEPT = [
    paths.CHUNKS,
    "data/goldenset.jsonl",
    "data/panel/default/run.parquet",
    "data/panel/default/run_info.json",
    "data/judged_pool.jsonl",
    "metrics/panel/default/metrics.json",
    "metrics/panel/default/per_question.csv",
]


def _good_pipeline(root):
    """load_chunks, a labelled golden set, unit vectors, then retrieve (dense) and score: the good
    outputs every case below must leave intact."""
    shutil.copytree(ROOT / "stages", root / "stages")
    shutil.copy(ROOT / "params.yaml", root)
    (root / "data").mkdir()
    for name in ("question_prompt.txt", "judge_prompt.txt"):
        shutil.copy(ROOT / "data" / name, root / "data")
    (root / "data" / "corpus.jsonl").write_text(
        "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in CHUNKS.items())
    )
    set_params(
        root,
        **{
            "load.source": "data/corpus.jsonl",
            "retrieval.method": "dense",
            "retrieval.depth": 10,
            "score.k": [1, 5, 10],
        },
    )
    for name in ("load_chunks", "chunk"):
        assert stage(name, root).returncode == 0
    chunk_ids = pd.read_parquet(root / paths.CHUNKS)["chunk_id"].tolist()
    golden = [
        {"qid": f"q{i}", "question": f"question {i}", "relevant": {chunk_id: 1}} for i, chunk_id in enumerate(chunk_ids)
    ]
    (root / "data" / "goldenset.jsonl").write_text("".join(json.dumps(row) + "\n" for row in golden))
    (root / "data" / "judged_pool.jsonl").write_text("\n")
    vectors = np.random.default_rng(0).normal(size=(len(chunk_ids), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for npy, ids in ((paths.CORPUS_VECTORS, paths.CORPUS_IDS), (paths.QUESTION_VECTORS, paths.QUESTION_IDS)):
        (root / npy).parent.mkdir(parents=True, exist_ok=True)
    np.save(root / paths.CORPUS_VECTORS, vectors)
    np.save(root / paths.QUESTION_VECTORS, vectors[::-1].copy())
    (root / paths.CORPUS_IDS).write_text(json.dumps(chunk_ids))
    (root / paths.QUESTION_IDS).write_text(json.dumps([row["qid"] for row in golden]))
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
    monkeypatch.setattr(sys, "argv", [name])  # judge and generate_goldenset read their command line
    result = stage_in_process(name, project, monkeypatch, capsys)
    assert_one_line_error(
        subprocess.CompletedProcess(result.args, result.returncode, result.stdout, said(result)), *fragments
    )
    assert "Traceback" not in result.stderr
    assert outputs(project) == before
    return said(result)


def _float_keys(defaults, where=""):
    """Every float param of the schema (params.DEFAULTS), dotted: new float keys are covered here."""
    for key, value in defaults.items():
        if isinstance(value, dict):
            yield from _float_keys(value, f"{where}{key}.")
        elif isinstance(value, float):
            yield f"{where}{key}"


FLOAT_KEYS = sorted(_float_keys(DEFAULTS))


def test_the_float_keys_are_found():
    assert {
        "retrieval.weights.dense",
        "judge.max_cost_usd",
        "embed.ray.num_cpus_per_actor",
        "score.min_coverage",
    } <= set(FLOAT_KEYS)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("key", FLOAT_KEYS)
def test_every_float_param_must_be_finite(piped, key, value, monkeypatch, capsys):
    set_params(piped, **{key: value})
    assert_refused_and_kept(
        piped, "load_chunks", monkeypatch, capsys, f"params.yaml: params.{key} must be a finite number, got {value!r}"
    )


@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
@pytest.mark.parametrize("section", ["generate", "judge"])
@pytest.mark.parametrize("price_key", sorted(PRICE_KEYS))
def test_every_price_must_be_finite(piped, section, price_key, value, monkeypatch, capsys):
    set_params(piped, **{f"{section}.price": {**PRICE_KEYS, price_key: value}})
    assert_refused_and_kept(
        piped, "load_chunks", monkeypatch, capsys, f"params.{section}.price.{price_key} must be a finite number"
    )


def _settings(**changes):
    from retrieval_bench.llm.cost.settings import Settings

    fields = dict(
        provider="anthropic",
        model="claude-haiku-4-5",
        max_tokens=64,
        concurrency=1,
        max_retries=0,
        base_url=None,
        input_per_mtok=1.0,
        output_per_mtok=5.0,
        batch_discount=0.5,
        max_cost_usd=1.0,
        batch_poll_seconds=1.0,
    )
    return Settings(**{**fields, **changes})


@pytest.mark.parametrize(
    "changes",
    [{"max_cost_usd": math.nan}, {"input_per_mtok": math.nan}, {"output_per_mtok": math.inf}],
    ids=["nan-limit", "nan-price", "inf-price"],
)
@pytest.mark.parametrize("guard", ["generate", "judge"])
def test_the_cost_guards_refuse_what_is_not_finite(changes, guard):
    """The guards' own check, behind params.yaml's: NaN > limit is false, so NaN passed and paid."""
    from retrieval_bench.core.errors import InputError
    from retrieval_bench.llm.cost.guard import JUDGE_WORDING, QUESTIONS_WORDING, check_cost, estimate

    settings = _settings(**changes, section=guard)  # the settings name their params section
    with pytest.raises(InputError, match=f"both must be finite numbers of US dollars .*{guard}.max_cost_usd"):
        check_cost(
            estimate(["a prompt"] * 3, settings),
            settings,
            0.0,
            QUESTIONS_WORDING if guard == "generate" else JUDGE_WORDING,
        )


@pytest.mark.parametrize(
    "price",
    [
        {"input_per_mtok": math.nan, "output_per_mtok": 1.0},
        {"input_per_mtok": 1.0, "output_per_mtok": math.inf},
        {"input_per_mtok": 1.0, "output_per_mtok": 1.0, "batch_discount": math.nan},
    ],
)
def test_a_price_that_is_not_finite_is_refused(price):
    from retrieval_bench.core.errors import InputError
    from retrieval_bench.llm.cost.prices import resolve
    from retrieval_bench.llm.providers.registry import PROVIDERS

    with pytest.raises(InputError, match="generate.price: prices must be finite numbers >= 0"):
        resolve(PROVIDERS["anthropic"], "claude-haiku-4-5", None, price)


def _chunk_ids(project):
    return pd.read_parquet(project / paths.CHUNKS)["chunk_id"].tolist()


def _run_file_lines(project, suffix, bad):
    """A run file for every question, its second row replaced by `bad` (a format string given the
    question and chunk of that row)."""
    chunk_ids = _chunk_ids(project)
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
    (
        ".jsonl",
        '{{"qid": "{qid}", "chunk_id": "{chunk}", "score": -Infinity}}',
        ":2: score must be a finite number, got -inf",
    ),
    (
        ".jsonl",
        '{{"qid": "{qid}", "chunk_id": "{chunk}", "score": null}}',
        ":2: expected a JSON object with qid, chunk_id and a numeric score",
    ),
    (
        ".jsonl",
        '{{"qid": "{qid}", "chunk_id": "{chunk}", "score": "high"}}',
        ":2: expected a JSON object with qid, chunk_id and a numeric score",
    ),
    (
        ".jsonl",
        '{{"qid": "{qid}", "chunk_id": "' + LONG + '", "score": 0.5}}',
        "1 chunk ids are not in the chunk table, e.g. 'AAAA",
    ),
    (
        ".jsonl",
        '{{"qid": "{qid}", "chunk_id": "\\u001b[2J\\nx", "score": 0.5}}',
        "chunk ids are not in the chunk table, e.g. '\\x1b[2J\\nx'",
    ),
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
    line = assert_refused_and_kept(piped, "retrieve", monkeypatch, capsys, "runs/engine.trec:2: score must be a number")
    assert "A" * 40 not in line and len(line) < 200, line


def _plugin(project, body):
    """A Python retriever module in the project root with `search(questions, depth)`; its name."""
    name = f"plugin_{uuid.uuid4().hex[:12]}"
    (project / f"{name}.py").write_text(
        "import sys\nimport math\nimport pandas as pd\n"
        f"CHUNKS = {_chunk_ids(project)!r}\n"
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
    (
        "return [('q0', CHUNKS[0], 1.0), ('q0', CHUNKS[1], float('nan'))]",
        "row 2: score must be a finite number, got nan",
    ),
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
    (
        "return pd.DataFrame({'query': ['q0'], 'doc': [CHUNKS[0]], 'score': [1.0]})",
        "returned a DataFrame without column qid, chunk_id",
    ),
    (
        "return pd.DataFrame({'qid': ['q0'], 'chunk_id': [CHUNKS[0]], 'score': [float('nan')]})",
        "row 1: score must be a finite number, got nan",
    ),
    ("raise ValueError('the index is down')", "raised ValueError: the index is down"),
    ("raise KeyError('q0')", "raised KeyError: 'q0'"),
    ("return [1 / 0]", "raised ZeroDivisionError: division by zero"),
    (
        "yield ('q0', CHUNKS[0], 1.0)\nraise RuntimeError('lost the connection')",
        "raised RuntimeError: lost the connection",
    ),
    ("sys.exit(0)", "called sys.exit(0) instead of returning a run"),
    ("sys.exit(3)", "called sys.exit(3) instead of returning a run"),
    ("sys.exit('bye')", "called sys.exit('bye') instead of returning a run"),
    ("raise SystemExit", "called sys.exit(None) instead of returning a run"),
    ("return []", "no question of the golden set is in the run"),
    ("return [('q0', CHUNKS[0], 10**400)]", "row 1: score must be a finite number, got 1000"),  # OverflowError
    ("return [('q0', 'no-such-chunk', 1.0)]", "1 chunk ids are not in the chunk table, e.g. 'no-such-chunk'"),
    ("return [('q0', CHUNKS[0], 1.0), ('q0', CHUNKS[0], 0.5)]", "question 'q0' lists chunk"),
]


@pytest.mark.parametrize("body,fragment", PLUGIN_CASES, ids=[body[:40] for body, _ in PLUGIN_CASES])
def test_a_python_retriever_that_misbehaves_is_refused_in_one_line(piped, body, fragment, monkeypatch, capsys):
    name = _plugin(piped, body)
    set_params(piped, **{"retrieval.method": "python", "retrieval.python": f"{name}:search"})
    assert_refused_and_kept(piped, "retrieve", monkeypatch, capsys, f"retrieval.python {name}:search: ", fragment)


@pytest.mark.parametrize(
    "module,fragment",
    [
        ("def search(questions, depth)\n    return []\n", "cannot import it (SyntaxError: "),
        ("raise ImportError('needs faiss')\n", "cannot import it (ImportError: needs faiss)"),
        ("import sys\nsys.exit(0)\n", "cannot import it (SystemExit"),
        ("x = 1\n", "cannot import it (AttributeError: "),
    ],
    ids=["syntax-error", "import-raises", "exit-on-import", "no-function"],
)
def test_a_python_retriever_that_cannot_be_imported_is_refused(piped, module, fragment, monkeypatch, capsys):
    name = f"plugin_{uuid.uuid4().hex[:12]}"
    (piped / f"{name}.py").write_text(module)
    set_params(piped, **{"retrieval.method": "python", "retrieval.python": f"{name}:search"})
    assert_refused_and_kept(piped, "retrieve", monkeypatch, capsys, f"retrieval.python {name}:search: {fragment}")


def test_a_python_retriever_may_return_a_dataframe(piped, monkeypatch, capsys):
    name = _plugin(
        piped,
        "return pd.DataFrame({'qid': [q['qid'] for q in questions], 'chunk_id': CHUNKS[:len(questions)], "
        "'score': [1.0] * len(questions)})",
    )
    set_params(piped, **{"retrieval.method": "python", "retrieval.python": f"{name}:search"})
    assert stage_in_process("retrieve", piped, monkeypatch, capsys).returncode == 0
    assert len(pd.read_parquet(piped / "data" / "panel" / "default" / "run.parquet")) == len(_chunk_ids(piped))


def _truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _rewrite_run(path, **columns):
    """data/panel/default/run.parquet with some columns replaced (None: dropped)."""
    run = pd.read_parquet(path)
    for name, value in columns.items():
        run = (
            run.drop(columns=[name])
            if value is None
            else run.assign(**{name: value(run) if callable(value) else value})
        )
    run.to_parquet(path, index=False)


def _nan_second(run):
    scores = run["score"].to_numpy(dtype=np.float64).copy()
    scores[1] = np.nan
    return scores


def _rewrite_vectors(path, make):
    np.save(path, make(np.load(path)), allow_pickle=True)


RUN = paths.run_of(paths.DEFAULT)
CHUNKS_TABLE = paths.CHUNKS
CORPUS_NPY = paths.CORPUS_VECTORS
BROKEN_FILES = [
    # (stage, file, how it is broken, fragment of the error line)
    ("score", RUN, lambda p: _truncate(p), "data/panel/default/run.parquet: not a readable Parquet table"),
    (
        "score",
        RUN,
        lambda p: p.write_bytes(b""),
        "data/panel/default/run.parquet: not a readable Parquet table (Parquet file size is 0 bytes)",
    ),
    (
        "score",
        RUN,
        lambda p: p.write_text("qid,chunk_id\nq1,a\n"),
        "data/panel/default/run.parquet: not a readable Parquet table",
    ),
    ("score", RUN, lambda p: _rewrite_run(p, score=None), "data/panel/default/run.parquet: no column 'score'"),
    (
        "score",
        RUN,
        lambda p: _rewrite_run(p, score=lambda r: r["score"].astype(str)),
        "data/panel/default/run.parquet: column 'score' must hold numbers, got str",
    ),
    (
        "score",
        RUN,
        lambda p: _rewrite_run(p, score=_nan_second),
        "data/panel/default/run.parquet: row 2 (question 'q0', chunk ",
    ),
    (
        "score",
        RUN,
        lambda p: _rewrite_run(p, score=lambda r: np.full(len(r), np.inf)),
        "every score must be a finite number",
    ),
    (
        "score",
        RUN,
        lambda p: _rewrite_run(p, score=lambda r: [None] * len(r)),
        "data/panel/default/run.parquet: column 'score' must hold numbers, got object",
    ),
    (
        "score",
        RUN,
        lambda p: _rewrite_run(p, rank=lambda r: r["rank"] + 0.5),
        "data/panel/default/run.parquet: column 'rank' must hold integers",
    ),
    ("judge", RUN, lambda p: _truncate(p), "data/panel/default/run.parquet: not a readable Parquet table"),
    ("judge", RUN, lambda p: p.write_bytes(b""), "data/panel/default/run.parquet: not a readable Parquet table"),
    (
        "judge",
        RUN,
        lambda p: _rewrite_run(p, chunk_id=None),
        "judge.pool data/panel/default/run.parquet: no column 'chunk_id'",
    ),
    (
        "judge",
        RUN,
        lambda p: _rewrite_run(p, score=_nan_second),
        "judge.pool data/panel/default/run.parquet: row 2 (question 'q0', chunk ",
    ),
    ("score", CHUNKS_TABLE, lambda p: _truncate(p), f"{CHUNKS_TABLE}: not a readable Parquet table"),
    ("retrieve", CHUNKS_TABLE, lambda p: _truncate(p), f"{CHUNKS_TABLE}: not a readable Parquet table"),
    (
        "retrieve",
        CHUNKS_TABLE,
        lambda p: p.write_bytes(b""),
        f"{CHUNKS_TABLE}: not a readable Parquet table",
    ),
    ("judge", CHUNKS_TABLE, lambda p: _truncate(p, 0.9), f"{CHUNKS_TABLE}: not a readable Parquet table"),
    (
        "embed_corpus",
        CHUNKS_TABLE,
        lambda p: _truncate(p),
        f"{CHUNKS_TABLE}: not a readable Parquet table",
    ),
    (
        "score",
        CHUNKS_TABLE,
        lambda p: pd.read_parquet(p).drop(columns=["doc_id"]).to_parquet(p),
        f"{CHUNKS_TABLE}: no column 'doc_id'",
    ),
    (
        "score",
        paths.DUPLICATES,
        lambda p: _truncate(p),
        f"{paths.DUPLICATES}: not a readable Parquet table",
    ),
    (
        "generate_goldenset",
        paths.DOCUMENTS,
        lambda p: _truncate(p),
        f"{paths.DOCUMENTS}: not a readable Parquet table",
    ),
    ("retrieve", CORPUS_NPY, lambda p: _truncate(p, 0.9), f"{CORPUS_NPY}: not a readable .npy array"),
    ("retrieve", CORPUS_NPY, lambda p: _truncate(p, 0.3), f"{CORPUS_NPY}: not a readable .npy array"),
    ("retrieve", CORPUS_NPY, lambda p: p.write_bytes(b""), f"{CORPUS_NPY}: not a readable .npy array"),
    (
        "retrieve",
        paths.QUESTION_VECTORS,
        lambda p: _truncate(p, 0.9),
        f"{paths.QUESTION_VECTORS}: not a readable .npy array",
    ),
    (
        "retrieve",
        paths.QUESTION_VECTORS,
        lambda p: _truncate(p, 0.05),
        f"{paths.QUESTION_VECTORS}: not a readable .npy array",
    ),
    (
        "retrieve",
        CORPUS_NPY,
        lambda p: _rewrite_vectors(p, lambda v: v.ravel()),
        f"{CORPUS_NPY}: expected a 2-d float array, got shape",
    ),
    (
        "retrieve",
        CORPUS_NPY,
        lambda p: _rewrite_vectors(p, lambda v: v[:-1]),
        f"{CORPUS_NPY}: a float32 array of shape (2, 8), expected float vectors of shape (3, dimension)",
    ),
    (
        "retrieve",
        CORPUS_NPY,
        lambda p: _rewrite_vectors(p, lambda v: v.astype(object)),
        f"{CORPUS_NPY}: not a readable .npy array",
    ),
    ("retrieve", paths.CORPUS_IDS, lambda p: p.write_text('["a", '), f"{paths.CORPUS_IDS}: unreadable ("),
]


@pytest.mark.parametrize(
    "name,file,breaker,fragment",
    BROKEN_FILES,
    ids=[f"{s}-{f.split('/')[-1]}-{i}" for i, (s, f, _, _) in enumerate(BROKEN_FILES)],
)
def test_a_broken_table_or_array_is_one_line(piped, name, file, breaker, fragment, monkeypatch, capsys):
    """Truncated, empty or foreign tables and arrays the pipeline wrote (a killed copy, a full
    disk, a hand edit): one line naming the file, not a pyarrow/numpy traceback."""
    set_params(piped, **{"judge.enabled": True, "judge.provider": "anthropic"} if name == "judge" else {})
    breaker(piped / file)
    assert_refused_and_kept(piped, name, monkeypatch, capsys, fragment)


@pytest.mark.parametrize(
    "row,fragment",
    [
        ({"qid": "q0", "chunk_id": LONG, "grade": 1}, "data/judged_pool.jsonl:1: chunk 'AAAA"),
        (
            {"qid": "q0", "chunk_id": "wal", "grade": LONG},
            "data/judged_pool.jsonl:1: grade must be an integer 0-3 or null, got 'AAAA",
        ),
    ],
)
def test_the_judged_pool_is_quoted_not_echoed(piped, row, fragment, monkeypatch, capsys):
    (piped / "data" / "judged_pool.jsonl").write_text(json.dumps(row) + "\n")
    assert LONG[:50] not in assert_refused_and_kept(piped, "score", monkeypatch, capsys, fragment)


def test_a_judge_pool_run_file_is_checked_like_a_run_file(piped, monkeypatch, capsys):
    (piped / "runs").mkdir()
    (piped / "runs" / "other.trec").write_text(_run_file_lines(piped, ".trec", "{qid} Q0 {chunk} 2 NaN tag"))
    set_params(
        piped,
        **{
            "judge.enabled": True,
            "judge.provider": "anthropic",
            "judge.pool": ["data/panel/default/run.parquet", "runs/other.trec"],
        },
    )
    assert_refused_and_kept(
        piped, "judge", monkeypatch, capsys, "runs/other.trec:2: score must be a finite number, got nan"
    )


def test_a_nan_vector_is_refused_before_the_run_is_written(piped, monkeypatch, capsys):
    """A NaN vector would give NaN scores: retrieve refuses it before any method runs or writes."""
    _rewrite_vectors(
        piped / paths.QUESTION_VECTORS,
        lambda v: np.where(np.arange(v.shape[0])[:, None] == 0, np.nan, v).astype(np.float32),
    )
    assert_refused_and_kept(
        piped, "retrieve", monkeypatch, capsys, f"{paths.QUESTION_VECTORS}: the vector of 'q0' (row 0) is not finite"
    )


CHUNK_FILES = [
    ("chunks.jsonl", b"", "data/chunks.jsonl: no chunks"),
    ("chunks.jsonl", b"\n\n  \n", "data/chunks.jsonl: no chunks"),
    (
        "chunks.jsonl",
        b'{"id": "1", "text": "fine"}\n{"id": "2", "text": "bad \\ud800 half"}\n',
        "data/chunks.jsonl: record 2: 'text' holds a lone surrogate '\\ud800' at character 4",
    ),
    (
        "chunks.jsonl",
        b'{"id": "\\udc00x", "text": "fine"}\n',
        "data/chunks.jsonl: record 1: 'id' holds a lone surrogate '\\udc00' at character 0",
    ),
    (
        "chunks.jsonl",
        b'{"id": "1", "text": "fine", "doc_id": "\\ud800"}\n',
        "data/chunks.jsonl: chunk 1: 'doc_id' holds a lone surrogate",
    ),
    ("chunks.parquet", b"", "data/chunks.parquet: cannot read parquet"),
    ("chunks.parquet", b"PAR1 not really", "data/chunks.parquet: cannot read parquet"),
]


@pytest.mark.parametrize(
    "name,content,fragment", CHUNK_FILES, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(CHUNK_FILES)]
)
def test_a_broken_chunk_file_is_one_line(piped, name, content, fragment, monkeypatch, capsys):
    (piped / "data" / name).write_bytes(content)
    set_params(piped, **{"load.source": f"data/{name}"})
    assert_refused_and_kept(piped, "load_chunks", monkeypatch, capsys, fragment)


def test_a_lone_surrogate_in_a_beir_corpus_is_one_line(piped, monkeypatch, capsys):
    beir = piped / "data" / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_bytes(b'{"_id": "d1", "title": "\\ud83d", "text": "text"}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "what"}\n')
    (beir / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    set_params(piped, **{"load.source": "data/beir"})
    assert_refused_and_kept(
        piped, "load_chunks", monkeypatch, capsys, "data/beir/corpus.jsonl: record 1: 'title' holds a lone surrogate"
    )


@pytest.mark.parametrize(
    "target",
    ["../outside.trec", "/tmp/retrieval-bench-outside.trec", "data/../../outside.trec", "escape/run.trec", "."],
    ids=["parent", "absolute", "dotdot", "symlink", "root"],
)
def test_a_trec_export_outside_the_project_is_refused(piped, target, monkeypatch, capsys):
    (piped / "escape").symlink_to(piped.parent)
    set_params(piped, **{"retrieval.trec_export": target})
    assert_refused_and_kept(
        piped, "retrieve", monkeypatch, capsys, f"params.yaml: retrieval.trec_export {target!r} is outside the project"
    )
    assert not (piped.parent / "outside.trec").exists() and not (piped.parent / "run.trec").exists()


def test_a_trec_export_named_jsonl_is_refused(piped, monkeypatch, capsys):
    """retrieval.run_file reads a .jsonl file as JSON: a TREC run written under that name would not read back."""
    set_params(piped, **{"retrieval.trec_export": "data/run.jsonl"})
    assert_refused_and_kept(
        piped,
        "retrieve",
        monkeypatch,
        capsys,
        "retrieval.trec_export 'data/run.jsonl' is a TREC run (text lines), not JSONL",
    )


def test_a_trec_export_of_chunk_ids_with_whitespace_is_refused_before_anything_is_written(piped, monkeypatch, capsys):
    """trec_eval splits lines on blanks: the id 'full text' was written as is, and the project's
    own run-file reader then refused the export (7 fields)."""
    set_params(piped, **{"retrieval.trec_export": "data/run.trec"})
    assert_refused_and_kept(
        piped,
        "retrieve",
        monkeypatch,
        capsys,
        "retrieval.trec_export data/run.trec: chunk_id 'full text' holds whitespace, which a TREC run",
    )
    assert not (piped / "data" / "run.trec").exists()


@pytest.mark.parametrize("field,value", [("chunk_id", "tab\there"), ("qid", "q 0"), ("qid", "q\u00a00")])
def test_ids_with_whitespace_are_refused_by_the_trec_writer(tmp_path, field, value):
    from retrieval_bench.core.errors import InputError
    from retrieval_bench.core.run_table import write_trec

    run = pd.DataFrame({"qid": ["q0"], "chunk_id": ["c0"], "rank": [1], "score": [1.0]}).assign(**{field: [value]})
    with pytest.raises(InputError, match=f"{field} {re.escape(repr(value))} holds whitespace"):
        write_trec(run, tmp_path / "run.trec", "dense")
    assert not (tmp_path / "run.trec").exists()


def test_the_trec_export_reads_back_as_the_same_run(piped, monkeypatch, capsys):
    name = _plugin(
        piped, "return [(q['qid'], c, 1.0 / (i + 1)) for q in questions for i, c in enumerate(CHUNKS) if ' ' not in c]"
    )
    set_params(
        piped,
        **{
            "retrieval.method": "python",
            "retrieval.python": f"{name}:search",
            "retrieval.trec_export": "data/run.trec",
        },
    )
    assert stage_in_process("retrieve", piped, monkeypatch, capsys).returncode == 0
    from retrieval_bench.core.run_table import read_run_file

    run = pd.read_parquet(piped / "data" / "panel" / "default" / "run.parquet")
    pd.testing.assert_frame_equal(read_run_file(piped / "data" / "run.trec"), run)
