'use strict';
// How long each test file takes, for scripts/run-suite.ts to name the slowest. The suite runs every file in a
// parallel mocha worker, where root hooks run once per file: the root suite then holds that one file. Each
// file's wall time (its hooks included, which the reporter's per-test durations leave out) is appended to
// TEST_TIMINGS_FILE as a line of JSON; without that variable the hooks do nothing. With it goes the longest the
// file's process kept its event loop from turning: many files run the service in the test's own process, and
// a test that computes for seconds at a time (a check parsing thousands of bodies again and again) starves the
// service it tests, which then looks slow or fails its waits.
const { appendFileSync } = require('node:fs');
const { relative } = require('node:path');
const { monitorEventLoopDelay } = require('node:perf_hooks');

const LOOP_DELAY_RESOLUTION_MS = 20;
let startedAt = 0;
let loopDelay;

function fileOf(root) {
  const first = root.suites[0] ?? root.tests[0];
  return first?.file === undefined ? undefined : relative(process.cwd(), first.file);
}

exports.mochaHooks = {
  beforeAll() {
    startedAt = performance.now();
    if (process.env.TEST_TIMINGS_FILE === undefined) return;
    loopDelay = monitorEventLoopDelay({ resolution: LOOP_DELAY_RESOLUTION_MS });
    loopDelay.enable();
  },
  async afterAll() {
    const target = process.env.TEST_TIMINGS_FILE;
    const file = fileOf(this.test.parent);
    if (target === undefined || file === undefined) return;
    // The monitor records a delay when its timer next fires: a file's last test may have held the loop until now.
    await new Promise((resolve) => setTimeout(resolve, LOOP_DELAY_RESOLUTION_MS + 5));
    loopDelay?.disable();
    const longestLoopDelayMs = loopDelay === undefined ? undefined : Math.round(loopDelay.max / 1e6);
    appendFileSync(target, `${JSON.stringify({ file, seconds: (performance.now() - startedAt) / 1000, longestLoopDelayMs })}\n`);
  },
};
