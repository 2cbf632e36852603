#!/usr/bin/env bash
# Starts the local PostgreSQL, Redis and NATS (JetStream) the service and its tests use, installing the
# Debian packages when they are absent. Idempotent: a service that already answers is left alone.
# With --test-tools it installs what only the tests and benchmarks need instead (Chromium, promtool, Go):
# `make run` never waits for those.
set -euo pipefail

log() { printf 'services: %s\n' "$*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for_port() {
  local name=$1 port=$2
  for _ in $(seq 1 60); do
    port_open "$port" && return 0
    sleep 0.5
  done
  log "$name did not start listening on 127.0.0.1:$port within 30 s"
  return 1
}

apt_updated=false
ensure_package() {
  local binary=$1 package=$2
  shift 2 # further arguments go to apt-get install
  command -v "$binary" >/dev/null 2>&1 && return 0
  [ -x "$binary" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "$package is not installed and installing it needs root: sudo apt-get install -y $package"
    return 1
  fi
  if [ "$apt_updated" = false ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=true
  fi
  log "installing $package"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" "$package" >/dev/null
}

start_postgres() {
  if port_open 5432; then return 0; fi
  ensure_package pg_ctlcluster postgresql
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  log "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for_port PostgreSQL 5432
}

ensure_postgres_trust() {
  # Local development and tests connect as postgres over TCP without a password.
  if psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1; then return 0; fi
  local hba
  hba=$(su postgres -c "psql -Atc 'show hba_file'")
  log "allowing trust authentication on loopback in $hba"
  sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  su postgres -c "psql -Atc 'select pg_reload_conf()'" >/dev/null
}

start_redis() {
  if port_open 6379; then return 0; fi
  ensure_package redis-server redis-server
  log "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/audit-trail.log
  wait_for_port Redis 6379
}

start_nats() {
  if port_open 4222; then return 0; fi
  ensure_package /usr/sbin/nats-server nats-server
  log "starting NATS with JetStream"
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for_port NATS 4222
}

# The customer portal's end-to-end tests drive Debian's Chromium (test/support/browser.ts).
ensure_browser() {
  ensure_package /usr/bin/chromium chromium
}

# promtool checks and unit-tests the chart's alerting rules (test/chart/monitoring.test.ts). Only the tool is
# used: nothing here starts the package's Prometheus server (without an init system, and under Debian's
# policy-rc.d in containers, installing it starts nothing), and the exporters it recommends are left out.
ensure_promtool() {
  ensure_package promtool prometheus --no-install-recommends
}

# Go's time package reads what the controller sends the Kubernetes API as the API server does
# (test/support/go-kube-time.ts builds test/support/go/kubetime.go with it); only the standard library is used.
# The Go checksum database's note and tlog packages (golang.org/x/mod, Debian's golang-golang-x-mod-dev) verify
# the trail's checkpoints and tiles (test/support/go-tlog-client.ts); the directory stands for the package.
ensure_go() {
  ensure_package go golang-go --no-install-recommends
  ensure_package /usr/share/gocode/src/golang.org/x/mod/sumdb/tlog golang-golang-x-mod-dev --no-install-recommends
}

# The servers the high-availability and broker tests start privately on free ports, never as services: a
# pg_auto_failover formation (test/support/private-ha.ts), PgBouncer (private-pgbouncer.ts), Redis Sentinel
# (private-sentinel.ts) and RabbitMQ (private-rabbitmq.ts). Debian's packages start a service of their own
# where an init system runs; these tests do not use it.
ensure_private_servers() {
  ensure_package /usr/bin/pg_autoctl postgresql-15-auto-failover --no-install-recommends
  ensure_package /usr/sbin/pgbouncer pgbouncer --no-install-recommends
  ensure_package /usr/bin/redis-sentinel redis-sentinel --no-install-recommends
  ensure_package /usr/sbin/rabbitmq-server rabbitmq-server --no-install-recommends
}

if [ "${1:-}" = --test-tools ]; then
  ensure_browser
  ensure_promtool
  ensure_go
  ensure_private_servers
  log "Chromium, promtool, Go, pg_auto_failover, PgBouncer, Redis Sentinel and RabbitMQ are installed"
  exit 0
fi
start_postgres
ensure_postgres_trust
start_redis
start_nats
log "PostgreSQL, Redis and NATS are up"
