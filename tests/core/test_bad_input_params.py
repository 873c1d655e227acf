"""Bad params.yaml, as a careless user or an attacker writes it: each is one line naming the file
and line or the key the user wrote, an InputError (exit status 1 from a stage), no traceback, no
hang, and check_params' last good outputs left as they were, under `dvc repro` too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ONLY_DEFAULT, copy_project, dvc, set_params, tool_env

import retrieval_bench
from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.params_sections import MAX_NESTING, MAX_PARAMS_BYTES, MAX_VALUES

ROOT = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
CHECK_PARAMS_OUTPUTS = [
    paths.PARAMS_CHECKED,
    paths.SOURCE_STAMP,
    paths.STORE_STAMP,
    paths.STORED_VECTORS_STAMP,
    paths.STYLE_EXAMPLES_STAMP,
    paths.settings_of("default"),
]


def dumped(**changes: object) -> str:
    """The bundled params with dotted keys set (e.g. **{"score.k": [1]}), as YAML."""
    params = yaml.safe_load(yaml.safe_dump(BASE))
    del params["embedded"]  # derived from the panel where left out (params_panel.check_embedded)
    for dotted, value in changes.items():
        node = params
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[key]
        node[last] = value
    return yaml.safe_dump(params, sort_keys=False, allow_unicode=True)


def line_of(text: str, line: str) -> int:
    return text.splitlines().index(line) + 1


def with_line_after(text: str, anchor: str, added: str) -> str:
    lines = text.splitlines()
    lines.insert(lines.index(anchor) + 1, added)
    return "\n".join(lines) + "\n"


def nested(levels: int) -> str:
    """retrieval.store.filter nested `levels` lists deep."""
    return dumped(**{"retrieval.store.filter": "NESTED"}).replace("NESTED", "[" * levels + "]" * levels)


def alias_bomb() -> str:
    """Billion laughs: ten levels of ten aliases, 10^10 values once expanded."""
    rows = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    rows += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "\n".join(rows) + "\n" + dumped(**{"retrieval.store.filter": "BOMB"}).replace("BOMB", "*l9")


# What every panel system must name besides its retrieval keys (the single system's chunking and embedder).
DEFAULTS_NAMED = {"chunking": paths.DEFAULT, "embedder": paths.DEFAULT}


def panel(name: object, **system: object) -> str:
    return dumped(panel={"default": DEFAULTS_NAMED, name: {**DEFAULTS_NAMED, **(system or {"method": "bm25"})}})


SCORE_TWICE = dumped() + "score:\n  k: [1]\n"
SCORE_AGAIN = len(dumped().splitlines()) + 1
NOT_UTF8 = b"# params\nload:\n  source: data/\xff\n"
MAX_K = max(BASE["score"]["k"])
TIES_TWICE = with_line_after(dumped(), "  ties: expected", "  ties: optimistic")
NAME_RULE = "must be 1-64 ASCII letters, digits, - and _, starting with a letter or digit"
DVC_IGNORES = "which DVC leaves out of its run-cache key (treeverse/dvc#10296)"
DEPTH_RULE = "must be a positive int (chunks per question) or 'all'"

CASES = [
    # item 3: a key written twice is refused with both lines, not the last one kept
    pytest.param(
        SCORE_TWICE,
        [f"params.yaml line {SCORE_AGAIN}: key 'score' appears twice (first at line {line_of(SCORE_TWICE, 'score:')})"],
        id="section-twice",
    ),
    pytest.param(
        TIES_TWICE,
        [f"line {line_of(TIES_TWICE, '  ties: optimistic')}: key 'ties' appears twice"],
        id="nested-key-twice",
    ),
    pytest.param(
        dumped(panel={}).replace("panel: {}", "panel:\n  x: {method: bm25, method: dense}"),
        ["key 'method' appears twice"],
        id="flow-key-twice",
    ),
    # item 6: what the YAML reader met raises no traceback and names the file and line
    pytest.param(
        NOT_UTF8,
        [f"params.yaml line 3: not UTF-8 text (byte {NOT_UTF8.index(0xFF)}: 0xff)"],
        id="not-utf-8",
    ),
    pytest.param("", ["params.yaml: empty; expected a mapping of sections load, "], id="empty"),
    pytest.param("# only comments\n", ["params.yaml: empty"], id="comments-only"),
    pytest.param("- load\n- score\n", ["expected a mapping of sections", "got a list at the top level"], id="list"),
    pytest.param("score\n", ["got 'score' at the top level"], id="scalar"),
    pytest.param("load: [unclosed\n", ["params.yaml: invalid YAML at line 2, column 1"], id="unclosed-flow"),
    pytest.param("load:\n\tsource: data\n", ["at line 2, column 1", "YAML indents with spaces, not tabs"], id="tab"),
    pytest.param("load: x\0y\n", ["at line 1: character '\\x00' is not allowed"], id="nul"),
    pytest.param("load: *nowhere\n", ["invalid YAML at line 1", "undefined alias"], id="undefined-alias"),
    pytest.param("? [a, b]\n: 1\n", ["invalid YAML at line 1", "unhashable key"], id="list-as-key"),
    pytest.param(nested(10_000), ["params.yaml: invalid YAML"], id="10000-levels"),
    pytest.param(nested(MAX_NESTING + 8), [f"is nested over {MAX_NESTING} levels deep"], id="40-levels"),
    pytest.param(alias_bomb(), [f"over {MAX_VALUES:,} keys and values"], id="billion-laughs"),
    pytest.param("a: &a [*a]\n", [f"is nested over {MAX_NESTING} levels deep"], id="recursive-alias"),
    pytest.param(dumped() + "#" * MAX_PARAMS_BYTES, [f"over {MAX_PARAMS_BYTES >> 20} MiB"], id="huge"),
    # item 8: panel names DVC or the file system would choke on, and keys DVC's run cache ignores
    pytest.param(panel("a/b"), ["panel name 'a/b' is not usable", NAME_RULE], id="name-slash"),
    *[  # refused at retrieve before, and ':fn' made check_params stamp the whole project folder
        pytest.param(
            panel("plug", method="python", python=target),
            ["panel.plug.python must be 'module:function', a module importable from the project root", repr(target)],
            id=f"python-target-{number}",
        )
        for number, target in enumerate([":fn", "no_colon", ".rel:fn", "runs/plug.py:fn", "runs.plug:"])
    ],
    pytest.param(panel("../x"), ["panel name '../x' is not usable"], id="name-dotdot"),
    pytest.param(panel("é"), ["panel name 'é' is not usable"], id="name-non-ascii"),
    pytest.param(panel("a@b"), ["panel name 'a@b' is not usable", "panel.NAME"], id="name-at"),
    pytest.param(panel("a.b"), ["panel name 'a.b' is not usable"], id="name-dot"),
    pytest.param(panel("x" * 300), ["panel name 'xxxx", NAME_RULE], id="name-300-chars"),
    pytest.param(panel(7), ["panel name 7 is not usable"], id="name-int"),
    pytest.param(panel("size"), [f"panel.size is named 'size', {DVC_IGNORES}"], id="name-size"),
    pytest.param(
        dumped(**{"retrieval.store.search": {"nfiles": 3}}),
        [f"retrieval.store.search.nfiles is named 'nfiles', {DVC_IGNORES}"],
        id="nfiles-in-search",
    ),
    pytest.param(
        panel("s1", method="store", store={"search": {"size": 3}}),
        [f"panel.s1.store.search.size is named 'size', {DVC_IGNORES}"],
        id="size-in-panel-search",
    ),
    # items 7 and 9: every error names the key the user wrote, and echoes their value unchanged
    pytest.param(dumped(**{"retrieval.depth": -1}), [f"retrieval.depth {DEPTH_RULE}, got -1"], id="depth-negative"),
    pytest.param(dumped(**{"retrieval.depth": "ten"}), [f"retrieval.depth {DEPTH_RULE}"], id="depth-word"),
    pytest.param(panel("x", depth=0), [f"panel.x.depth {DEPTH_RULE}, got 0"], id="panel-depth-0"),
    pytest.param(
        panel("x", depth=MAX_K - 1),
        [f"score.k {MAX_K} is beyond panel.x.depth {MAX_K - 1}", "raise panel.x.depth"],
        id="panel-depth-below-k",
    ),
    pytest.param(
        panel("x", trec_export="runs/my.retrieval.jsonl"),
        ["panel.x.trec_export 'runs/my.retrieval.jsonl' is a TREC run"],
        id="panel-trec-export-value-kept",
    ),
    pytest.param(
        dumped(**{"judge.base_url": "ftp://generate.example/v1"}),
        ["judge.base_url must be an http(s) URL or null; it must start with http:// or https://: got 'ftp://"],
        id="judge-base-url-value-kept",
    ),
    *[
        pytest.param(
            dumped(**{"generate.base_url": url}),
            [f"generate.base_url must be an http(s) URL or null; it {problem}: got {url!r}"],
            id=f"base-url-{name}",
        )
        for name, url, problem in [  # each passed the check, then failed as a connection error after retries
            ("port", "http://127.0.0.1:99999/v1", "has a port that is not a number from 1 to 65535"),
            ("no-host", "http:///v1", "names no host"),
            ("port-only", "http://:8000/v1", "names no host"),
            ("space", " http://127.0.0.1:8000/v1", "has spaces or a line break at its start or end"),
            ("ipv6-unclosed", "http://[::1/v1", "is not a URL (Invalid IPv6 URL)"),  # urlsplit raised: a traceback
        ]
    ],
    pytest.param(
        dumped(**{"judge.price": {"input_per_mtok": -1, "output_per_mtok": 1}}),
        ["judge.price needs prices >= 0"],
        id="judge-price",
    ),
    pytest.param(
        panel("x", method="run-file"), ["panel.x.method run-file needs panel.x.run_file"], id="panel-run-file"
    ),
    pytest.param(
        panel("x", method="rerank"), ["panel.x.method rerank needs panel.x.rerank.model"], id="panel-rerank-model"
    ),
    pytest.param(
        panel("x", ann={"nlist": 4, "nprobe": 8}),
        ["panel.x.ann.nprobe (8) cannot exceed panel.x.ann.nlist (4)"],
        id="panel-nprobe",
    ),
    pytest.param(panel("x", bm25={"stemmer": "porter"}), ["panel.x.bm25.stemmer must be one of"], id="panel-stemmer"),
    pytest.param(panel("x", rrf_k=-1), ["panel.x.rrf_k must be from 0 to 1,000,000, got -1"], id="panel-rrf-k"),
    # accepted, then an OverflowError in retrieve (10**23), or every fused score one float (10**16)
    pytest.param(panel("x", rrf_k=10**16), ["panel.x.rrf_k must be from 0 to 1,000,000"], id="panel-rrf-k-huge"),
    pytest.param(
        dumped(**{"retrieval.device": "gpu"}),
        ["retrieval.device must be cpu, cuda, cuda:N or auto, got 'gpu'"],
        id="retrieval-device",
    ),
    pytest.param(panel("x", device="cuda:x"), ["panel.x.device must be cpu, cuda, cuda:N or auto"], id="panel-device"),
    # neighbours: the validity section
    pytest.param(
        dumped(**{"validity.threshold": 0.8}),
        ["unknown key params.validity.threshold: it is gone; the certificate decides"],
        id="threshold-retired",
    ),
    pytest.param(
        dumped(**{"validity.fail_below": True}),
        ["unknown key params.validity.fail_below: it is gone; use validity.fail_on: disagrees"],
        id="fail-below-retired",
    ),
    pytest.param(
        dumped(**{"validity.fail_on": "yes"}),
        ["validity.fail_on must be one of disagrees, none, not-agrees"],
        id="fail-on-word",
    ),
    pytest.param(dumped(**{"validity.extra": 1}), ["unknown key params.validity.extra"], id="validity-unknown-key"),
    # issue 41: a number in exponent form is the number DVC reads, held to the key's documented bounds
    pytest.param(
        dumped(**{"generate.timeout_s": "SECONDS"}).replace("timeout_s: SECONDS", "timeout_s: 1e-9"),
        ["generate.timeout_s must be seconds per request, from 0.1 to 3600, got 1e-09"],
        id="timeout-exponent-below-minimum",
    ),
    pytest.param(
        dumped(**{"judge.timeout_s": 0.01}),
        ["judge.timeout_s must be seconds per request, from 0.1"],
        id="timeout-tiny",
    ),
    pytest.param(
        dumped(**{"embed.batch_size": "BATCH"}).replace("batch_size: BATCH", "batch_size: 1e3"),
        ["params.embed.batch_size must be int, got 1000.0"],
        id="int-in-exponent-form",
    ),
    # issue 41: panel null passed the check, and DVC's foreach over it then failed with a TypeError
    pytest.param(dumped(panel=None), ["panel must be a mapping of system names", "got null"], id="panel-null"),
    # issue 41: two (chunking, embedder) pairs DVC names alike: it kept one embed_corpus stage of the two
    pytest.param(
        dumped(
            chunkings={"default": {}, "a-b": {}, "a": {}},
            embedders={"default": {}, "c": {}, "b-c": {}},
            panel={
                "default": DEFAULTS_NAMED,
                "x": {**DEFAULTS_NAMED, "chunking": "a-b", "embedder": "c"},
                "y": {**DEFAULTS_NAMED, "chunking": "a", "embedder": "b-c"},
            },
        ),
        ["panel.x (chunking a-b, embedder c) and panel.y (chunking a, embedder b-c)", "embed_corpus@a-b-c"],
        id="embed-corpus-stage-twice",
    ),
    pytest.param(
        dumped(embedders={"default": {}, "e5": {"model": " "}}, panel={"default": DEFAULTS_NAMED}),
        ["embedders.e5.model must be a sentence-transformers model id or local path, got ' '"],
        id="embedder-model-blank",
    ),
    # a later review: tracebacks (a list where a name goes, a seed numpy refuses), silently wrong results
    # (the working folder read as the corpus, weights ranking the worst match first), a hang
    pytest.param(
        dumped(panel={"default": {"chunking": ["default"], "embedder": "default"}}),
        ["panel.default.chunking ['default'] is not one of chunkings"],
        id="panel-chunking-list",
    ),
    pytest.param(
        dumped(**{"validity.candidates": [["default", ["bm25"]]]}),
        ["validity.candidates must be pairs of two different panel systems"],
        id="candidate-not-a-name",
    ),
    pytest.param(
        dumped(**{"generate.seed": -1}), ["generate.seed must be between 0 and 4294967295"], id="seed-negative"
    ),
    pytest.param(dumped(**{"load.source": ""}), ["load.source is empty: name a folder"], id="source-empty"),
    pytest.param(dumped(**{"generate.handwritten": " "}), ["generate.handwritten is empty"], id="handwritten-empty"),
    pytest.param(
        dumped(**{"generate.style_examples": ""}), ["generate.style_examples must be a file"], id="style-empty"
    ),
    pytest.param(
        dumped(**{"retrieval.weights": {"dense": -1, "bm25": 1}}),
        ["retrieval.weights must be finite numbers >= 0 with a finite sum, not both 0"],
        id="weight-negative",
    ),
    pytest.param(
        panel("h", method="hybrid", fusion="weighted", weights={"dense": 0, "bm25": 0}),
        ["panel.h.weights must be finite numbers >= 0 with a finite sum, not both 0"],
        id="weights-both-zero",
    ),
    # each finite, their sum not: the best chunks' fused scores were inf, and the run dropped them
    pytest.param(
        dumped(**{"retrieval.weights": {"dense": 1e308, "bm25": 1e308}}),
        ["retrieval.weights must be finite numbers >= 0 with a finite sum"],
        id="weights-sum-overflows",
    ),
    # no upper bound: a finished batch was polled a billion seconds later (a hang)
    pytest.param(
        dumped(**{"generate.batch_poll_seconds": 10**9}),
        ["generate.batch_poll_seconds must be seconds, more than 0 and at most 3600, got 1000000000"],
        id="batch-poll-huge",
    ),
    pytest.param(
        dumped(**{"judge.batch_poll_seconds": 0}),
        ["judge.batch_poll_seconds must be seconds, more than 0"],
        id="poll-0",
    ),
    # an OverflowError in score (int64)
    pytest.param(
        dumped(**{"score.budgets": [2000, 10**23]}),
        ["score.budgets must be a list of distinct positive integers up to 1,000,000,000,000 or []"],
        id="budget-huge",
    ),
    # a bar the MinHash search cannot serve: most near-duplicates missed without a word
    pytest.param(
        dumped(**{"load.duplicates.min_jaccard": 0.05}),
        ["load.duplicates.min_jaccard must be at least 0.103 (below it the MinHash search"],
        id="min-jaccard-below-the-search",
    ),
    pytest.param(dumped(**{"costs.rounds": 10**9}), ["costs.rounds must be between 1 and 1000"], id="rounds-huge"),
    pytest.param(
        dumped(**{"judge.concurrency": 10**9}), ["judge.concurrency must be between 1 and 1024"], id="llm-bound"
    ),
    pytest.param(
        panel("r", method="rerank", rerank={"model": "m", "candidates": 5}),
        [f"score.k {MAX_K} is beyond panel.r.rerank.candidates 5"],
        id="rerank-candidates-below-k",
    ),
    # a sweep of 314 mutations (2026-12-06): tracebacks, and a value written into the run's JSON that JSON lacks
    pytest.param(
        dumped(**{"score.min_coverage": 2**1024 - 1}),  # just beyond a float
        ["invalid YAML at line", "an integer of 309 digits is no setting's value"],
        id="int-beyond-float",  # OverflowError
    ),
    pytest.param(
        dumped(**{"generate.kinds": {"single": 10**308, "multi": 10**308}}),  # floats, but fsum overflows
        ["generate.kinds.single must be a share between 0 and 1"],
        id="kind-share-beyond-float",  # OverflowError in fsum
    ),
    pytest.param(
        dumped(**{"retrieval.depth": "DEPTH"}).replace("DEPTH", "9" * 5000),
        ["invalid YAML", "an integer of 5000 digits is no setting's value"],
        id="int-of-5000-digits",  # ValueError: Exceeds the limit (4300 digits)
    ),
    pytest.param(
        dumped(**{"score.min_coverage": "COVERAGE"}).replace("COVERAGE", "0x" + "f" * 4000),
        ["invalid YAML", "an integer of 4002 digits is no setting's value"],
        id="hex-of-4000-digits",  # parsed, then ValueError printing it in the error message
    ),
    pytest.param(
        dumped(**{"score.min_coverage": 10**400}),
        ["invalid YAML at line", "an integer of 401 digits is no setting's value"],
        id="int-beyond-1024-bits",
    ),
    pytest.param(
        dumped(**{"retrieval.store.filter": "FILTER"}).replace("FILTER", "{published: 2024-01-01}"),
        ["retrieval.store.filter holds datetime.date(2024, 1, 1), a date", "quote it"],
        id="store-filter-date",  # TypeError writing the run's settings as JSON
    ),
    pytest.param(
        dumped(**{"retrieval.store.search": "SEARCH"}).replace("SEARCH", "!!set {a, b}"),
        ["retrieval.store.search holds {", "a set"],
        id="store-search-set",
    ),
]


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


@pytest.mark.parametrize(("content", "fragments"), CASES)
def test_a_bad_params_file_is_one_line_naming_the_line_or_key(tmp_path, content, fragments):
    with pytest.raises(InputError) as error:
        load_all_params(write(tmp_path / "params.yaml", content))
    message = str(error.value)
    assert "\n" not in message and len(message) < 400, message
    for fragment in fragments:
        assert fragment in message


def test_the_api_reads_params_as_the_stages_do(tmp_path):
    """rb.load_params kept the last of two score sections, raised IsADirectoryError for a folder
    and TypeError for a mapping."""
    with pytest.raises(InputError, match="key 'score' appears twice"):
        retrieval_bench.load_params(write(tmp_path / "params.yaml", SCORE_TWICE))
    with pytest.raises(InputError, match="a folder"):
        retrieval_bench.load_params(tmp_path)
    with pytest.raises(InputError, match="path must be the path of a params.yaml, got "):
        retrieval_bench.load_params({"score": {}})


def test_depth_all_is_valid_for_every_panel_system(tmp_path):
    """retrieval.depth all, documented as valid, failed as 'params.panel.dense.depth must be int'."""
    params = load_all_params(write(tmp_path / "params.yaml", dumped(**{"retrieval.depth": "all"})))
    assert params["retrieval"]["depth"] == "all"
    assert params["panel"] and all(system["depth"] == "all" for system in params["panel"].values())


def test_the_longest_usable_panel_name_is_accepted(tmp_path):
    name = "A" + "b_-9" * 15 + "xyz"
    assert len(name) == 64
    assert list(load_all_params(write(tmp_path / "params.yaml", panel(name)))["panel"]) == ["default", name]


def check_params(cwd: Path) -> subprocess.CompletedProcess:
    """`python -m stages.check_params`; a hang (reading a FIFO) fails the test instead of the suite."""
    command = [sys.executable, "-m", "stages.check_params"]
    return subprocess.run(command, cwd=cwd, env=tool_env(), capture_output=True, text=True, timeout=300)


def outputs(cwd: Path) -> dict[str, bytes]:
    return {name: (cwd / name).read_bytes() for name in CHECK_PARAMS_OUTPUTS}


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        pytest.param(SCORE_TWICE, "appears twice", id="section-twice"),
        pytest.param(b"load:\n  source: \xfe\n", "params.yaml line 2: not UTF-8 text", id="not-utf-8"),
        pytest.param(nested(10_000), "params.yaml: invalid YAML", id="10000-levels"),
        pytest.param(panel("a/b"), "panel name 'a/b' is not usable", id="name-slash"),
        pytest.param(None, "params.yaml: a FIFO (named pipe); expected the params file (YAML)", id="fifo"),
    ],
)
def test_check_params_refuses_in_one_line_and_keeps_its_last_outputs(workdir, content, fragment):
    assert check_params(workdir).returncode == 0
    before = outputs(workdir)
    params = workdir / "params.yaml"
    if content is None:  # a FIFO nobody writes to: reading it would wait for ever
        params.unlink()
        os.mkfifo(params)
    else:
        write(params, content)
    result = check_params(workdir)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert outputs(workdir) == before


def test_a_failed_check_under_dvc_keeps_the_last_good_outputs(tmp_path):
    """DVC deletes a stage's outputs before running it: without persist, a failing check_params
    took data/params_checked.txt, the stamps and the panel's settings with it."""
    project = copy_project(tmp_path / "project")
    dvc("repro", "check_params", cwd=project)
    before = outputs(project)
    for bad in (
        {"panel": {"a/b": {**DEFAULTS_NAMED, "method": "bm25"}}},
        {"panel": {"../x": DEFAULTS_NAMED}},
        {"retrieval.depth": -1},
    ):
        set_params(project, **bad)
        result = dvc("repro", "check_params", cwd=project, check=False)
        assert result.returncode != 0
        said = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error: ")]
        assert len(said) == 1 and "params.yaml: " in said[0], result.stdout + result.stderr
        assert "Traceback" not in result.stdout + result.stderr
        assert outputs(project) == before
        set_params(project, panel=ONLY_DEFAULT, **{"retrieval.depth": BASE["retrieval"]["depth"]})  # good again
    set_params(project, panel={**ONLY_DEFAULT, "bm25": {**DEFAULTS_NAMED, "method": "bm25"}})
    dvc("repro", "check_params", cwd=project)
    assert sorted(path.stem for path in (project / paths.PANEL_SETTINGS).glob("*.json")) == ["bm25", "default"]
    assert dvc("status", "check_params", "--json", cwd=project).stdout.strip() == "{}"  # not always_changed


def test_params_are_read_as_yaml_1_2_as_dvc_reads_them(tmp_path):
    """yes/no/on/off are words, not booleans (PyYAML's YAML 1.1 read a system named `on` as True,
    "panel name True is not usable", where DVC reads the name "on")."""
    text = dumped(panel={"default": DEFAULTS_NAMED, "on": {**DEFAULTS_NAMED, "method": "bm25"}}).replace("'on':", "on:")
    assert "\non:" in text or "  on:" in text
    assert list(load_all_params(write(tmp_path / "params.yaml", text))["panel"]) == ["default", "on"]
    with pytest.raises(InputError, match="generate.drop_echo"):
        load_all_params(write(tmp_path / "params.yaml", dumped().replace("drop_echo: false", "drop_echo: yes")))


def test_every_scalar_reads_as_dvc_reads_it(tmp_path):
    """DVC's own YAML reader is the oracle: `overlap: 0100` was 64 here (YAML 1.1's octal) and 100 to
    DVC, `1:30` 90 here (base 60) and text to DVC, `0o10` text here and 8 to DVC."""
    import math

    from dvc.utils.serialize import parse_yaml

    from retrieval_bench.core.params_sections import read_yaml_file

    written = ["0100", "012", "-012", "08", "1:30", "1:30.5", "0o10", "0x1F", "0b11", "1_000", "+5", "-0", "0"]
    written += ["1e3", "1E-9", "3.0e+2", "1.5", "1.", ".5", "1_0.5", ".inf", "-.inf", "+.inf", ".nan"]
    written += ["yes", "no", "on", "off", "True", "TRUE", "false", "~", "null", "0x", "1__0", "12abc"]
    text = "".join(f"k{i}: {value}\n" for i, value in enumerate(written))
    ours, dvcs = read_yaml_file(write(tmp_path / "scalars.yaml", text)), parse_yaml(text, "scalars.yaml")
    for i, value in enumerate(written):
        mine, theirs = ours[f"k{i}"], dvcs[f"k{i}"]
        nan = isinstance(mine, float) and isinstance(theirs, float) and math.isnan(mine) and math.isnan(theirs)
        assert type(mine) is type(theirs) and (mine == theirs or nan), (value, mine, theirs)


def test_a_trec_export_never_overwrites_a_file_that_is_not_its_own_run(tmp_path):
    """check_params accepted LICENSE, .gitignore, .github/..., runs/sqlite_fts.py (a user's retriever)
    and another system's run_file: `dvc repro` wrote TREC lines over each; a folder failed only at
    retrieve, after every stage before it."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "LICENSE").write_text("MIT License\n")
    (tmp_path / "runs" / "sqlite_fts.py").write_text("def search(questions, depth):\n    return []\n")
    (tmp_path / "runs" / "old.trec").write_text("q1 Q0 c1 1 0.5 dense\n")  # its own earlier export: replaced
    for target, expected in [
        ("LICENSE", "exists and is not a TREC run"),
        ("runs/sqlite_fts.py", "exists and is not a TREC run"),
        (".gitignore", "would overwrite the project's own files"),
        (".github/workflows/ci.trec", "would overwrite the project's own files"),
        ("runs", "is a folder; name a file to write"),
    ]:
        with pytest.raises(InputError, match=f"retrieval.trec_export '{target}' {expected}"):
            load_all_params(write(tmp_path / "params.yaml", dumped(**{"retrieval.trec_export": target})))
    assert load_all_params(write(tmp_path / "params.yaml", dumped(**{"retrieval.trec_export": "runs/old.trec"})))
    reader = {"chunking": "default", "embedder": "default", "method": "run-file", "run_file": "runs/old.trec"}
    both = {"default": {"chunking": "default", "embedder": "default", "trec_export": "runs/old.trec"}, "ext": reader}
    with pytest.raises(InputError, match=r"panel.default.trec_export 'runs/old.trec' is panel.ext's run_file"):
        load_all_params(write(tmp_path / "params.yaml", dumped(panel=both)))


def test_a_missing_embedded_list_is_refused_where_dvc_yaml_iterates_it(tmp_path):
    """With `embedded:` deleted check_params passed, then `dvc repro` failed parsing dvc.yaml
    ("Could not find 'embedded'") without saying what to write."""
    from retrieval_bench.core.params import require_dvc_keys

    params = write(tmp_path / "params.yaml", dumped())  # dumped() leaves embedded out
    resolved = load_all_params(params)  # the API's use: derived from the panel
    with pytest.raises(
        InputError,
        match=r"embedded is missing: .*dvc.yaml's stage embed_corpus iterates it \(foreach\); write embedded: "
        r"\{default-default: \{chunking: default, embedder: default\}",
    ):
        require_dvc_keys(params, ROOT / "dvc.yaml", resolved)
