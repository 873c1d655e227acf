"""The install sizes the README and the docs home state are those measured in docs/how-to/install.md
(`du -sm` of each profile's venv, in MiB), rounded to GiB: one figure, not two."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def measured_gib() -> tuple[str, str]:
    """(minimal, test) profile sizes from install.md's table, as GiB with one decimal."""
    table = (ROOT / "docs" / "how-to" / "install.md").read_text(encoding="utf-8")
    sizes = [
        int(re.search(rf"^\| `make {target}` \|[^|]*\| ([\d,]+) MiB", table, re.M)[1].replace(",", ""))
        for target in ("repro", "test")
    ]
    minimal, full = (f"{size / 1024:.1f}" for size in sizes)
    return minimal, full


def test_readme_and_docs_home_state_the_measured_install_sizes():
    minimal, full = measured_gib()
    for page in ("README.md", "docs/index.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert f"({minimal} GiB minimal, {full} GiB with everything)" in text, page
