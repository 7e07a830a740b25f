#!/usr/bin/env bash
# Fails when gen/ (and the verifier package's copy, packages/verifier/src/gen) is not exactly what
# `buf generate` makes from proto/ (both are committed, never edited).
set -euo pipefail
cd "$(dirname "$0")/.."
npx buf generate
if ! git diff --quiet -- gen packages/verifier/src/gen || [ -n "$(git ls-files --others --exclude-standard gen packages/verifier/src/gen)" ]; then
  echo "gen/ is stale: run 'npm run generate' and commit the result" >&2
  git status --short gen packages/verifier/src/gen >&2
  exit 1
fi
echo "gen/ is up to date"
