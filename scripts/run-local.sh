#!/usr/bin/env bash
# `make run`: a local service with a demo tenant, key and events. Secrets for this machine are generated
# once into .local/dev.env (gitignored), so keys minted earlier stay valid across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 from the `node` devDependency, whatever the machine's own node is (make does the same).
export PATH="$PWD/node_modules/.bin:$PATH"
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
# The drain delay lets a load balancer stop sending before the listeners close; locally there is none,
# and Ctrl-C should not take five seconds.
export SHUTDOWN_DRAIN_DELAY_MS="${SHUTDOWN_DRAIN_DELAY_MS:-0}"
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

# Ctrl-C, or a SIGTERM to the process group, reaches the service itself, which drains in-flight work and
# exits (a third signal forces it). Passing the signal on would make it a second one, so this script only
# waits for the service, and make for this script.
wait_for_server() {
  while kill -0 "$server" 2>/dev/null; do wait "$server" || true; done
  wait "$server" # its exit status, kept by bash
}
on_stop_signal() {
  # Later signals are the service's to count (the group delivers them to it too); the script ignores
  # them and keeps waiting, so that make returns only once the service has stopped.
  trap '' INT TERM
  echo "run: stopping; the service drains in-flight work first" >&2
  wait_for_server
  exit
}
trap on_stop_signal INT TERM

for _ in $(seq 1 60); do
  curl -fsS "http://127.0.0.1:$INTERNAL_PORT/readyz" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "run: the service exited; see the log above" >&2; exit 1; }
  sleep 0.5
done

if [ ! -f .local/demo-seeded ]; then
  node scripts/seed-demo.ts "http://127.0.0.1:$INTERNAL_PORT" "$ingest_token" demo 300 && touch .local/demo-seeded
fi

base="http://127.0.0.1:$PORT/api/v2/public"
internal="http://127.0.0.1:$INTERNAL_PORT"
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
receiver_port=9000
while port_in_use "$receiver_port"; do receiver_port=$((receiver_port + 1)); done

cat <<TXT

audit-trail is running (api, ingest, relay, worker). Demo tenant: demo
  API key (tenant demo):        $demo_key
  Ingest token (internal port): $ingest_token

Read the trail:
  curl -s -w "\\n" -H "Authorization: Bearer $demo_key" "$base/audit/events?limit=5"
  curl -s -w "\\n" -H "Authorization: Bearer $demo_key" "$base/audit/events?action=phi.read&phi_involved=true&limit=3"
  curl -s -w "\\n" -H "Authorization: Bearer $demo_key" "$base/openapi.json"
  curl -s -w "\\n" "$internal/readyz"

Webhooks, in a second terminal. This local service takes http:// and loopback receivers because
.local/dev.env sets WEBHOOK_ALLOW_HTTP=true and WEBHOOK_ALLOW_PRIVATE_TARGETS=true; leave both unset in
production, where only https receivers on public addresses are accepted.
  cd "$PWD"
  # 1. Register a receiver for phi.* events; the answer holds its signing secret, shown this once only
  curl -s -w "\\n" -X POST -H "Authorization: Bearer $demo_key" -H 'Content-Type: application/json' "$base/audit/webhooks" \\
    -d '{"url":"http://127.0.0.1:$receiver_port/","event_filter":["phi."],"description":"make run walkthrough"}' | tee .local/webhook.json
  # 2. Start the example receiver with that secret (it verifies every signature) and wait until it listens
  WEBHOOK_SECRET=\$(node -p 'require("./.local/webhook.json").secret') PORT=$receiver_port npm run receiver &
  until curl -s -o /dev/null http://127.0.0.1:$receiver_port/; do sleep 0.2; done
  # 3. Write a PHI event: within a second the receiver prints "<time> demo phi.read <event id> (attempt 1)"
  curl -s -w "\\n" -X POST -H "Authorization: Bearer $ingest_token" -H 'Content-Type: application/json' "$internal/internal/v1/events" \\
    -d '{"events":[{"tenant_id":"demo","action":"phi.read","user_id":"u-1","user_role":"clinician","resource_type":"patient_record","resource_id":"p-9","phi_involved":true,"fields_accessed":["diagnosis"],"success":true}]}'
  # 4. Stop the receiver and delete the endpoint
  kill %1
  curl -s -w "\\n" -X DELETE -H "Authorization: Bearer $demo_key" "$base/audit/webhooks/\$(node -p 'require("./.local/webhook.json").endpoint.id')"

Operator CLI (npx runs it on the project's Node 24; the local settings come from .local/dev.env):
  cd "$PWD" && set -a && . .local/dev.env && set +a
  npx audit-trail keys list --tenant demo

Stop with Ctrl-C: the service finishes in-flight work first (a third Ctrl-C forces it).
TXT
wait_for_server
