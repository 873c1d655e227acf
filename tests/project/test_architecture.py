"""The house rules a newcomer relies on, checked on the source: imports run one way through the
layers and in no circle, the LLM layer is imported only by the golden-set build and the judge,
stages are thin I/O shells, every artefact path is spelled once, and sizes stay within guides.

The import graph is .ci/import_graph.py's (the script that prints each package's figures for
docs/reference/layout.md): one graph builder for the rules and the figures."""

from __future__ import annotations

import ast
import importlib.util
import re
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "retrieval_bench"
STAGES = ROOT / "stages"

spec = importlib.util.spec_from_file_location("import_graph", ROOT / ".ci" / "import_graph.py")
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)
imports, import_cycles = import_graph.imports, import_graph.import_cycles

MAX_STAGE_LINES = 60  # a stage is an I/O shell: a hard limit
# Size guides, not walls: a module is one idea and a function one step. Past the soft guide the
# suite warns (split it if it now holds two ideas; leave it whole if it is one); past the hard
# limit it fails. A module is not split only to stay under a number.
SOFT_MODULE_LINES, MAX_MODULE_LINES = 500, 700  # one idea, read in one sitting
SOFT_FUNCTION_LINES, MAX_FUNCTION_LINES = 60, 100  # held in view at once; past 100, it is several steps
# The golden-set build and relevance judging are the clients of the LLM layer (remote.py completes its reply cache;
# evidence.py and style_examples.py escape passages as the prompt does: llm/passage_escape.py).
MAY_IMPORT_LLM = {
    "goldenset/selection.py",
    "goldenset/assemble.py",
    "goldenset/remote.py",
    "goldenset/evidence.py",
    "goldenset/style_examples.py",
    "goldenset/kinds.py",  # a multi question's passages are one text as the LLM task keys and renders it
    "goldenset/judge.py",
    "goldenset/kind_classifier.py",  # asks the LLM a real or hand-written question's kind
    # params.yaml's provider names are the LLM registry's: checked where the whole file is
    "api.py",
    "stages/check_params.py",
}
ARTEFACT = re.compile(r"^(data|metrics)/\S+$")
# Every module of the package, by package or module (the longest prefix wins), in a layer; a module
# imports only from its own layer or lower ones. A new module must be placed here.
GROUND, SERVICES, DOMAIN, EVALUATION, FACES = range(5)
LAYERS = {
    "core": GROUND,
    "stores": SERVICES,
    "llm": SERVICES,
    "embedding": SERVICES,
    "corpus": DOMAIN,
    "goldenset": DOMAIN,
    "retrieval": DOMAIN,
    "evaluation": EVALUATION,
    "api": FACES,
    "cli": FACES,
    "show": FACES,
    "lockfile": FACES,
    "repro_log": FACES,
    "review": FACES,
    "__init__": FACES,
}


def python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py")) + sorted(STAGES.glob("*.py"))


def package_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (lazy and TYPE_CHECKING imports too: a circle
    through a type hint is still two modules that cannot be read, or split, one without the other)."""
    return import_graph.package_graph(ROOT)


def layer_of(module: str) -> int | None:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    return LAYERS[max(prefixes, key=len)] if prefixes else None


def label(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix() if PACKAGE in path.parents else path.relative_to(ROOT).as_posix()


def test_only_the_goldenset_build_imports_the_llm_layer():
    offenders = []
    for path in python_files():
        name = label(path)
        if name.startswith("llm/") or name in MAY_IMPORT_LLM or name == "stages/generate_goldenset.py":
            continue
        if any(
            module == "retrieval_bench.llm" or module.startswith("retrieval_bench.llm.") for module in imports(path)
        ):
            offenders.append(name)
    assert offenders == []


def test_stages_are_thin_io_shells():
    lengths = {path.name: len(path.read_text().splitlines()) for path in STAGES.glob("*.py")}
    assert {name: n for name, n in lengths.items() if n > MAX_STAGE_LINES} == {}


def test_the_panel_stages_import_no_scientific_or_model_stack():
    """retrieve and score rerun on every panel edit: scipy (0.4 CPU-s), torch or
    sentence-transformers in their imports would be paid each time (bench/panel_overhead.py)."""
    import subprocess
    import sys

    probe = "import sys, stages.retrieve, stages.score; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert {"scipy", "torch", "sentence_transformers", "sklearn"} & set(loaded.stdout.split()) == set()


def test_check_params_imports_no_pandas():
    """check_params runs first in every `dvc repro` and `make repro`, and reads no table: pandas
    (about 0.3 CPU-s to import) would be paid for nothing (bench/cold_vs_st.py --breakdown)."""
    import subprocess
    import sys

    probe = "import sys, stages.check_params; print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    loaded = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert {"pandas", "pyarrow", "torch", "scipy"} & set(loaded.stdout.split()) == set()


def test_the_leaderboard_imports_scipy_special_not_scipy_stats():
    """Its intervals need t and normal quantiles, its segment tests Benjamini-Hochberg: scipy.special
    and a few lines give the same values (tests/evaluation/test_panel_stats.py), and importing
    scipy.special costs about 0.4 CPU-s less than scipy.stats, in every run (bench/cold_vs_st.py --breakdown). The
    probe calls them too, so a lazy import inside them counts."""
    import subprocess
    import sys

    probe = (
        "import sys, numpy as np, stages.leaderboard\n"
        "from retrieval_bench.evaluation import ppi, stats\n"
        "stats.bh_adjust([0.01, 0.2, 0.03]); stats.paired_bootstrap_ci(np.array([0.1, -0.2, 0.3]), 100); ppi.t95(5)\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert {"scipy.stats", "torch", "sentence_transformers", "sklearn"} & loaded == set()


def test_every_artefact_path_is_spelled_once_in_paths_py():
    spelled = []
    for path in python_files():
        if path.name in ("paths.py", "params_schema.py"):  # params_schema.py: the defaults of user-set paths
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ARTEFACT.match(node.value):
                spelled.append(f"{label(path)}: {node.value}")
    assert spelled == []


def test_every_module_has_a_layer():
    assert sorted(m for m in package_graph() if layer_of(m) is None) == []


def test_imports_run_down_the_layers_only():
    """ground < services < domain < evaluation < faces: editing a metric reruns what scores, not what
    retrieves; editing a store adapter reruns what reads stores, not every stage."""
    upward = [f"{m} -> {d}" for m, deps in package_graph().items() for d in deps if layer_of(d) > layer_of(m)]
    assert sorted(upward) == []


def test_no_import_cycles():
    assert import_cycles(package_graph()) == []


def test_the_cycle_finder_finds_a_circle_through_a_type_hint(tmp_path):
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    hinted = tmp_path / "x.py"
    hinted.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from retrieval_bench.llm.settings import Settings\n"
    )
    assert "retrieval_bench.llm.settings" in imports(hinted)


def sizes(path: Path) -> list[tuple[str, int, int, int]]:
    """(what, lines, soft guide, hard limit) for a module and each of its functions (methods and
    nested ones too, def line to last line)."""
    text = path.read_text(encoding="utf-8")
    found = [(label(path), len(text.splitlines()), SOFT_MODULE_LINES, MAX_MODULE_LINES)]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            what = f"{label(path)}:{node.lineno} {node.name}"
            found.append((what, node.end_lineno - node.lineno + 1, SOFT_FUNCTION_LINES, MAX_FUNCTION_LINES))
    return found


def test_functions_and_modules_stay_within_the_size_guides():
    """Past a hard limit fails; past a soft guide is reported as a warning (pytest's summary)."""
    over_soft, over_hard = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        for what, lines, soft, hard in sizes(path):
            if lines > hard:
                over_hard.append(f"{what}: {lines} lines (hard limit {hard})")
            elif lines > soft:
                over_soft.append(f"{what}: {lines} lines (guide {soft})")
    for note in over_soft:
        warnings.warn(f"over the size guide, still one idea? {note}", stacklevel=1)
    assert over_hard == []


def test_the_import_graph_figures_count_every_module_once():
    """.ci/import_graph.py's figures (docs/reference/layout.md): depth in arrows, a circle as one step."""
    assert import_graph.longest_chain({"a": {"b"}, "b": {"c"}, "c": set(), "d": set()}) == 2
    assert import_graph.longest_chain({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == 1
    graph = package_graph()
    figures = import_graph.figures(graph)
    assert list(figures) == list(import_graph.PACKAGES)
    assert sum(row["modules"] for row in figures.values()) == len(graph)


def test_the_ground_is_a_package_and_only_the_faces_stay_loose():
    """The ground layer is core/ (errors, files, the stage command line, paths, params, ...): the
    modules beside the package's __init__ are its faces alone."""
    loose = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__")
    assert loose == ["api", "cli", "lockfile", "repro_log", "show"]
    assert all(LAYERS[name] == FACES for name in loose)


def test_no_library_function_outside_the_api_takes_more_than_six_parameters():
    """Settings travel as one frozen object per params section (Scoring, GenerateSettings,
    EmbedSettings, RetrievalSettings, JudgeSettings) and values that go together as one small
    object: no function in the library takes more than 6 parameters, keyword-only ones included
    (*args and **kwargs aside). The public API (api.py) keeps the keyword options users call it with."""
    crowded = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "api.py":  # the public API mirrors the command line's options
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                named = [a.arg for a in arguments if a.arg not in ("self", "cls")]
                if len(named) > 6:
                    crowded.append(f"{label(path)}:{node.lineno} {node.name} ({len(named)})")
    assert crowded == []


def test_a_stage_runs_the_library_beside_it(tmp_path):
    """The editable install points at one checkout's src/: in a copy of the project (a DVC
    experiment's temporary folder, a queued run) the stages ran the workspace's library, not the
    code the experiment records and dvc.lock hashes."""
    import shutil
    import subprocess
    import sys

    (tmp_path / "stages").mkdir()
    shutil.copy(STAGES / "__init__.py", tmp_path / "stages" / "__init__.py")
    (tmp_path / "stages" / "where.py").write_text(  # and a process it starts (Ray's workers): the same library
        "import subprocess, sys\nimport retrieval_bench\nprint(retrieval_bench.__file__)\n"
        "subprocess.run([sys.executable, '-c', 'import retrieval_bench; print(retrieval_bench.__file__)'])\n"
    )
    (tmp_path / "src" / "retrieval_bench").mkdir(parents=True)
    (tmp_path / "src" / "retrieval_bench" / "__init__.py").write_text("")
    found = subprocess.run(
        [sys.executable, "-m", "stages.where"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert found.splitlines() == [str(tmp_path / "src" / "retrieval_bench" / "__init__.py")] * 2
