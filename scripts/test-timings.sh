#!/usr/bin/env bash
# `make test-timings`: `.ci/run` from a clean clone of HEAD (beside this checkout's ../shared,
# as CI has it), timed step by step with each test's duration, written as a Markdown table to
# benchmarks/results/NAME.md (NAME: the first argument, default test_timings).
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-test_timings}
checkout=$PWD
work=$(mktemp -d /tmp/scaletune-timings.XXXXXX)
git clone --quiet "$checkout" "$work/main"
ln -s "$(cd .. && pwd)/shared" "$work/shared"
mkdir "$work/junit"
commit=$(git rev-parse --short HEAD)
start=$(date +%s.%N)
rc=0
(
  cd "$work/main"
  CI=true SCALETUNE_CI_TIMINGS="$work/steps.tsv" SCALETUNE_JUNIT_DIR="$work/junit" \
    bash .ci/run </dev/null
) >"$work/ci.log" 2>&1 || rc=$?
total=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
tail -n 5 "$work/ci.log"
(cd "$work/main" && "$checkout/.venv/bin/python" "$checkout/scripts/test_timings.py" \
  --steps "$work/steps.tsv" --junit "$work/junit" --total "$total" --commit "$commit" \
  --command "make test-timings NAME=$name" --output "$checkout/benchmarks/results/$name.md")
echo "the run's log: $work/ci.log (exit $rc)"
rm -rf "$work/main/.venv" "$work/main/.bench-venv"  # the log stays; the environments go
exit "$rc"
