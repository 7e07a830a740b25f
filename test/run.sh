#!/usr/bin/env bash
# Runs the whole suite twice: on real Postgres + Redis, then on the embedded default
# (PGlite + in-process stand-in), and ends with one combined "N passed, N failed" line.
# Node 20 neither expands globs nor finds .ts test files itself, hence the find.
set -uo pipefail
cd "$(dirname "$0")/.."
files=$(find test -name '*.test.ts' | sort)
log=$(mktemp)
status=0
for backend in postgres embedded; do
  echo "## backend: $backend"
  TEST_BACKEND=$backend node --test --test-concurrency=2 --test-timeout=180000 --import tsx $files 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
passed=$(awk '/^# pass /{s+=$3} END{print s+0}' "$log")
failed=$(awk '/^# fail /{s+=$3} END{print s+0}' "$log")
rm -f "$log"
[ "$failed" -eq 0 ] || status=1
echo "both backends: $passed passed, $failed failed"
exit $status
