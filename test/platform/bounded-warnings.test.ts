import { expect } from 'chai';
import { Writable } from 'node:stream';
import { BoundedWarnings } from '../../src/platform/boundedWarnings.ts';
import { createLogger } from '../../src/platform/logger.ts';

/** A logger writing its lines here, as JSON objects. */
function capturedLog(): { log: ReturnType<typeof createLogger>; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger('warn', sink), lines };
}

describe('recurring warnings, logged at most once per interval and kind', () => {
  it('logs the first of a kind at once, leaves out the rest of the interval, and says how many it left out', () => {
    let now = 0;
    const warnings = new BoundedWarnings(10_000, () => now);
    const { log, lines } = capturedLog();
    for (let request = 0; request < 5; request += 1) warnings.warn(log, 'postgres full', { request }, 'refused: Postgres is full');
    now = 10_000;
    warnings.warn(log, 'postgres full', { request: 5 }, 'refused: Postgres is full');
    expect(lines.map(({ request, suppressed, msg }) => ({ request, suppressed, msg }))).to.deep.equal([
      { request: 0, suppressed: undefined, msg: 'refused: Postgres is full' },
      { request: 5, suppressed: 4, msg: 'refused: Postgres is full' },
    ]);
  });

  it('bounds each kind on its own', () => {
    let now = 0;
    const warnings = new BoundedWarnings(10_000, () => now);
    const { log, lines } = capturedLog();
    warnings.warn(log, 'a', {}, 'first a');
    warnings.warn(log, 'b', {}, 'first b');
    warnings.warn(log, 'a', {}, 'second a');
    now = 9_999;
    warnings.warn(log, 'b', {}, 'second b');
    expect(lines.map((line) => line.msg)).to.deep.equal(['first a', 'first b']);
  });

  it('says nothing of suppressed lines when none was left out', () => {
    let now = 0;
    const warnings = new BoundedWarnings(1_000, () => now);
    const { log, lines } = capturedLog();
    warnings.warn(log, 'a', { n: 1 }, 'a');
    now = 5_000;
    warnings.warn(log, 'a', { n: 2 }, 'a');
    expect(lines.map((line) => [line.n, 'suppressed' in line])).to.deep.equal([
      [1, false],
      [2, false],
    ]);
  });
});
