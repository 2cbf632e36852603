# Node 24 comes from the `node` devDependency: node_modules/.bin goes first so npm scripts, tsc and mocha
# run on it rather than on the machine's older /usr/bin/node. From an empty environment (`env -i make test`,
# a CI runner, cron) PATH is unset, and the system's directories stand in for it: npm, psql and tar are there.
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/.bin:$(or $(PATH),/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
# Likewise HOME, from the user's account: without it helm and kubectl in the tests wrote their discovery cache
# to ./.kube in the clone, which the next `make lint` then refused to format.
export HOME ?= $(shell getent passwd "$$(id -u)" | cut -d: -f6)

.PHONY: install build services test-tools migrate run clean-local test bench lint format crds client-package clean

# npm runs on the machine's Node (often older than 24), the project on the node devDependency's: npm's
# EBADENGINE warnings compare the one with packages meant for the other, and are not true of how they run.
# Those lines are dropped; the rest of npm's output, and its exit status, pass.
node_modules/.installed: package.json package-lock.json
	set -o pipefail; npm ci --no-audit --no-fund 2>&1 | { grep -v '^npm warn EBADENGINE' || true; }
	@touch $@

install: node_modules/.installed

# What each build reads. A build whose inputs are all older than its stamp is not run again: an unchanged tree
# starts with `make run` in seconds instead of compiling everything anew.
SERVICE_SOURCES := $(shell find src portal scripts/build-portal.ts scripts/build-api-reference.ts tsconfig.json tsconfig.build.json -type f)
CLIENT_SOURCES := $(shell find src/client packages/client/package.json packages/client/tsconfig.json tsconfig.json -type f)

# The service into dist/ (the customer portal's assets into dist/portal, scripts/build-portal.ts).
dist/.built: node_modules/.installed $(SERVICE_SOURCES)
	npm run build
	@touch $@

# The customer client package (src/client, no dependencies) into packages/client/dist.
packages/client/dist/.built: node_modules/.installed $(CLIENT_SOURCES)
	npm run build --prefix packages/client
	@touch $@

build: dist/.built packages/client/dist/.built

# The customer CLI and client as a release artifact, dist/release/audit-trail-client-<version>.tgz: what a
# customer installs outside a clone (docs/cli.md "Installing"). It packs the build above (the package's own
# build script) rather than let npm pack's prepack build it again: that would empty packages/client/dist while
# the suite's CLI tests run from it. The service's package leaves dist/release out (package.json "files").
client-package: packages/client/dist/.built
	mkdir -p dist/release
	cd packages/client && npm pack --ignore-scripts --pack-destination ../../dist/release

# Types (tsc), then format and lint rules (Biome, biome.jsonc), then unused files, exports and dependencies
# (knip, knip.jsonc): the same check CI runs through `make test`.
lint: install
	tsc -p tsconfig.json --noEmit
	tsc -p portal/tsconfig.json
	biome ci --colors=off --max-diagnostics=50 .
	knip --no-progress

# Rewrites the tree in the project's format and applies Biome's safe fixes.
format: install
	biome check --write .

# The servers the service needs: Postgres, Redis and NATS (make run).
services:
	bash scripts/services.sh

# What only the tests and benchmarks use besides the servers: Chromium, promtool, Go, and the servers the
# high-availability and broker tests start privately (pg_auto_failover, PgBouncer, Redis Sentinel, RabbitMQ).
test-tools:
	bash scripts/services.sh --test-tools

migrate: build services
	node dist/cli.js migrate

# One command from a fresh machine to a running service with a demo tenant, key and events.
run: build services
	bash scripts/run-local.sh

# Removes what `make run` made for this clone, and only that: its database, NATS streams and rate-limit
# counters on the shared servers (named in .local/dev.env), then .local/ itself. Stop make run first.
clean-local: install
	node scripts/clean-local.ts

# The suite's files are named by scripts/run-suite.ts, not in .mocharc.json: mocha appends the files given on its
# command line to the configured spec, so `npx mocha test/one.test.ts` would run the whole suite with that file in
# it. It runs the files in parallel mocha workers (TEST_JOBS, default 3) and prints one closing line for all.
test: build services test-tools lint
	node scripts/run-suite.ts

bench: build services test-tools
	node bench/run.ts

# CRDs in crds/ and charts/audit-trail/crds/, generated from src/controller/resources.ts.
crds: install
	node scripts/generate-crds.ts

clean:
	rm -rf dist packages/client/dist node_modules
