"""The documentation tells the truth about the code: the site builds with `mkdocs build --strict`,
every command the README or the docs show with a flag names a flag its parser has, every params key
they name exists in params.py's schema, and the generated references are up to date."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.core.question_sets import QUESTION_KINDS
from retrieval_bench.core.revisions import git_show

spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
gen_reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_reference)

README = ROOT / "README.md"
DOC_FILES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(```+|~~~+)([^\n]*)\n(.*?)^\1[ \t]*$", re.M | re.S)
SPAN = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# Where a shell command ends inside a line: a comment, a pipe, a redirect, a chain.
COMMAND_END = re.compile(r"\s\|\s|\s>\s|&&|;|\)$")
SHELL_COMMENT = re.compile(r"(^|\s)#.*$")
CLI_CALL = re.compile(r"(?<![\w/.\-\[])retrieval-bench\s+(?P<rest>[a-z].*)")
STAGE_CALL = re.compile(r"python -m stages\.(?P<name>\w+)(?P<rest>.*)")
BENCH_CALL = re.compile(r"(?<![\w/])bench/(?P<name>\w+)\.py(?P<rest>.*)")
FILE_SUFFIXES = {
    "py",
    "json",
    "jsonl",
    "yaml",
    "yml",
    "parquet",
    "csv",
    "tsv",
    "npy",
    "txt",
    "md",
    "trec",
    "html",
    "lock",
    "db",
    "sh",
    "toml",
}
KEY = re.compile(r"^(?P<key>(?:%s)(?:\.[A-Za-z_*][\w*]*)+)(?=$|[\s:=,)])" % "|".join(DEFAULTS))
SET_PARAM = re.compile(r"""-S\s+['"]?(?P<key>[\w.]+)=""")


def code_of(text: str) -> Iterator[tuple[str, str]]:
    """(kind, code) for every fenced block ('block:<lang>') and inline code span ('span') of a page."""
    for match in FENCE.finditer(text):
        yield f"block:{match[2].strip()}", match[3]
    for match in SPAN.finditer(FENCE.sub("", text)):
        yield "span", match[1]


def doc_code() -> Iterator[tuple[Path, str, str]]:
    for path in DOC_FILES:
        for kind, code in code_of(path.read_text(encoding="utf-8")):
            yield path, kind, code


def command_flags(rest: str) -> list[str]:
    """The --flags of one command line, up to where the shell command ends."""
    end = COMMAND_END.search(rest)
    return FLAG.findall(rest[: end.start()] if end else rest)


def cli_flags() -> dict[str, set[str]]:
    """`retrieval-bench` subcommand (and stage, as `stages.<name>`) -> the flags its parser accepts."""
    flags = {
        name: set(FLAG.findall(gen_reference.help_text(["-m", "retrieval_bench.cli", *name.split()])))
        for name in gen_reference.CLI_COMMANDS
    }
    for group in {name.split()[0] for name in gen_reference.CLI_COMMANDS if " " in name}:  # `cache`, `lock`
        flags[group] = set(FLAG.findall(gen_reference.help_text(["-m", "retrieval_bench.cli", group])))
    for stage in gen_reference.stages():
        flags[f"stages.{stage}"] = set(FLAG.findall(gen_reference.help_text(["-m", f"stages.{stage}"])))
    return flags


@functools.cache
def bench_flags(name: str) -> set[str] | None:
    """The flags a bench script's parser accepts (its --help: flags may come from bench/common.py)."""
    script = ROOT / "bench" / f"{name}.py"
    return set(FLAG.findall(gen_reference.help_text([str(script)]))) if script.is_file() else None


def wrong_commands(code: str, known: dict[str, set[str]]) -> list[str]:
    """Every command in a piece of code whose subcommand, stage, script or flag does not exist."""
    problems = []
    for line in code.splitlines():
        line = SHELL_COMMENT.sub("", line.replace("\\", " "))
        for match in CLI_CALL.finditer(line):
            words = match["rest"].split()
            name = " ".join(words[:2]) if " ".join(words[:2]) in known else words[0].rstrip("`:,.")
            if name not in known:
                problems.append(f"retrieval-bench {name}: no such command")
                continue
            problems += [
                f"retrieval-bench {name} {flag}" for flag in command_flags(match["rest"]) if flag not in known[name]
            ]
        for match in STAGE_CALL.finditer(line):
            name = f"stages.{match['name']}"
            if name not in known:
                problems.append(f"python -m {name}: no such stage")
                continue
            problems += [f"python -m {name} {flag}" for flag in command_flags(match["rest"]) if flag not in known[name]]
        for match in BENCH_CALL.finditer(line):
            accepted = bench_flags(match["name"])
            if accepted is None:
                problems.append(f"bench/{match['name']}.py: no such script")
                continue
            problems += [
                f"bench/{match['name']}.py {flag}" for flag in command_flags(match["rest"]) if flag not in accepted
            ]
    return problems


def key_exists(key: str) -> bool:
    """A dotted params key (`*` for any child) exists in DEFAULTS; below a key whose default is null
    (an engine's own mapping: retrieval.store.search, generate.price) anything goes. A panel
    system's name is the user's own: panel.<name>.<key> is checked as retrieval.<key>. An imported
    question set's name is the user's own too: generate.imported.<name>; generate.kinds.<kind> is a
    kind's share."""
    parts = key.split(".")
    if parts[0] == "panel" and len(parts) > 2 and parts[2] in ("chunking", "embedder"):
        return True  # a system's chunking and embedder, by name
    if parts[0] == "panel" and len(parts) > 1:
        parts = ["retrieval", *parts[2:]]
    if parts[:2] == ["generate", "imported"]:
        return len(parts) <= 3  # an imported question set, by the user's own name
    if parts[:2] == ["generate", "kinds"]:
        return len(parts) == 2 or (len(parts) == 3 and parts[2] in QUESTION_KINDS)  # a kind's share
    if parts[0] in ("chunkings", "embedders") and len(parts) > 1:  # named overrides of load.chunking, of embed
        parts = [*(["load", "chunking"] if parts[0] == "chunkings" else ["embed"]), *parts[2:]]
    node: object = DEFAULTS
    for part in parts:
        if node is None:
            return True
        if not isinstance(node, dict):
            return False
        if part == "*":
            return True
        if part not in node:
            return False
        node = node[part]
    return True


def yaml_keys(node: dict, prefix: str = "") -> Iterator[str]:
    for key, value in node.items():
        yield f"{prefix}{key}"
        if isinstance(value, dict):
            yield from yaml_keys(value, f"{prefix}{key}.")


def named_keys(kind: str, code: str) -> Iterator[str]:
    """The params keys a piece of code names: a backticked dotted key, a `-S key=value`, or the keys
    of a YAML block of params."""
    if kind == "span" and (match := KEY.match(code.strip())) and match["key"].rsplit(".", 1)[-1] not in FILE_SUFFIXES:
        yield match["key"]
    yield from (match["key"] for match in SET_PARAM.finditer(code))
    if kind == "block:yaml":
        data = yaml.safe_load(code)
        if isinstance(data, dict) and data and set(data) <= set(DEFAULTS):
            yield from yaml_keys(data)


def unknown_keys(kind: str, code: str) -> list[str]:
    return [key for key in named_keys(kind, code) if not key_exists(key)]


@pytest.fixture(scope="module")
def known() -> dict[str, set[str]]:
    return cli_flags()


def test_every_documented_command_flag_exists(known):
    problems = [
        f"{path.relative_to(ROOT)}: {problem}"
        for path, _, code in doc_code()
        for problem in wrong_commands(code, known)
    ]
    assert problems == []


def test_every_documented_params_key_exists():
    problems = [
        f"{path.relative_to(ROOT)}: {key}" for path, kind, code in doc_code() for key in unknown_keys(kind, code)
    ]
    assert problems == []


LIBRARY_IMPORT = re.compile(r"^\s*from (retrieval_bench[\w.]*) import ([\w, ]+)$", re.MULTILINE)


def wrong_imports(code: str) -> list[str]:
    """`from retrieval_bench... import name` lines of a Python block whose module or name is not there."""
    problems = []
    for match in LIBRARY_IMPORT.finditer(code):
        try:
            module = importlib.import_module(match[1])
        except ImportError:
            problems.append(f"no module {match[1]}")
            continue
        for name in (n.strip() for n in match[2].split(",")):
            if not hasattr(module, name) and not (
                hasattr(module, "__path__") and importlib.util.find_spec(f"{match[1]}.{name}")
            ):
                problems.append(f"{match[1]} has no {name}")
    return problems


def test_every_documented_library_import_exists():
    """A page's Python (a block, or a heredoc in one) imports what the library has (vector-stores.md's
    parse_address was imported from retrieval_bench.stores.base, where it is not)."""
    problems = [
        f"{path.relative_to(ROOT)}: {problem}"
        for path, kind, code in doc_code()
        if kind.startswith("block:")
        for problem in wrong_imports(code)
    ]
    assert problems == []
    assert wrong_imports("from retrieval_bench.stores.base import parse_address") == [
        "retrieval_bench.stores.base has no parse_address"
    ]
    assert wrong_imports("from retrieval_bench.retrieval import ann, flat") == []  # modules too
    assert sum(len(LIBRARY_IMPORT.findall(code)) for _, kind, code in doc_code() if kind.startswith("block:")) > 5


def test_the_checks_catch_a_wrong_flag_command_and_key(known):
    assert wrong_commands("retrieval-bench compare main --md --sede 1 > out.md", known) == [
        "retrieval-bench compare --sede"
    ]
    assert wrong_commands("retrieval-bench comapre main", known) == ["retrieval-bench comapre: no such command"]
    assert wrong_commands("python -m stages.judge --dry-run --dryrun", known) == ["python -m stages.judge --dryrun"]
    assert wrong_commands(".venv/bin/python bench/store_search.py --chunks 10 --engine x", known) == [
        "bench/store_search.py --engine"
    ]
    assert wrong_commands("retrieval-bench cache prune --dry-run  # --not-a-flag in a comment", known) == []
    assert unknown_keys("span", "retrieval.ann.ef_serch") == ["retrieval.ann.ef_serch"]
    assert unknown_keys("span", "retrieval.store.search.nprobes") == []
    assert unknown_keys("span", "embed.py") == []
    assert unknown_keys("block:bash", "dvc exp run -S load.chunking.size=400") == ["load.chunking.size"]
    assert unknown_keys("block:yaml", "embed:\n  ray:\n    adress: auto\n") == ["embed.ray.adress"]
    assert unknown_keys("block:yaml", "panel:\n  weak: {method: ann, ann: {ef_serch: 8}}\n") == [
        "panel.weak.ann.ef_serch"
    ]
    named = "chunkings:\n  c4: {chars: 400, overlap: 50, size: 4}\nembedders:\n  e: {max_seq_length: 64, dim: 8}\n"
    assert unknown_keys("block:yaml", named) == ["chunkings.c4.size", "embedders.e.dim"]
    assert unknown_keys("block:yaml", "panel:\n  d: {chunking: c4, embedder: e, method: dense}\n") == []


def test_the_docs_show_commands_and_keys():
    """The checks above have something to check: the docs name commands, flags and keys."""
    codes = list(doc_code())
    assert sum(bool(CLI_CALL.search(code)) for _, _, code in codes) > 20
    assert sum(1 for _, kind, code in codes for _ in named_keys(kind, code)) > 200


def test_generated_params_reference_is_up_to_date():
    assert gen_reference.PARAMS_PAGE.read_text(encoding="utf-8") == gen_reference.params_page(), (
        "docs/reference/params.md is out of date: run python docs/gen_reference.py"
    )


def sections_and_flags(page: str) -> dict[str, set[str]]:
    """Heading -> the flags in its help text (argparse's layout differs between Python versions)."""
    parts = re.split(r"^### (.+)$", page, flags=re.M)
    return {parts[i]: set(FLAG.findall(parts[i + 1])) for i in range(1, len(parts), 2)}


def test_generated_cli_reference_is_up_to_date():
    committed = sections_and_flags(gen_reference.CLI_PAGE.read_text(encoding="utf-8"))
    assert committed == sections_and_flags(gen_reference.cli_page()), (
        "docs/reference/cli.md is out of date: run python docs/gen_reference.py"
    )


SAMPLE_SECTION = gen_reference.SAMPLE_SECTION


def test_the_sample_section_shows_the_committed_decision_table_on_both_home_pages():
    """README's sample section shows metrics/decision.md's line and table, as committed or as the
    leaderboard stage has just rewritten them (a rerun's new costs need not reach the README until
    they are committed: copy them then), and the docs' home page holds the same section, its links
    relative to docs/."""
    readme = SAMPLE_SECTION.search(README.read_text(encoding="utf-8")).group(0)
    home = SAMPLE_SECTION.search((ROOT / "docs" / "index.md").read_text(encoding="utf-8")).group(0)
    assert home == readme.replace("](docs/", "]("), "docs/index.md's sample section is not README's"
    committed = git_show("metrics/decision.md", "HEAD", ROOT)  # a rerun's new costs are not yet the README's
    decisions = [(ROOT / "metrics" / "decision.md").read_text(encoding="utf-8")] + (
        [committed.decode()] if committed else []
    )
    heads = []
    for decision in decisions:
        line, table = decision.split("\n\n")[:2]
        assert line.startswith("**Ship ") and table.startswith("| system | chunk chars |")
        heads.append(f"{line}\n\n{table}\n")
    assert any(head in readme for head in heads), (
        "README's sample table is not metrics/decision.md's: run python docs/gen_reference.py"
    )


def test_the_sample_section_is_rewritten_from_a_decision_and_nothing_else_moves():
    page = "intro\n<!-- sample: x -->\ntext\n\n**Ship a (old).**\n\n| system | chunk chars |\n|---|---|\n| a | 1 |\n\nafter\n<!-- /sample -->\nend\n"
    decision = "**Ship b (new).**\n\n| system | chunk chars |\n|---|---|\n| b | 2 |\n| a | 1 |\n\nhow to read it\n"
    rewritten = gen_reference.with_decision(page, decision)
    assert rewritten == page.replace(
        "**Ship a (old).**\n\n| system | chunk chars |\n|---|---|\n| a | 1 |\n", decision.split("\n\nhow")[0] + "\n"
    )
    assert gen_reference.with_decision(rewritten, decision) == rewritten


def test_readme_is_short_and_keeps_the_two_commands_and_its_links():
    text = README.read_text(encoding="utf-8")
    assert len(text) <= 12_000
    assert "make repro" in text and "make test" in text
    links = re.findall(r"\]\((?!https?://)([^)#]+)(?:#[^)]*)?\)", text)
    assert links and [link for link in links if not (ROOT / link).exists()] == []


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The docs site, built once with `mkdocs build --strict` (the build's output if it fails)."""
    pytest.importorskip(
        "mkdocs", reason="the docs tooling is in the docs extra: pip install -e '.[docs]' (make test installs it)"
    )
    folder = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(folder)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def test_docs_site_builds_strict(site):
    assert (site / "index.html").is_file()


# A placeholder in prose (not in code): `<name>` as written, or escaped as `&lt;name>`.
PLACEHOLDER = re.compile(r"(?:<|&lt;)(?!!--|/|https?:)([^<>&\n]+)(?:>|&gt;)")


class _VisibleText(HTMLParser):
    """The text of a page as a browser shows it (entities decoded, tags dropped)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def visible_text(html: str) -> str:
    parser = _VisibleText()
    parser.feed(html)
    return "".join(parser.parts)


def prose_placeholders(path: Path) -> list[str]:
    """Every `<placeholder>` of a page's prose, outside code blocks, code spans and comments."""
    text = re.sub(r"<!--.*?-->", "", FENCE.sub("", path.read_text(encoding="utf-8")), flags=re.S)
    return [f"<{name}>" for name in PLACEHOLDER.findall(re.sub(r"(`+).+?\1", "", text, flags=re.S))]


def test_every_placeholder_in_the_docs_shows_in_the_built_pages(site):
    """A bare `<name>` in Markdown is a raw HTML tag: the browser shows nothing ("qrels/.tsv"), and
    `mkdocs build --strict` does not notice. Each must reach the page's visible text."""
    found, hidden = 0, []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        page = path.relative_to(ROOT / "docs").with_suffix("")
        html = site / (page.parent if page.name == "index" else page) / "index.html"
        shown = visible_text(html.read_text(encoding="utf-8"))
        for placeholder in prose_placeholders(path):
            found += 1
            if placeholder not in shown:
                hidden.append(f"docs/{page}.md: {placeholder}")
    assert hidden == [] and found >= 4


def sample_figures() -> Iterator[tuple[str, str, str, str]]:
    """(page, row label, metric, figure as written) for every table row of the docs that shows a
    committed run's metric: a table of metric columns alone (the sample's run), or a row named
    after a panel system or "dense (exact)" (its run)."""
    for path in DOC_FILES:
        for table in re.findall(r"(?:^\|.*\|\n)+", path.read_text(encoding="utf-8"), flags=re.M):
            rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()]
            if len(rows) < 3:
                continue
            header, body = rows[0], rows[2:]
            labelled = header[0] not in SAMPLE_METRICS
            metrics = header[1:] if labelled else header
            if not metrics or not set(metrics) <= SAMPLE_METRICS:
                continue
            for row in body:
                label = row[0].strip("`") if labelled else "sample"
                for metric, figure in zip(metrics, row[1:] if labelled else row):
                    yield str(path.relative_to(ROOT)), label, metric, figure


SAMPLE_METRICS = set(json.loads((ROOT / "metrics" / "panel" / "default" / "metrics.json").read_text()))


def committed_metrics(label: str) -> dict | None:
    """The committed metrics.json a row label names, or None (an experiment's row: not committed)."""
    if label in {"sample", "dense (exact)"}:
        return json.loads((ROOT / "metrics" / "panel" / "default" / "metrics.json").read_text())
    panel = ROOT / "metrics" / "panel" / label / "metrics.json"
    return json.loads(panel.read_text()) if panel.is_file() else None


def test_every_sample_figure_in_the_docs_is_the_committed_runs():
    """A figure typed into a page drifts when the pipeline changes: each must equal the committed
    run's metric to its 3 decimals."""
    checked, wrong = 0, []
    for page, label, metric, figure in sample_figures():
        metrics = committed_metrics(label)
        if metrics is None:
            continue
        checked += 1
        if figure != f"{metrics[metric]:.3f}":
            wrong.append(f"{page}: {label} {metric} {figure}, the committed run has {metrics[metric]:.3f}")
    assert wrong == [] and checked >= 3 * 6 + 3 * 5


def test_the_layout_page_names_every_module():
    """docs/reference/layout.md is where a reader finds a module: each of the library's is named
    (nine were missing: documents.py, labels.py, ppi.py, ...)."""
    layout = (ROOT / "docs" / "reference" / "layout.md").read_text(encoding="utf-8")
    modules = sorted((ROOT / "src" / "retrieval_bench").rglob("*.py"))
    named = [re.search(rf"(?<![\w.]){re.escape(p.name)}", layout) for p in modules]  # not torch_flat.py for flat.py
    assert [str(p.relative_to(ROOT)) for p, found in zip(modules, named) if p.name != "__init__.py" and not found] == []
