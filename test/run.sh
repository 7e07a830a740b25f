#!/usr/bin/env bash
# The whole suite, tier by tier, ending with one combined "N passed, N failed" line:
#   1. fast tier (test/unit): domain over the real repositories on PGlite, RPC through the router transport,
#      contract and architecture checks; no database server, no Redis, no port; runs once. The
#      domain and RPC files run in one process (--test-isolation=none), one after another, so they
#      share one in-memory PGlite (test/fakes/pglite-store.ts: started once, emptied between
#      tests); the other files run beside them, one process each.
#   The packages' own unit tests (packages/*/test/unit) run in the fast tier too, their tests
#   against a running service (packages/*/test/*.test.ts) in the storage tiers.
#   2. storage and end-to-end tiers (test/store and the rest) twice: on real Postgres + Redis,
#      then on the embedded default (PGlite + in-process twins); the servers and CLIs they start
#      run from a build of this tree made first. (Side by side the two tiers were slower: 45 % of
#      their tests in 12 min, against both tiers in 16.5 min one after the other.)
#   3. a set of end-to-end files (test/pgbouncer-tier.txt) once more on Postgres through a PgBouncer in
#      transaction mode.
#   4. containers (test/container): the service image built (deploy/image/build.sh, its root filesystem
#      reused from the cache), then the dev topology and the production-like one run from it with podman,
#      one file at a time (each starts several containers; side by side they fight for the two cores).
# Every test process loads test/helpers/exit-watchdog.ts: a file whose process outlives its last test by a
# minute (a leaked socket or timer) fails, naming what kept it alive, instead of hanging the run.
# `test/run.sh fast` runs the fast tier alone (npm run test:fast).
# Node's test runner expands the quoted globs itself (Node 22+); TAP output keeps the # pass/# fail lines
# this script adds up.
set -uo pipefail
cd "$(dirname "$0")/.."
# The runtime is the project's pinned Node (package.json's "node" dependency), not the machine's.
export PATH="$PWD/node_modules/.bin:$PATH"
# --liftoff-only: V8 keeps PGlite's WebAssembly on its baseline compiler. Otherwise every process that
# opened an embedded database spends ~1.2 s of CPU at exit finishing background TurboFan compiles no
# one will run (strace: the exit waits for them), on a machine where the suite is CPU-bound. A V8
# flag cannot go in NODE_OPTIONS; the runner passes it to each test file's process, and
# test/helpers/server-process.ts to the servers and CLIs they start.
NODE_FLAGS="--liftoff-only"
log=$(mktemp)
status=0
run() {
  node $NODE_FLAGS --test --test-reporter=tap --test-concurrency=2 --test-timeout=600000 --import tsx --import ./test/helpers/exit-watchdog.ts "$@" 2>&1 | tee -a "$log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}
# Two runs side by side (a core each), their TAP printed one after the other once both have ended.
run_fast() {
  local database others
  database=$(mktemp)
  others=$(mktemp)
  node $NODE_FLAGS --test --test-reporter=tap --test-isolation=none --test-concurrency=1 --test-timeout=600000 --import tsx --import ./test/helpers/exit-watchdog.ts \
    'test/unit/{domain,rpc}/**/*.test.ts' >"$database" 2>&1 &
  local pid=$!
  node $NODE_FLAGS --test --test-reporter=tap --test-concurrency=1 --test-timeout=600000 --import tsx --import ./test/helpers/exit-watchdog.ts \
    'test/unit/!(domain|rpc)/**/*.test.ts' 'packages/*/test/unit/**/*.test.ts' >"$others" 2>&1 || status=1
  wait "$pid" || status=1
  cat "$database" "$others" | tee -a "$log"
  rm -f "$database" "$others"
}
echo "## tier: fast (test/unit)"
run_fast
echo "## tier fast took ${SECONDS} s"
if [ "${1:-all}" != "fast" ]; then
  # The servers and CLIs the tests start run from one build of this tree, as production runs them
  # (node dist/src/main.js), not through tsx: half the CPU per start (test/helpers/server-process.ts).
  export TEST_BUILD_DIR="$PWD/node_modules/.cache/test-build"
  rm -rf "$TEST_BUILD_DIR"
  echo "## build for the tests' child processes: $TEST_BUILD_DIR"
  tsc -p tsconfig.build.json --outDir "$TEST_BUILD_DIR" || status=1
  for backend in postgres embedded; do
    echo "## tier: storage and end-to-end, backend: $backend"
    started=$SECONDS
    TEST_BACKEND=$backend run 'test/!(unit|container)/**/*.test.ts' 'packages/*/test/*.test.ts'
    echo "## tier $backend took $((SECONDS - started)) s"
  done
  # 3. the end-to-end files that cover every feature once more on Postgres, every pool through a
  #    PgBouncer in transaction mode each test process starts (test/helpers/backend.ts, TEST_PGBOUNCER):
  #    non-public schemas, migrations and LISTEN on the direct URL. A subset: the whole tier twice on
  #    Postgres would add ~5 min; these ~3.
  echo "## tier: end-to-end through PgBouncer (transaction mode)"
  started=$SECONDS
  TEST_BACKEND=postgres TEST_PGBOUNCER=1 run $(grep -v '^#' test/pgbouncer-tier.txt)
  echo "## tier pgbouncer took $((SECONDS - started)) s"
  echo "## tier: containers (podman)"
  started=$SECONDS
  run test/container/image.test.ts
  run --test-concurrency=1 'test/container/!(image).test.ts'
  echo "## tier containers took $((SECONDS - started)) s"
fi
# The failures again at the end, where a log that keeps only its tail (CI's) still shows them.
# (A todo test's "not ok ... # TODO" is not a failure.)
if grep -E '^ *not ok ' "$log" | grep -qvE '# TODO'; then
  echo "## failed tests (each with its enclosing suites)"
  grep -E '^ *not ok ' "$log" | grep -vE '# TODO' | head -100
fi
passed=$(awk '/^# pass /{s+=$3} END{print s+0}' "$log")
failed=$(awk '/^# fail /{s+=$3} END{print s+0}' "$log")
rm -f "$log"
[ "$failed" -eq 0 ] || status=1
echo "total: $passed passed, $failed failed, in ${SECONDS} s"
exit $status
