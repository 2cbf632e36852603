'use strict';
// Mocha's spec output plus the plain closing line CI reads: "N passed, M failed". Under scripts/run-suite.ts,
// which runs mocha more than once and prints one line for all, the counts go to TEST_SUMMARY_FILE instead,
// with each failure's title and the start of its message: the suite prints them again just above that line,
// where a reader of only the end of the output (CI's record keeps the tail) still finds what failed and why.
const { writeFileSync } = require('node:fs');
const Mocha = require('mocha');

// Enough of a message for its reason and the first lines of what a test adds to it (a monitor's record, a
// stream's row), short enough that three failures fit in the tail CI keeps.
const MESSAGE_LINES = 6;
const LINE_CHARACTERS = 240;

function startOf(message) {
  return String(message ?? '')
    .split('\n')
    .slice(0, MESSAGE_LINES)
    .map((line) => (line.length > LINE_CHARACTERS ? `${line.slice(0, LINE_CHARACTERS)}…` : line));
}

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const failed = [];
    runner.on(Mocha.Runner.constants.EVENT_TEST_FAIL, (test, error) => {
      failed.push({ title: test.fullTitle(), file: test.file, message: startOf(error?.message) });
    });
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const { passes, failures, pending } = runner.stats;
      if (process.env.TEST_SUMMARY_FILE) {
        writeFileSync(process.env.TEST_SUMMARY_FILE, JSON.stringify({ passes, failures, pending, failed }));
        return;
      }
      const skipped = pending > 0 ? `, ${pending} skipped` : '';
      process.stdout.write(`\n${passes} passed, ${failures} failed${skipped}\n`);
    });
  }
}

module.exports = SummaryReporter;
