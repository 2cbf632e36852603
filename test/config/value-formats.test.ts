import { expect } from 'chai';
import {
  booleanFlag,
  commaList,
  deliverySchedule,
  FRAME_ANCESTOR,
  parseDuration,
  parseRetentionPeriod,
} from '../../src/config/valueFormats.ts';
import { isAtLeast } from '../../src/lifecycle/retentionRules.ts';

/** The formats of environment variables (docs/configuration.md) and of retention periods (RetentionPolicy, RETENTION_DEFAULT). */
describe('configuration value formats', () => {
  it('reads durations in ms, s, m, h and d, fractions too, and nothing else', () => {
    expect(['250ms', '5s', '1.5s', '1m', '2h', '400d'].map(parseDuration)).to.deep.equal([
      250, 5_000, 1_500, 60_000, 7_200_000, 34_560_000_000,
    ]);
    for (const wrong of ['5', '5 s', '-5s', '5sec', '1mo', '', 's']) expect(parseDuration(wrong), wrong).to.equal(undefined);
  });

  it('reads a delivery schedule as its delays, refusing it whole for one bad entry', () => {
    expect(deliverySchedule.parse('1m, 5m,30m,2h')).to.deep.equal([60_000, 300_000, 1_800_000, 7_200_000]);
    const refused = deliverySchedule.safeParse('1m,soon');
    expect(refused.success).to.equal(false);
    expect(refused.error?.issues[0]?.message).to.equal('must be a comma-separated list of durations such as 1m,5m,30m,2h');
  });

  it('reads flags as true or false only, and lists without empty entries', () => {
    expect(['true', '1', 'false', '0', ''].map((value) => booleanFlag.parse(value))).to.deep.equal([true, true, false, false, false]);
    expect(booleanFlag.safeParse('yes').success).to.equal(false);
    expect(commaList.parse(' a, b,,c ,')).to.deep.equal(['a', 'b', 'c']);
  });

  it('takes frame ancestors that cannot end the CSP directive or add another', () => {
    for (const good of ["'self'", 'https://portal.example.com', 'https://*.example.com:8443'])
      expect(FRAME_ANCESTOR.test(good), good).to.equal(true);
    for (const bad of ['https://a.example.com; script-src *', '*', 'https://a.example.com/path', "'none'"])
      expect(FRAME_ANCESTOR.test(bad), bad).to.equal(false);
  });
});

describe('retention periods', () => {
  it('reads days, months and years (months as mo), years as twelve months', () => {
    expect(parseRetentionPeriod('30d')).to.deep.equal({ text: '30d', months: 0, days: 30 });
    expect(parseRetentionPeriod('18mo')).to.deep.equal({ text: '18mo', months: 18, days: 0 });
    expect(parseRetentionPeriod('6y')).to.deep.equal({ text: '6y', months: 72, days: 0 });
  });

  it('refuses a bare m (minutes everywhere else), zero, leading zeros, and more than 100 years', () => {
    for (const wrong of ['6m', '0d', '06y', '101y', '1201mo', '36601d', '1w', ''])
      expect(parseRetentionPeriod(wrong), wrong).to.equal(undefined);
    // 100 years is allowed in each unit, as the message says.
    expect(parseRetentionPeriod('100y')?.months).to.equal(1_200);
    expect(parseRetentionPeriod('99y')?.months).to.equal(1_188);
    expect(parseRetentionPeriod('1200mo')?.months).to.equal(1_200);
    expect(parseRetentionPeriod('36600d')?.days).to.equal(36_600);
  });

  it('lets a locked policy only lengthen: a year is twelve months, and 365 days is not at least a year', () => {
    const period = (text: string) => parseRetentionPeriod(text)!;
    expect(isAtLeast(period('1y'), period('12mo'))).to.equal(true);
    expect(isAtLeast(period('12mo'), period('1y'))).to.equal(true);
    expect(isAtLeast(period('365d'), period('1y'))).to.equal(false);
    expect(isAtLeast(period('372d'), period('1y'))).to.equal(true);
    expect(isAtLeast(period('1mo'), period('31d'))).to.equal(false);
    expect(isAtLeast(period('2mo'), period('31d'))).to.equal(true);
    expect(isAtLeast(period('6y'), period('7y'))).to.equal(false);
  });
});
