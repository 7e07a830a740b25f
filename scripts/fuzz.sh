#!/usr/bin/env bash
# The long property-based fuzzing run (test/fuzz and every other *-fuzz.test.ts). `npm test` runs the same files with
# FUZZ_RUNS=100 (the default of test/fuzz/fuzz-kit.ts); this runs every property with FUZZ_RUNS
# cases (default 5000, the SCIM envelope's pure properties ten times that), one file at a time,
# with no per-file timeout, and prints what the cases reached (FUZZ_VERBOSE=1). Files that start
# a service run on Postgres + Redis and then on the embedded backend; the others once.
#
#   bash scripts/fuzz.sh                                   # every file, both backends
#   FUZZ_RUNS=20000 bash scripts/fuzz.sh test/fuzz/rest-fuzz.test.ts
#   FUZZ_BACKENDS=embedded bash scripts/fuzz.sh
#   FUZZ_SEED=123 FUZZ_PATH="4:0:1" bash scripts/fuzz.sh test/fuzz/rest-fuzz.test.ts   # replay a failure
#   FUZZ_STRICT=1 bash scripts/fuzz.sh                     # known src/ problems (KNOWN_SRC_PROBLEMS) fail too
#
# Every failure prints fast-check's seed and path and the request as sent; each file's suite
# title shows the run's seed. Expects the machine's Postgres and Redis like `npm test`
# (TEST_DATABASE_URL / TEST_REDIS_URL); every file removes the schema, Redis keys and
# directories it created. Exit status: 0 when every file passed.
set -uo pipefail
cd "$(dirname "$0")/.."
# The runtime is the project's pinned Node (package.json's "node" dependency), not the machine's.
export PATH="$PWD/node_modules/.bin:$PATH"
export FUZZ_RUNS=${FUZZ_RUNS:-5000}
export FUZZ_VERBOSE=${FUZZ_VERBOSE:-1}
# test/fuzz, and the fuzz files beside the area they fuzz (test/scim/scim-fuzz.test.ts: the SCIM filter grammar).
# test/fuzz/http2-abuse.test.ts: the rapid-reset attack lasts 10 s here (3 s in npm test).
export RAPID_RESET_MS=${RAPID_RESET_MS:-10000}
if [ "$#" -gt 0 ]; then files=("$@"); else mapfile -t files < <({ find test/fuzz -name '*.test.ts'; find test -path test/fuzz -prune -o -name '*-fuzz.test.ts' -print; } | sort); fi
served=()
pure=()
for file in "${files[@]}"; do
  if [ ! -f "$file" ]; then echo "fuzz.sh: no such file: $file" >&2; exit 2; fi
  if grep -q 'helpers/service' "$file"; then served+=("$file"); else pure+=("$file"); fi
done
status=0
run() {
  local label=$1
  shift
  echo "## fuzz: $label, FUZZ_RUNS=$FUZZ_RUNS: $*"
  local start=$SECONDS
  node --test --test-reporter=tap --test-concurrency=1 --test-timeout=0 --import tsx "$@" || status=1
  echo "## fuzz: $label done in $((SECONDS - start)) s"
}
if [ "${#pure[@]}" -gt 0 ]; then run "no backend" "${pure[@]}"; fi
if [ "${#served[@]}" -gt 0 ]; then
  for backend in ${FUZZ_BACKENDS:-postgres embedded}; do
    TEST_BACKEND=$backend run "backend $backend" "${served[@]}"
  done
fi
[ "$status" -eq 0 ] && echo "## fuzz: passed" || echo "## fuzz: FAILED (see the seed and path above)"
exit $status
