'use strict';
// How long each test file takes, for scripts/run-suite.ts to name the slowest. The suite runs every file in a
// parallel mocha worker, where root hooks run once per file: the root suite then holds that one file. Each
// file's wall time (its hooks included, which the reporter's per-test durations leave out) is appended to
// TEST_TIMINGS_FILE as a line of JSON; without that variable the hooks do nothing.
const { appendFileSync } = require('node:fs');
const { relative } = require('node:path');

let startedAt = 0;

function fileOf(root) {
  const first = root.suites[0] ?? root.tests[0];
  return first?.file === undefined ? undefined : relative(process.cwd(), first.file);
}

exports.mochaHooks = {
  beforeAll() {
    startedAt = performance.now();
  },
  afterAll() {
    const target = process.env.TEST_TIMINGS_FILE;
    const file = fileOf(this.test.parent);
    if (target === undefined || file === undefined) return;
    appendFileSync(target, `${JSON.stringify({ file, seconds: (performance.now() - startedAt) / 1000 })}\n`);
  },
};
