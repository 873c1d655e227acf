"""Write each dvc.yaml stage's code deps from what its script imports: the script, then one line per
package of the retrieval_bench modules it imports directly or not (lazy imports inside functions too),
sorted. A package is a folder without sub-packages (`core`, `llm/transport`, `evaluation/score`): DVC
hashes a folder dep over all its files, so an edit to any module of a package the stage imports
reruns it. A module beside sub-packages (`evaluation/stats.py`, `api.py`) is its own line: its folder
would take in the sub-packages too. .dvcignore keeps __pycache__ and editor files out of the hash.
Data deps, their order and comments are left as they are.

    python .ci/dvc_deps.py          # rewrite dvc.yaml (make deps)
    python .ci/dvc_deps.py --check  # exit 1 naming the stages whose code deps are not current
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "retrieval_bench"
CODE_DEP = re.compile(r"^(\s*)- (src/retrieval_bench/\S+|stages/\S+\.py)\s*(#.*)?$")


def module_path(dotted: str) -> Path:
    return PACKAGE / (dotted.replace(".", "/") + ".py")


def imported_modules(path: Path) -> set[str]:
    """retrieval_bench modules (dotted, below the package) imported anywhere in `path`;
    `from retrieval_bench.pkg import module` counts the module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("retrieval_bench"):
            base = node.module.removeprefix("retrieval_bench").lstrip(".")
            for alias in node.names:
                dotted = f"{base}.{alias.name}".lstrip(".")
                if module_path(dotted).is_file():
                    found.add(dotted)
                elif base:
                    found.add(base)
        elif isinstance(node, ast.Import):
            found.update(
                a.name.removeprefix("retrieval_bench.") for a in node.names if a.name.startswith("retrieval_bench.")
            )
    return found


def closure(script: Path) -> set[str]:
    todo, seen = list(imported_modules(script)), set()
    while todo:
        module = todo.pop()
        if module not in seen and module_path(module).is_file():
            seen.add(module)
            todo.extend(imported_modules(module_path(module)))
    return seen


def package_dep(module: str) -> str:
    """The dvc.yaml dep that covers `module` (dotted): its folder, unless that folder has sub-packages
    (then a folder dep would take them in too), in which case the module's own file."""
    path = module_path(module)
    if not any((sub / "__init__.py").is_file() for sub in path.parent.iterdir()):
        path = path.parent
    return path.relative_to(ROOT).as_posix()


def code_deps(stage: str) -> list[str]:
    """The script of `stage`, then the packages (or loose modules) it runs, as dvc.yaml paths."""
    script = f"stages/{stage}.py"
    return [script, *sorted({package_dep(m) for m in closure(ROOT / script)})]


def rewritten(text: str) -> str:
    """dvc.yaml's text with every stage's code deps replaced by code_deps, in place of the first."""
    stages = yaml.safe_load(text)["stages"]
    lines, out, stage, done = text.splitlines(keepends=True), [], None, set()
    for line in lines:
        top = re.match(r"^  ([A-Za-z0-9_]+):", line)
        if top and top.group(1) in stages:
            stage = top.group(1)
        code = CODE_DEP.match(line)
        if stage is None or not code:
            out.append(line)
            continue
        if stage not in done:  # the first code dep: the stage's whole list goes here
            out.extend(f"{code.group(1)}- {dep}\n" for dep in code_deps(stage))
            done.add(stage)
    missing = set(stages) - done
    if missing:
        raise SystemExit(f"dvc.yaml: stages without a code dep to replace: {', '.join(sorted(missing))}")
    return "".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say whether dvc.yaml is current")
    dvc_yaml = ROOT / "dvc.yaml"
    text = dvc_yaml.read_text(encoding="utf-8")
    new = rewritten(text)
    if parser.parse_args().check:
        if new != text:
            print("dvc.yaml: code deps are not current; run `make deps`", file=sys.stderr)
            return 1
        return 0
    dvc_yaml.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
