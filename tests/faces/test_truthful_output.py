"""Output that tells the truth (issue 23): bf16 on a CPU without native bf16 says so, `gauge` and
vector stores leave git clean, and `retrieval-bench --help` imports none of the heavy libraries
(what made it take seconds)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, tool_env

from retrieval_bench.core import paths
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.embedding import backends
from retrieval_bench.embedding.model_source import model_fingerprint, resolve_model
from retrieval_bench.embedding.settings import EmbedSettings

HEAVY = ("torch", "pandas", "numpy", "scipy", "dvc", "sentence_transformers", "pyarrow")
X86_WITHOUT_BF16 = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 avx512f avx512bw avx512_vnni\n"
X86_WITH_AMX = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"


def imported_by(code: str) -> set[str]:
    """The top-level modules a fresh interpreter has imported after running `code`."""
    probe = f"import sys\n{code}\nprint(' '.join(sorted({{name.split('.')[0] for name in sys.modules}})))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=tool_env(), capture_output=True, text=True, check=True
    )
    return set(result.stdout.split())


def test_help_and_import_load_no_heavy_module():
    help_modules = imported_by(
        "from retrieval_bench.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )
    assert set(HEAVY) & help_modules == set()
    assert set(HEAVY) & imported_by("import retrieval_bench; retrieval_bench.__version__") == set()


def test_a_command_still_gets_its_own_arguments(capsys):
    from retrieval_bench.cli import main

    with pytest.raises(SystemExit):
        main(["gauge", "--help"])
    assert "--min-coverage" in capsys.readouterr().out


@pytest.mark.parametrize("path", [paths.GAUGE, "stores/docs.lancedb/data.lance", "data/stores/chroma/chroma.sqlite3"])
def test_gauge_output_and_store_folders_are_ignored_by_git(path):
    ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
    assert ignored.returncode == 0, f"{path} would show up in `git status`"


@pytest.mark.parametrize(
    ("cpuinfo", "settings", "warned"),
    [
        (X86_WITHOUT_BF16, {"backend": "torch", "precision": "bf16", "device": "cpu"}, True),
        (X86_WITH_AMX, {"backend": "torch", "precision": "bf16", "device": "cpu"}, False),
        (X86_WITHOUT_BF16, {"backend": "torch", "precision": "fp32", "device": "cpu"}, False),
    ],
)
def test_bf16_on_a_cpu_without_native_bf16_warns_in_one_line(tmp_path, monkeypatch, capsys, cpuinfo, settings, warned):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fake = tmp_path / "cpuinfo"
    fake.write_text(cpuinfo)
    monkeypatch.setattr(backends, "CPUINFO", fake)
    folder = resolve_model(DEFAULTS["embed"]["model"])
    backends.load_encoder(
        folder, model_fingerprint(folder), EmbedSettings.from_params({**DEFAULTS["embed"], **settings})
    )
    lines = [line for line in capsys.readouterr().err.splitlines() if "bf16" in line]
    if warned:
        assert len(lines) == 1 and lines[0].startswith(
            "embed: warning: embed.precision bf16, but this CPU has no native bf16"
        )
        assert "no speed-up over fp32" in lines[0]
    else:
        assert lines == []


def test_bf16_flags_are_read_from_x86_and_arm_cpuinfo(tmp_path, monkeypatch):
    fake = tmp_path / "cpuinfo"
    monkeypatch.setattr(backends, "CPUINFO", fake)
    assert backends.cpu_flags() is None  # no such file: unknown, so no warning
    fake.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")
    assert "bf16" in backends.cpu_flags()
    fake.write_text(X86_WITH_AMX)
    assert backends.cpu_flags() & backends.BF16_FLAGS == {"avx512_bf16", "amx_bf16"}
