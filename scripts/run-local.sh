#!/usr/bin/env bash
# `make run`: a local service with a demo tenant, key and events, every role but the controller. Secrets for
# this clone are generated once into .local/dev.env (gitignored), so keys minted earlier stay valid across runs.
#
# Each clone is a deployment of its own on the machine's shared Postgres, NATS and Redis: its database, NATS
# namespace and rate-limit prefix are named after the clone's path (written into .local/dev.env on the first
# run and kept), so two clones never share data, streams or keys. `make clean-local` removes them.
# RUN_LOCAL_DIR puts the local state elsewhere than .local (the test of this script does), and so names another
# deployment.
set -euo pipefail
cd "$(dirname "$0")/.."
# Node 24 from the `node` devDependency, whatever the machine's own node is (make does the same).
export PATH="$PWD/node_modules/.bin:${PATH:-/usr/local/bin:/usr/bin:/bin}"
repository=$PWD
state_dir=${RUN_LOCAL_DIR:-$repository/.local}
mkdir -p "$state_dir"
state_dir=$(cd "$state_dir" && pwd)
# How the printed commands name the state directory: relative inside the clone, where they `cd` first.
if [ "$state_dir" = "$repository/.local" ]; then state=.local; else state=$state_dir; fi
env_file=$state_dir/dev.env

# The deployment's name: the clone's directory name, readable in psql and NATS listings, and a hash of the
# state directory's path, which keeps two clones of the same name apart.
clone=$(basename "$repository" | tr '[:upper:]' '[:lower:]' | tr -c 'a-z0-9\n' '_' | cut -c1-20)
deployment="local_${clone}_$(printf '%s' "$state_dir" | sha256sum | cut -c1-8)"

random_hex() { node -e "process.stdout.write(require('node:crypto').randomBytes($1).toString('hex'))"; }
# An Ed25519 private key in PEM on one line, `\n` for its line breaks (SEAL_SIGNING_KEY accepts that form).
signing_key() {
  node -e 'const { generateKeyPairSync } = require("node:crypto");
    process.stdout.write(generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).trim().replaceAll("\n", "\\n"))'
}
isolation_settings() {
  cat <<ENV
DATABASE_URL=postgres://postgres@127.0.0.1:5432/audit_trail_$deployment
NATS_NAMESPACE=$deployment
RATE_LIMIT_KEY_PREFIX=audit-trail:$deployment:rl
ENV
}

if [ ! -f "$env_file" ]; then
  {
    isolation_settings
    echo "KEY_PEPPER=$(random_hex 32)"
    echo "SECRET_ENCRYPTION_KEY=$(random_hex 32)"
    echo "INGEST_TOKENS=$(random_hex 24)"
    echo "SEAL_SIGNING_KEY='$(signing_key)'"
    echo "OPERATOR_TOKENS=$(random_hex 24)"
    echo "WEBHOOK_ALLOW_HTTP=true"
    echo "WEBHOOK_ALLOW_PRIVATE_TARGETS=true"
  } > "$env_file"
  echo "run: wrote local secrets to $state/dev.env"
fi
# A dev.env of an earlier version: it shared the database audit_trail and the un-namespaced streams with every
# other clone, and ran no sealer. This clone moves to its own (the old database is left alone: it may hold
# other clones' data), so the demo key and events are made again there.
if ! grep -q '^NATS_NAMESPACE=' "$env_file"; then
  sed -i '/^DATABASE_URL=postgres:\/\/postgres@127.0.0.1:5432\/audit_trail$/d' "$env_file"
  grep -q '^DATABASE_URL=' "$env_file" && isolation_settings | grep -v '^DATABASE_URL=' >> "$env_file" || isolation_settings >> "$env_file"
  rm -f "$state_dir/demo-key" "$state_dir/demo-seeded"
  echo "run: this clone now has a database and NATS namespace of its own ($deployment), recorded in $state/dev.env"
fi
if ! grep -q '^SEAL_SIGNING_KEY=' "$env_file"; then
  echo "SEAL_SIGNING_KEY='$(signing_key)'" >> "$env_file"
  echo "run: added a tree-head signing key (SEAL_SIGNING_KEY) to $state/dev.env"
fi
if ! grep -q '^OPERATOR_TOKENS=' "$env_file"; then
  echo "OPERATOR_TOKENS=$(random_hex 24)" >> "$env_file"
  echo "run: added an operator token (OPERATOR_TOKENS, for the internal redaction route) to $state/dev.env"
fi
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a
database=${DATABASE_URL##*/}

# 8080/8081 unless told otherwise; when another clone's `make run` holds them, the next free pair.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ -z "${PORT:-}" ] && [ -z "${INTERNAL_PORT:-}" ]; then
  PORT=8080
  while port_in_use "$PORT" || port_in_use $((PORT + 1)); do PORT=$((PORT + 10)); done
  INTERNAL_PORT=$((PORT + 1))
  [ "$PORT" = 8080 ] || echo "run: 8080 or 8081 is taken (another make run?): using $PORT and $INTERNAL_PORT"
fi
export PORT="${PORT:-8080}" INTERNAL_PORT="${INTERNAL_PORT:-8081}"
# Customer portal links (docs/portal.md) start with it.
export PUBLIC_BASE_URL="${PUBLIC_BASE_URL:-http://127.0.0.1:$PORT}"
# The drain delay lets a load balancer stop sending before the listeners close; locally there is none,
# and Ctrl-C should not take five seconds.
export SHUTDOWN_DRAIN_DELAY_MS="${SHUTDOWN_DRAIN_DELAY_MS:-0}"
# Every event is sealed within a second, so the integrity commands below work as soon as an event is written.
export SEAL_INTERVAL="${SEAL_INTERVAL:-1s}"
ingest_token=${INGEST_TOKENS%%,*}
operator_token=${OPERATOR_TOKENS%%,*}

# What a warm start needs to know before the service starts, asked with one psql in a few milliseconds (a Node
# process takes most of a second, and the CPU the service is starting on): whether the database holds every
# migration, and whether the demo key is still active with every scope the docs' local commands use (a key of
# an earlier version lacks portal:sessions or streams:write). On a first run there is no database yet.
demo_scopes=audit:export,audit:read,portal:sessions,streams:write,webhooks:write
demo_key=$(cat "$state_dir/demo-key" 2>/dev/null || true)
lookup=$(echo "$demo_key" | cut -d_ -f3)
[[ "$lookup" =~ ^[0-9a-f]{8}$ ]] || lookup=none
ready_check() {
  psql "$DATABASE_URL" -tA -F ' ' -c "SELECT (SELECT count(*) FROM api_keys WHERE lookup_id = '$lookup' AND tenant_id = 'demo'
      AND revoked_at IS NULL AND scopes @> string_to_array('$demo_scopes', ',')),
    (SELECT string_agg(name, ' ' ORDER BY version) FROM audit_schema_migrations)" 2>/dev/null || true
}
checked=$(ready_check)
if [ "${checked#* }" != "$(cd migrations && echo *.sql)" ]; then
  node dist/cli.js migrate --create-database
  checked=$(ready_check)
fi

# Every role but the controller, which needs a Kubernetes API server. It starts while a demo key is minted,
# if one is needed.
roles=api,ingest,relay,worker,sealer,streams
node dist/cli.js serve --roles "$roles" &
server=$!

if [ "${checked%% *}" != 1 ]; then
  demo_key=$(AUDIT_ACTOR=make-run node dist/cli.js keys mint --tenant demo --scopes "$demo_scopes" --description "make run demo key")
  echo "$demo_key" > "$state_dir/demo-key"
fi

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

for _ in $(seq 1 300); do
  curl -fsS "http://127.0.0.1:$INTERNAL_PORT/readyz" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "run: the service exited; see the log above" >&2; exit 1; }
  sleep 0.1
done

if [ ! -f "$state_dir/demo-seeded" ]; then
  node scripts/seed-demo.ts "http://127.0.0.1:$INTERNAL_PORT" "$ingest_token" demo 300 && touch "$state_dir/demo-seeded"
fi

base="http://127.0.0.1:$PORT/api/v2/public"
internal="http://127.0.0.1:$INTERNAL_PORT"
# A customer portal link for the demo tenant, as a platform's backend mints one: it opens once, for an hour.
# Minting it records admin.portal_session.create, so it comes before the wait for the seal below.
portal_request='{"ttl_s":3600,"capabilities":["audit:read","audit:export","webhooks:write","streams:write"]}'
portal_link() {
  curl -fsS -X POST -H "Authorization: Bearer $demo_key" -H 'Content-Type: application/json' "$base/portal/sessions" -d "$portal_request" |
    sed -n 's/.*"url":"\([^"]*\)".*/\1/p' | grep .
}
portal_url=$(portal_link || echo "(could not mint one: see the log above)")
# The integrity commands below need every event so far sealed, not only a first signed head (the demo key's
# admin.key.create gets one before the demo events are even written), or the export they verify holds an
# event without its proof: waited for, on every start (a restart mints a link too), until the demo tenant's
# signed tree holds as many leaves as the tenant has events. It takes a SEAL_INTERVAL or two.
# The service's JSON is read with sed: Node would take half a second each time.
demo_read() { curl -fsS -H "Authorization: Bearer $demo_key" "$base$1" 2>/dev/null | sed -n "s/.*\"$2\": *\([0-9]*\).*/\1/p"; }
for _ in $(seq 1 120); do
  counted=$(demo_read /audit/events/count count)
  sealed=$(demo_read /audit/integrity/tree-head tree_size)
  [ -n "$counted" ] && [ -n "$sealed" ] && [ "$sealed" -ge "$counted" ] && break
  sleep 0.5
done
receiver_port=9000
while port_in_use "$receiver_port"; do receiver_port=$((receiver_port + 1)); done
# Reads one JSON document on stdin and prints a member of it (the machine's own node is enough).
json() { printf "node -p 'JSON.parse(require(\"fs\").readFileSync(0, \"utf8\"))%s'" "$1"; }

cat <<TXT

audit-trail is running: $(echo "$roles" | sed 's/,/, /g') (every role but the Kubernetes controller).
  Demo tenant:                  demo
  API key (tenant demo):        $demo_key
  Ingest token (internal port): $ingest_token
  Operator token (internal):    $operator_token
  This clone's deployment:      database $database, NATS namespace $NATS_NAMESPACE (make clean-local removes them)

Customer portal for tenant demo (docs/portal.md): open this link in a browser. It opens once, for an hour:
  $portal_url
  # Another link, when this one is used:
  curl -s -X POST -H "Authorization: Bearer $demo_key" -H 'Content-Type: application/json' "$base/portal/sessions" -d '$portal_request' | $(json '.url')

Read the trail:
  curl -s -w "\\n" -H "Authorization: Bearer $demo_key" "$base/audit/events?limit=5"
  curl -s -w "\\n" -H "Authorization: Bearer $demo_key" "$base/audit/events?action=phi.read&phi_involved=true&limit=3"
  curl -s -w "\\n" -H "Authorization: Bearer $demo_key" "$base/openapi.json"
  curl -s -w "\\n" "$internal/readyz"

Tamper evidence: every event is sealed into the tenant's Merkle tree within a second here (SEAL_INTERVAL=$SEAL_INTERVAL),
and tree heads are signed with the Ed25519 key in $state/dev.env. Keep a head, prove an event, verify an export offline:
  cd "$PWD"
  # 1. Keep the latest signed tree head, and the public keys that sign heads
  curl -s -H "Authorization: Bearer $demo_key" "$base/audit/integrity/tree-head" | tee $state/kept-head.json; echo
  curl -s -H "Authorization: Bearer $demo_key" "$base/audit/integrity/keys" > $state/keys.json
  # 2. The inclusion proof of the newest phi.read event
  EVENT_ID=\$(curl -s -H "Authorization: Bearer $demo_key" "$base/audit/events?action=phi.read&limit=1" | $(json '.events[0].event_id'))
  curl -s -w "\\n" -H "Authorization: Bearer $demo_key" "$base/audit/events/\$EVENT_ID/proof"
  # 3. Export the trail with proofs, and the consistency proof from the kept head to the export's head
  curl -s -X POST -H "Authorization: Bearer $demo_key" -H 'Content-Type: application/json' "$base/audit/export?format=ndjson&proofs=true" -d '{}' > $state/export.ndjson
  FIRST=\$($(json '.tree_size') < $state/kept-head.json) SECOND=\$(head -n 1 $state/export.ndjson | $(json '.tree_head.tree_size'))
  curl -s -H "Authorization: Bearer $demo_key" "$base/audit/integrity/consistency?first=\$FIRST&second=\$SECOND" > $state/consistency.json
  # 4. Verify offline: every event's proof, the heads' signatures, and that the kept head is a prefix of the export's
  npx audit-trail-client verify --export $state/export.ndjson --public-key $state/keys.json --tree-head $state/kept-head.json --consistency $state/consistency.json

The customer CLI (docs/cli.md), in a second terminal: read and follow the trail, and forward live events to
a server on your machine signed like webhook deliveries (Ctrl-C stops tail and listen):
  cd "$PWD" && export AUDIT_TRAIL_URL=$base AUDIT_TRAIL_API_KEY=$demo_key
  npx audit-trail-client events list --action phi.read --limit 5
  npx audit-trail-client events tail --follow
  npx audit-trail-client listen --forward-to http://127.0.0.1:$receiver_port/

Webhooks, in a second terminal. This local service takes http:// and loopback receivers because
$state/dev.env sets WEBHOOK_ALLOW_HTTP=true and WEBHOOK_ALLOW_PRIVATE_TARGETS=true; leave both unset in
production, where only https receivers on public addresses are accepted.
  cd "$PWD"
  # 1. Register a receiver for phi.* events; the answer holds its signing secret, shown this once only
  curl -s -w "\\n" -X POST -H "Authorization: Bearer $demo_key" -H 'Content-Type: application/json' "$base/audit/webhooks" \\
    -d '{"url":"http://127.0.0.1:$receiver_port/","event_filter":["phi."],"description":"make run walkthrough"}' | tee $state/webhook.json
  # 2. Start the example receiver with that secret (it verifies every signature) and wait until it listens
  WEBHOOK_SECRET=\$($(json '.secret') < $state/webhook.json) PORT=$receiver_port npm run receiver &
  until curl -s -o /dev/null http://127.0.0.1:$receiver_port/; do sleep 0.2; done
  # 3. Write a PHI event: within a second the receiver prints "<time> demo phi.read <event id> (attempt 1)"
  curl -s -w "\\n" -X POST -H "Authorization: Bearer $ingest_token" -H 'Content-Type: application/json' "$internal/internal/v1/events" \\
    -d '{"events":[{"tenant_id":"demo","action":"phi.read","user_id":"u-1","user_role":"clinician","resource_type":"patient_record","resource_id":"p-9","phi_involved":true,"fields_accessed":["diagnosis"],"success":true}]}'
  # 4. Stop the receiver and delete the endpoint
  kill %1
  curl -s -w "\\n" -X DELETE -H "Authorization: Bearer $demo_key" "$base/audit/webhooks/\$($(json '.endpoint.id') < $state/webhook.json)"

The commands of docs/*.md (webhooks, log streams, retention and redaction) run here as written, with these variables;
the demo key holds every scope they use (audit:read, audit:export, webhooks:write, streams:write, portal:sessions):
  export BASE=$base KEY=$demo_key INTERNAL_URL=$internal OPERATOR_TOKEN=$operator_token

Operator CLI (npx runs it on the project's Node 24; the local settings come from $state/dev.env):
  cd "$PWD" && set -a && . $state/dev.env && set +a
  npx audit-trail keys list --tenant demo
  npx audit-trail integrity check --tenant demo

Stop with Ctrl-C: the service finishes in-flight work first (a third Ctrl-C forces it).
TXT
wait_for_server
