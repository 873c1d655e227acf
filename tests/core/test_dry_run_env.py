"""A paying stage's --dry-run and RETRIEVAL_BENCH_DRY_RUN=1 (how `dvc repro` asks for one) are
read in one place: locking.paid_stage_arguments says whether to dry run, the variable included."""

from __future__ import annotations

import argparse

import pytest

from retrieval_bench.core.locking import DRY_RUN_ENV, paid_stage_arguments


@pytest.mark.parametrize(
    ("argv", "env", "dry_run"),
    [([], None, False), (["--dry-run"], None, True), ([], "1", True), ([], "yes", True), ([], "0", False)],
)
def test_the_flag_or_the_variable_asks_for_a_dry_run(argv, env, dry_run, monkeypatch):
    monkeypatch.delenv(DRY_RUN_ENV, raising=False)
    if env is not None:
        monkeypatch.setenv(DRY_RUN_ENV, env)
    assert paid_stage_arguments(argparse.ArgumentParser(), argv, "dry run", "question cache") is dry_run
