'use strict';
// Mocha's spec output plus the plain closing line CI reads: "N passed, M failed". Under scripts/run-suite.ts,
// which runs mocha more than once and prints one line for all, the counts go to TEST_SUMMARY_FILE instead.
const { writeFileSync } = require('node:fs');
const Mocha = require('mocha');

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const { passes, failures, pending } = runner.stats;
      if (process.env.TEST_SUMMARY_FILE) {
        writeFileSync(process.env.TEST_SUMMARY_FILE, JSON.stringify({ passes, failures, pending }));
        return;
      }
      const skipped = pending > 0 ? `, ${pending} skipped` : '';
      process.stdout.write(`\n${passes} passed, ${failures} failed${skipped}\n`);
    });
  }
}

module.exports = SummaryReporter;
