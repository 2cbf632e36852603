import { expect } from 'chai';
import { BoundedWarnings } from '../../src/platform/boundedWarnings.ts';
import type { Logger } from '../../src/platform/logger.ts';

/** A logger that keeps what is warned. */
function recordingLog(): { log: Logger; lines: Array<{ fields: Record<string, unknown>; message: string }> } {
  const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const log = { warn: (fields: Record<string, unknown>, message: string) => lines.push({ fields, message }) } as unknown as Logger;
  return { log, lines };
}

describe('bounded warnings', () => {
  it('logs the first warning of a kind at once, then none of that kind for the interval', () => {
    let now = 1_000;
    const warnings = new BoundedWarnings(10_000, () => now);
    const { log, lines } = recordingLog();
    warnings.warn(log, 'pool_full', { code: '53300' }, 'Postgres is full');
    now += 9_999;
    warnings.warn(log, 'pool_full', { code: '53300' }, 'Postgres is full');
    expect(lines).to.deep.equal([{ fields: { code: '53300' }, message: 'Postgres is full' }]);
  });

  it('says how many it left out on the next line, once the interval is over', () => {
    let now = 0;
    const warnings = new BoundedWarnings(10_000, () => now);
    const { log, lines } = recordingLog();
    for (let index = 0; index < 5; index += 1) warnings.warn(log, 'pool_full', { code: '53300' }, 'Postgres is full');
    now = 10_000;
    warnings.warn(log, 'pool_full', { code: '53300' }, 'Postgres is full');
    now = 20_000;
    warnings.warn(log, 'pool_full', { code: '53300' }, 'Postgres is full');
    expect(lines.map((line) => line.fields)).to.deep.equal([{ code: '53300' }, { code: '53300', suppressed: 4 }, { code: '53300' }]);
  });

  it('bounds each kind on its own: one recurring warning does not hide another', () => {
    const warnings = new BoundedWarnings(10_000, () => 0);
    const { log, lines } = recordingLog();
    warnings.warn(log, 'pool_full', {}, 'Postgres is full');
    warnings.warn(log, 'postgres_away', {}, 'Postgres is away');
    warnings.warn(log, 'pool_full', {}, 'Postgres is full');
    expect(lines.map((line) => line.message)).to.deep.equal(['Postgres is full', 'Postgres is away']);
  });
});
