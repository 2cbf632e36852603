#!/usr/bin/env bash
# Runs the given test files only (the project config would add every spec): scripts/mocha-one.sh test/x.test.ts
exec mocha --no-config --extension ts --timeout 20000 --exit "$@"
