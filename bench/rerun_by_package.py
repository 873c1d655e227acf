"""Which stages an edit to one module reruns, per package, for one or more dvc.yaml files.

    python bench/rerun_by_package.py dvc.yaml
    git show HEAD~1:dvc.yaml > /tmp/before.yaml && python bench/rerun_by_package.py /tmp/before.yaml dvc.yaml

For every module of src/retrieval_bench (package `__init__.py` files aside), the stages whose code
deps in the given dvc.yaml cover it: the module's own file, or a folder holding it (DVC hashes a
folder dep over all its files). A stage counts once per instance `dvc status` would list
(`chunk@default`, `chunk@c400`, ...), as this project's params expand its foreach stages; the
stage set itself is the project's, so each file given must differ from it only in deps. Prints,
per package (a folder without sub-packages; the modules beside sub-packages as one row of their
folder), the stages an edit to one of its modules reruns: the fewest and most over its
modules, and their mean; then the same over all modules, and each file's line and dep counts.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "retrieval_bench"


def code_deps(dvc_yaml: Path) -> dict[str, list[str]]:
    """Per stage definition, its deps that are code (stages/ or src/)."""
    stages = yaml.safe_load(dvc_yaml.read_text())["stages"]
    deps = {}
    for name, stage in stages.items():
        listed = [dep if isinstance(dep, str) else next(iter(dep)) for dep in stage.get("do", stage)["deps"]]
        deps[name] = [dep for dep in listed if dep.startswith(("src/", "stages/"))]
    return deps


def top_level(deps: dict[str, list[str]]) -> dict[str, list[str]]:
    """The same deps with each folder or module under a top-level package widened to that package."""
    widened = {}
    for stage, paths in deps.items():
        wide = []
        for path in paths:
            parts = path.split("/")
            if path.startswith("src/retrieval_bench/") and len(parts) > 3 and (PACKAGE / parts[2]).is_dir():
                path = "/".join(parts[:3])
            if path not in wide:
                wide.append(path)
        widened[stage] = wide
    return widened


def instances() -> dict[str, int]:
    """Per stage definition, how many stages DVC expands it to with this project's params."""
    from dvc.repo import Repo

    counts: dict[str, int] = defaultdict(int)
    for stage in Repo(str(ROOT)).index.stages:
        counts[stage.addressing.split("@")[0]] += 1
    return dict(counts)


def package_of(module: Path) -> str:
    """The package row of `module`: its folder, or for a module beside sub-packages, that folder's
    loose modules by name (`evaluation: stats.py`)."""
    folder = module.parent
    name = folder.relative_to(PACKAGE).as_posix() if folder != PACKAGE else "top level"
    if not any((sub / "__init__.py").is_file() for sub in folder.iterdir()):
        return name
    loose = sorted(m.name for m in folder.glob("*.py") if m.name != "__init__.py")
    return f"{name}: {', '.join(loose)}"


def reruns(module: str, deps: dict[str, list[str]], counts: dict[str, int]) -> int:
    """Stages (as `dvc status` lists them) whose code deps cover `module` (a path from the root)."""
    return sum(
        counts[stage] for stage, paths in deps.items() if any(module == p or module.startswith(p + "/") for p in paths)
    )


def lock_entries(deps: dict[str, list[str]], counts: dict[str, int]) -> tuple[int, int]:
    """Code dep entries a fresh dvc.lock holds (each stage's code deps, once per instance) and their
    lines: 4 for a file (path, hash, md5, size), 5 for a folder (nfiles too)."""
    entries = lines = 0
    for stage, paths in deps.items():
        entries += len(paths) * counts[stage]
        lines += sum(4 if path.endswith(".py") else 5 for path in paths) * counts[stage]
    return entries, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dvc_yaml", nargs="+", type=Path)
    parser.add_argument(
        "--top-level", action="store_true", help="add a column: the last file's deps widened to top-level packages"
    )
    args = parser.parse_args()
    counts = instances()
    files = {path.name: code_deps(path) for path in args.dvc_yaml}
    sizes = {path.name: path.read_text().count("\n") for path in args.dvc_yaml}
    if args.top_level:
        last = args.dvc_yaml[-1].name
        files[f"{last}, top-level"] = top_level(files[last])
        removed = sum(map(len, files[last].values())) - sum(map(len, files[f"{last}, top-level"].values()))
        sizes[f"{last}, top-level"] = sizes[last] - removed
    modules = sorted(m for m in PACKAGE.rglob("*.py") if m.name != "__init__.py" and "__pycache__" not in m.parts)
    by_package: dict[str, list[str]] = defaultdict(list)
    for module in modules:
        by_package[package_of(module)].append(module.relative_to(ROOT).as_posix())
    names = list(files)
    print(
        f"Stages rerun by an edit to one module (of {sum(counts.values())}): fewest–most over the package's modules (mean)"
    )
    print()
    print("| package | modules | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))

    def cell(group: list[str], deps: dict[str, list[str]]) -> str:
        n = [reruns(m, deps, counts) for m in group]
        span = f"{min(n)}" if min(n) == max(n) else f"{min(n)}–{max(n)}"
        return f"{span} ({statistics.mean(n):.1f})"

    for package, group in sorted(by_package.items()):
        print(f"| {package} | {len(group)} | " + " | ".join(cell(group, files[name]) for name in names) + " |")
    every = [m for group in by_package.values() for m in group]
    print(f"| all | {len(every)} | " + " | ".join(cell(every, files[name]) for name in names) + " |")
    print()
    print("| dvc.yaml | lines | code deps listed | a fresh dvc.lock's code dep entries | their lines |")
    print("|---|---:|---:|---:|---:|")
    for name, deps in files.items():
        entries, lock_lines = lock_entries(deps, counts)
        print(f"| {name} | {sizes[name]:,} | {sum(map(len, deps.values()))} | {entries:,} | {lock_lines:,} |")


if __name__ == "__main__":
    from common import run_main  # a bad argument or a missing extra: one line

    run_main(main)
