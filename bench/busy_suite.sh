#!/usr/bin/env bash
# The suite (or the test files named) ROUNDS times in a row beside one CPU busy loop per core, as
# on a shared CI machine: tests must not depend on timing margins. Prints each round's last line
# and the load average; exits non-zero at the first failing round.
#   bash bench/busy_suite.sh 5                                   # the whole suite, 5 rounds
#   bash bench/busy_suite.sh 5 tests/test_faults.py tests/test_judge.py
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: bash bench/busy_suite.sh [ROUNDS (a positive integer, default 5)] [TEST PATHS...]"
case "${1:-}" in
  -h|--help) echo "$usage"; exit 0 ;;
esac
rounds=${1:-5}; shift || true
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS '$rounds' is not a positive integer; $usage" >&2; exit 2; }
loops=()
for _ in $(seq "$(nproc)"); do (while :; do :; done) & loops+=($!); done
trap 'kill "${loops[@]}" 2>/dev/null' EXIT
for round in $(seq "$rounds"); do
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python -m pytest -n 2 --dist loadfile -q -p no:cacheprovider "$@" >/tmp/busy_suite.log 2>&1
  status=$?
  echo "round $round: $(tail -n 1 /tmp/busy_suite.log) | load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  [ $status -eq 0 ] || { echo "round $round failed: /tmp/busy_suite.log"; exit $status; }
done
