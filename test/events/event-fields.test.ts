import { expect } from 'chai';
import { ACTION_PATTERN, ACTION_PREFIX_PATTERN, TENANT_ID_PATTERN, UUID_PATTERN, monthStartMs } from '../../src/events/eventFields.ts';

/** The field rules ingestion, the read filters and webhook filters share (docs/api.md "Event fields"). */
describe('event field rules', () => {
  it('takes dotted lowercase actions, and refuses what a filter could never match', () => {
    for (const good of ['phi.read', 'admin.key.create', 'login', 'a-b_c.d9']) expect(ACTION_PATTERN.test(good), good).to.equal(true);
    for (const bad of ['PHI.read', 'phi.', '.phi', 'phi..read', '9phi', 'phi read', ''])
      expect(ACTION_PATTERN.test(bad), bad).to.equal(false);
  });

  it('takes an action family ending in a dot as a prefix filter', () => {
    expect(ACTION_PREFIX_PATTERN.test('phi.')).to.equal(true);
    expect(ACTION_PREFIX_PATTERN.test('phi.read')).to.equal(true);
    expect(ACTION_PREFIX_PATTERN.test('phi..')).to.equal(false);
  });

  it('keeps tenant ids fit for NATS subjects: no dots, spaces or wildcards, at most 64 characters', () => {
    for (const good of ['acme', 'Acme-Clinic_2', 'a'.repeat(64)]) expect(TENANT_ID_PATTERN.test(good), good).to.equal(true);
    for (const bad of ['acme.eu', 'acme eu', 'acme*', 'acme>', '-acme', '', 'a'.repeat(65)])
      expect(TENANT_ID_PATTERN.test(bad), bad).to.equal(false);
  });

  it('takes event ids as canonical UUID text of any version', () => {
    expect(UUID_PATTERN.test('0195a1c2-7d00-7000-8000-000000000001')).to.equal(true);
    expect(UUID_PATTERN.test('0195A1C2-7D00-4000-8000-000000000001')).to.equal(true);
    expect(UUID_PATTERN.test('0195a1c27d0070008000000000000001')).to.equal(false);
  });

  it('finds the UTC month an event’s partition holds, in the years 0001-0099 too', () => {
    expect(monthStartMs(Date.UTC(2026, 11, 5, 6, 30))).to.equal(Date.UTC(2026, 11, 1));
    expect(monthStartMs(Date.UTC(2024, 1, 29, 23, 59, 59, 999))).to.equal(Date.UTC(2024, 1, 1));
    const early = Date.parse('0042-03-15T12:00:00.000Z');
    expect(new Date(monthStartMs(early)).toISOString()).to.equal('0042-03-01T00:00:00.000Z');
  });
});
