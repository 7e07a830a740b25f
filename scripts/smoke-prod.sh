#!/usr/bin/env bash
# The production start, checked end to end: `npm run build` compiles src/ and gen/ to dist/, then
# `node dist/src/main.js` (npm run start:prod, no tsx) serves on the embedded default in a
# throwaway DATA_DIR: health, the operator's Seed through the compiled CLI (npm run cli:prod), a client_credentials token for the seeded
# admin, and an authenticated read with it. Exits non-zero at the first step that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# The runtime is the project's pinned Node (package.json's "node" dependency), not the machine's.
export PATH="$PWD/node_modules/.bin:$PATH"

npm run -s build
data_dir="$(mktemp -d)"
port="${SMOKE_PORT:-18181}"
base="http://127.0.0.1:${port}"
DATA_DIR="$data_dir" PORT="$port" HOST=127.0.0.1 LOG_LEVEL=warn node dist/src/main.js &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$data_dir"' EXIT

for _ in $(seq 1 60); do
  curl -fs "$base/healthz" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { echo "smoke: the compiled server exited" >&2; exit 1; }
  sleep 0.5
done
curl -fs "$base/healthz" | jq -e '.status == "ok"' >/dev/null

# The compiled operator CLI (npm run cli:prod), finding the running server through DATA_DIR.
seeded="$(DATA_DIR="$data_dir" npm run -s cli:prod -- seed)"
client_id="$(jq -er .clientId <<<"$seeded")"
client_secret="$(jq -er .clientSecret <<<"$seeded")"

access_token="$(curl -fs -X POST "$base/v2/auth/oauth2-token" \
  --data-urlencode grant_type=client_credentials --data-urlencode "client_id=$client_id" --data-urlencode "client_secret=$client_secret" |
  jq -er .access_token)"
curl -fs "$base/v2/api-users?limit=5" -H "authorization: Bearer $access_token" | jq -e '.apiUsers | length >= 1' >/dev/null
echo "smoke: compiled server and CLI OK (health, seed, token, authenticated read) on $base"
