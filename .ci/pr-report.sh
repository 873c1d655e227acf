#!/usr/bin/env bash
# Review a retrieval change in a pull request, as the DVC ecosystem does (CML-style): reproduce the
# branch, pulling every cached output (golden set, embeddings, question cache) from the default
# DVC remote (where one is set) so nothing is recomputed or paid for twice, then write the paired comparison against
# the base branch as Markdown. Used by .github/workflows/retrieval-bench.yml; run it locally too.
#   usage: .ci/pr-report.sh [BASE_REVISION] [REPORT_FILE]
set -euo pipefail
base="${1:-main}"
report="${2:-retrieval-report.md}"
# check_params first: its outputs (stamps of what DVC cannot see) are in no cache, so on a fresh
# clone `dvc repro --pull` would look for them on the remote and a stage that must run would stop
retrieval-bench lock prune   # as make repro: stale dvc.lock entries would say params differ
python -m stages.check_params
if [ -n "$(dvc config core.remote 2>/dev/null)" ]; then
  dvc repro --pull
else  # no remote (a local preview): everything the branch changed is computed here
  dvc repro
fi
retrieval-bench compare "$base" workspace --md > "$report"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  cat "$report" >> "$GITHUB_STEP_SUMMARY"
fi
cat "$report"
