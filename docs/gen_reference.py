"""Write the generated reference pages: docs/reference/params.md (every key of params.yaml, from
params.py's schema and defaults, described by the comments in params.yaml) and
docs/reference/cli.md (the --help of every `retrieval-bench` command and pipeline stage); and the
sample section of README.md and docs/index.md, whose decision line and table are
metrics/decision.md's (written by the leaderboard stage; not part of --check, as a rerun's new
costs need not reach the README until they are committed).

    python docs/gen_reference.py           # rewrite both pages and the two sample sections
    python docs/gen_reference.py --check   # exit 1 if either page is out of date (tests/project/test_docs.py)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from retrieval_bench.core.params_schema import (  # noqa: E402
    CHECKED_APART,
    CHOICES,
    DEFAULTS,
    MIXED,
    NULLABLE,
    OPTIONAL_TYPES,
)
from retrieval_bench.llm.cost.settings import LLM_SECTIONS  # noqa: E402
from retrieval_bench.llm.providers.registry import NO_PROVIDER, PROVIDERS  # noqa: E402

PARAMS_PAGE = ROOT / "docs" / "reference" / "params.md"
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"
CLI_COMMANDS = [
    "compare",
    "show",
    "gauge",
    "review",
    "export-beir",
    "export-questions",
    "cache prune",
    "lock prune",
    "stub-llm",
]
# Sections whose keys are the user's own names (no defaults to list): one row for the name.
FREE_SECTIONS = {
    "chunkings": (
        "chunkings.NAME",
        "{default: {}}",
        "mapping: keys of load.chunking",
        "a chunking a panel system may pick, its keys over `load.chunking`, e.g. `c400: {chars: 400, overlap: 50}`; "
        "`default` (required) is `load.chunking` as it is; with each embedder it names a stage "
        "`embed_corpus@CHUNKING-EMBEDDER`, and no two pairs may spell the same one (`a-b` with `c`, `a` with `b-c`); "
        "see [Which model and chunk size?](../how-to/panels.md)",
    ),
    "embedders": (
        "embedders.NAME",
        "{default: {}}",
        "mapping: keys of embed",
        "an embedder a panel system may pick, its keys over embed's model, max_seq_length, query_prompt, "
        "document_prompt, backend, quantize, precision, e.g. `seq64: {max_seq_length: 64}`; `default` (required) "
        "is `embed` as it is",
    ),
    "panel": (
        "panel.NAME",
        "{default: {chunking: default, embedder: default}}",
        "mapping: chunking, embedder, retrieval keys",
        "a system of the panel (run by the `retrieve` and `score` stages, in `data/panel/NAME/` and "
        "`metrics/panel/NAME/`): the chunking and embedder it picks by name "
        "(both required) and any retrieval keys over the retrieval section, e.g. "
        "`bm25: {chunking: default, embedder: default, method: bm25}` (NAME: letters, digits, - and _); "
        "`default` (required) is the system `show`, `compare` and `judge.pool` read when none is named; "
        "see [Which model and chunk size?](../how-to/panels.md)",
    ),
    "embedded": (
        "embedded.CHUNKING-EMBEDDER",
        "derived from panel",
        "mapping: chunking, embedder",
        "a (chunking, embedder) pair some panel system uses, embedded once (stage `embed_corpus@CHUNKING-EMBEDDER`); "
        "DVC reads it, so it is written out, and `check_params` refuses a list that misses a pair a vector-searching "
        "system uses or names one no system uses, saying what to write; a pair only BM25 (run-file, Python) "
        "systems use may be left out",
    ),
}
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][\w-]*):(?P<value>[^#]*)(?:#\s?(?P<comment>.*))?$")
COMMENT_LINE = re.compile(r"^ *#\s?(?P<comment>.*)$")
LIST_ITEM_COMMENT = re.compile(r"^ *- [^#]*#\s?(?P<comment>.*)$")  # a list item's comment continues its key's


def yaml_comments(text: str) -> dict[str, str]:
    """Dotted key -> its comment in params.yaml (a comment-only line, or a list item's comment,
    continues the key above it)."""
    comments: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    last = None
    for line in text.splitlines():
        match = KEY_LINE.match(line)
        if match:
            indent = len(match["indent"])
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, match["key"]))
            last = ".".join(key for _, key in stack)
            comments[last] = (match["comment"] or "").strip()
        elif (comment := COMMENT_LINE.match(line) or LIST_ITEM_COMMENT.match(line)) and last is not None:
            comments[last] = f"{comments[last]} {comment['comment'].strip()}".strip()
    return comments


def flatten(node: dict[str, Any], prefix: str = "", section: str = "") -> list[tuple[str, Any, bool]]:
    """(dotted key, default, is_group) in schema order; a mapping is a group followed by its keys,
    unless its keys are the user's own (CHECKED_APART: one row, its default shown whole)."""
    rows: list[tuple[str, Any, bool]] = []
    for key, value in node.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and f"params.{section}.{dotted}" not in CHECKED_APART:
            rows.append((dotted, value, True))
            rows.extend(flatten(value, f"{dotted}.", section))
        else:
            rows.append((dotted, value, False))
    return rows


def value_type(section: str, key: str, dotted: str, default: Any) -> str:
    """What params.py accepts for a key, in words."""
    choices = CHOICES.get((section, key)) if "." not in key else None
    if key == "provider" and section in LLM_SECTIONS:
        choices = {NO_PROVIDER, *PROVIDERS}
    if choices:
        return " \\| ".join(f"`{choice}`" for choice in sorted(choices))
    if f"params.{dotted}" in MIXED:
        return "int or `all`"
    if f"params.{dotted}" in CHECKED_APART:
        return "mapping or `match`"
    if default is None:
        kind = OPTIONAL_TYPES.get((section, key))
        return f"{kind.__name__} or null" if kind else "any (null = unset)"
    name = {bool: "bool", int: "int", float: "number", str: "string", list: "list"}[type(default)]
    return f"{name} or null" if f"params.{dotted}" in NULLABLE else name


def cell(text: str) -> str:
    """`text` in a table cell: its pipes escaped, and outside code spans its placeholders
    (`<name>`) too, which Markdown would otherwise pass through as raw HTML tags that vanish."""
    parts = text.replace("|", "\\|").split("`")
    return "`".join(part if index % 2 else part.replace("<", "&lt;") for index, part in enumerate(parts))


def params_page() -> str:
    comments = yaml_comments((ROOT / "params.yaml").read_text(encoding="utf-8"))
    lines = [
        "# Params reference",
        "",
        "<!-- Generated by docs/gen_reference.py from src/retrieval_bench/core/params_schema.py (keys, defaults, types,",
        "     choices) and the comments in params.yaml. Do not edit: run `python docs/gen_reference.py`. -->",
        "",
        "Every key `params.yaml` may hold, with its default. A key not listed here is an error naming the",
        "closest valid key; a value must have the type shown (an int is accepted for a number). Each stage",
        "reads its own section; `check_params` validates the whole file whenever it changed. Every number",
        "must be finite (`.nan` and `.inf` are refused in one line naming the key), and a value outside a",
        "key's bounds is one line naming them. The Python API fills a missing key with its default, but",
        "`dvc repro` needs every key a stage of `dvc.yaml` lists written in the file: `check_params` names",
        "the first one missing, and its default.",
        "Set a key for one experiment with `dvc exp run -S <section>.<key>=<value>`",
        "([Compare configurations](../how-to/experiments.md)).",
    ]
    for section, keys in {**DEFAULTS, "embedded": None}.items():  # embedded: no default, derived from panel
        lines += ["", f"## {section}", "", "| key | default | type | description |", "|---|---|---|---|"]
        if section in FREE_SECTIONS:
            key, shown, kind, description = FREE_SECTIONS[section]
            lines.append(f"| `{key}` | `{shown}` | {kind} | {description} |")
        for key, default, is_group in [] if section in FREE_SECTIONS else flatten(keys, section=section):
            dotted = f"{section}.{key}"
            shown = json.dumps(default, ensure_ascii=False) if default is not None else "null"
            kind = "mapping" if is_group else value_type(section, key, dotted, default)
            parent = dotted.rsplit(".", 1)[0]
            description = comments.get(dotted) or (f"see `{parent}`" if parent != section else "")
            lines.append(f"| `{dotted}` | `{cell(shown)}` | {kind} | {cell(description)} |")
    return "\n".join(lines) + "\n"


def help_text(command: list[str]) -> str:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, *command, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.rstrip()


def cli_page() -> str:
    lines = [
        "# Command-line reference",
        "",
        "<!-- Generated by docs/gen_reference.py from the commands' own --help. Do not edit:",
        "     run `python docs/gen_reference.py`. -->",
        "",
        "Two kinds of commands: `retrieval-bench` (installed with the package) reads runs and golden sets,",
        "and each pipeline stage runs as `python -m stages.<name>` (what `dvc repro` calls). Bad input",
        "ends any of them in one `error:` line and exit status 1; an unknown option gives one `error:`",
        "line and exit status 2; Ctrl-C one line and exit status 130 (a stage stopped by SIGTERM, from",
        "`timeout`, a cancelled CI job or `docker stop`: the same line and 143); a stage's `--help` exits 0",
        "without running it. Under `dvc repro` a failing stage's line is followed by DVC's own",
        "`ERROR: failed to reproduce '<stage>'` and `dvc repro` exits 255. While generating, the Ctrl-C",
        "line says how many replies are kept and that a rerun asks only for the rest. Progress bars count",
        "finished work (failed requests appear beside the bar) and end at n/n. An empty JSON Lines output",
        "holds one blank line, so DVC never warns that it is empty. `retrieval-bench --help` imports no",
        "command's code, so it answers at once.",
    ]
    lines += ["", "## retrieval-bench", ""]
    for name in CLI_COMMANDS:
        lines += [
            f"### retrieval-bench {name}",
            "",
            "```text",
            help_text(["-m", "retrieval_bench.cli", *name.split()]),
            "```",
            "",
        ]
    lines += ["## Pipeline stages", ""]
    for stage in stages():
        lines += [f"### {stage}", "", "```text", help_text(["-m", f"stages.{stage}"]), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def stages() -> list[str]:
    """The pipeline's stages, in dvc.yaml's order."""
    return list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])


def pages() -> dict[Path, str]:
    return {PARAMS_PAGE: params_page(), CLI_PAGE: cli_page()}


SAMPLE_PAGES = (ROOT / "README.md", ROOT / "docs" / "index.md")
SAMPLE_SECTION = re.compile(r"<!-- sample:.*?<!-- /sample -->", re.S)
DECISION_HEAD = re.compile(r"\*\*Ship .*?\n\n(?:\|.*\n)+")  # the line, a blank line, the table


def with_decision(page: str, decision: str) -> str:
    """`page` with its sample section's decision line and table replaced by `decision`'s."""
    line, table = decision.split("\n\n")[:2]
    section = SAMPLE_SECTION.search(page).group(0)
    return page.replace(section, DECISION_HEAD.sub(lambda _: f"{line}\n\n{table}\n", section, count=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated page is out of date")
    args = parser.parse_args()
    generated = pages()
    stale = [path for path, text in generated.items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"error: {path.relative_to(ROOT)} is out of date: run python docs/gen_reference.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in generated.items():
        path.write_text(text, encoding="utf-8")
    decision = (ROOT / "metrics" / "decision.md").read_text(encoding="utf-8")
    for path in SAMPLE_PAGES:
        path.write_text(with_decision(path.read_text(encoding="utf-8"), decision), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
