#!/usr/bin/env bash
# `make run`: a local service with a demo tenant, key and events. Secrets for this machine are generated
# once into .local/dev.env (gitignored), so keys minted earlier stay valid across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .local

if [ ! -f .local/dev.env ]; then
  random_hex() { node -e "process.stdout.write(require('node:crypto').randomBytes($1).toString('hex'))"; }
  cat > .local/dev.env <<ENV
DATABASE_URL=postgres://postgres@127.0.0.1:5432/audit_trail
KEY_PEPPER=$(random_hex 32)
SECRET_ENCRYPTION_KEY=$(random_hex 32)
INGEST_TOKENS=$(random_hex 24)
WEBHOOK_ALLOW_HTTP=true
WEBHOOK_ALLOW_PRIVATE_TARGETS=true
ENV
  echo "run: wrote local secrets to .local/dev.env"
fi
set -a
# shellcheck disable=SC1091
. .local/dev.env
set +a
export PORT="${PORT:-8080}" INTERNAL_PORT="${INTERNAL_PORT:-8081}"
ingest_token=${INGEST_TOKENS%%,*}

node dist/cli.js migrate --create-database

# Reuse the demo key while it is active; mint one otherwise.
demo_key=""
if [ -f .local/demo-key ]; then
  demo_key=$(cat .local/demo-key)
  lookup=$(echo "$demo_key" | cut -d_ -f3)
  node dist/cli.js keys list --tenant demo --json | grep -q "\"lookup_id\":\"$lookup\"[^}]*\"state\":\"active\"" || demo_key=""
fi
if [ -z "$demo_key" ]; then
  demo_key=$(AUDIT_ACTOR=make-run node dist/cli.js keys mint --tenant demo --scopes audit:read,audit:export,webhooks:write --description "make run demo key")
  echo "$demo_key" > .local/demo-key
fi

# Every role but the controller, which needs a Kubernetes API server.
node dist/cli.js serve --roles api,ingest,relay,worker &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server' INT TERM

for _ in $(seq 1 60); do
  curl -fsS "http://127.0.0.1:$INTERNAL_PORT/readyz" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "run: the service exited; see the log above" >&2; exit 1; }
  sleep 0.5
done

if [ ! -f .local/demo-seeded ]; then
  node scripts/seed-demo.ts "http://127.0.0.1:$INTERNAL_PORT" "$ingest_token" demo 300 && touch .local/demo-seeded
fi

base="http://127.0.0.1:$PORT/api/v2/public"
cat <<TXT

audit-trail is running (api, ingest, relay, worker). Demo tenant: demo
  API key:  $demo_key

Try:
  curl -s -H "Authorization: Bearer $demo_key" "$base/audit/events?limit=5"
  curl -s -H "Authorization: Bearer $demo_key" "$base/audit/events?action=phi.read&phi_involved=true&limit=3"
  curl -s -H "Authorization: Bearer $demo_key" "$base/openapi.json"
  curl -s "http://127.0.0.1:$INTERNAL_PORT/readyz"

Stop with Ctrl-C.
TXT
wait $server
