import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { expect } from 'chai';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { OCSF_CLASSES, OCSF_VERSION, toOcsf, type ServedEvent } from '../../src/streams/ocsf.ts';
import { eventRecord } from '../../src/streams/records.ts';
import { newEvent } from '../support/events.ts';

const FIXTURES = join(import.meta.dirname, '../fixtures/ocsf-1.3.0');
const SCHEMA_OF_CLASS: Record<number, string> = {
  3001: 'account_change',
  3002: 'authentication',
  3004: 'entity_management',
  6003: 'api_activity',
  6005: 'datastore_activity',
};

/** The class schemas of test/fixtures/ocsf-1.3.0 (written from OCSF 1.3.0, see its README). */
function validators() {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  for (const file of readdirSync(FIXTURES).filter((name) => name.endsWith('.schema.json'))) {
    ajv.addSchema(JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')));
  }
  return (classUid: number) => ajv.getSchema(`ocsf-1.3.0/${SCHEMA_OF_CLASS[classUid]}`)!;
}

/** A served document and its parsed event, as the API serves them. */
function served(overrides: Parameters<typeof newEvent>[0] = {}): { document: string; event: ServedEvent } {
  const stored = newEvent({ occurredAtMs: Date.parse('2026-11-02T08:00:00.123Z'), ...overrides });
  const document = renderEventDocument(stored, formatTimestamp(stored.occurredAtMs));
  return { document, event: JSON.parse(document) as ServedEvent };
}

describe('the ocsf stream format', () => {
  const validatorOf = validators();

  /** The table of docs/streams.md, one row per case: action (and what else decides) → class and activity. */
  const table = [
    { action: 'phi.read', expected: [6005, 1, 'Read'] },
    { action: 'phi.query', expected: [6005, 4, 'Query'] },
    { action: 'phi.export', expected: [6005, 1, 'Read'] },
    { action: 'phi.decrypt', expected: [6005, 10, 'Decrypt'] },
    { action: 'phi.annotate', expected: [6005, 99, 'Other'] },
    { action: 'claims.read', phiInvolved: true, expected: [6005, 1, 'Read'] },
    { action: 'auth.login', phiInvolved: false, expected: [3002, 1, 'Logon'] },
    { action: 'portal.session.logout', phiInvolved: false, success: false, expected: [3002, 2, 'Logoff'] },
    { action: 'admin.user.create', phiInvolved: false, resourceType: 'user', expected: [3001, 1, 'Create'] },
    { action: 'admin.user.password_reset', phiInvolved: false, resourceType: 'user', expected: [3001, 4, 'Password Reset'] },
    { action: 'admin.key.create', phiInvolved: false, resourceType: 'api_key', expected: [3004, 1, 'Create'] },
    { action: 'admin.key.revoke', phiInvolved: false, resourceType: 'api_key', expected: [3004, 9, 'Disable'] },
    { action: 'admin.webhook.rotate_secret', phiInvolved: false, resourceType: 'webhook_endpoint', expected: [3004, 3, 'Update'] },
    { action: 'admin.stream.pause', phiInvolved: false, resourceType: 'log_stream', expected: [3004, 12, 'Suspend'] },
    { action: 'audit.export', phiInvolved: false, resourceType: 'audit_trail', expected: [6003, 2, 'Read'] },
    { action: 'billing.invoice.update', phiInvolved: false, resourceType: 'invoice', expected: [6003, 3, 'Update'] },
    { action: 'billing.invoice.approve', phiInvolved: false, resourceType: 'invoice', expected: [6003, 99, 'Other'] },
  ] as const;

  for (const row of table) {
    it(`maps ${row.action}${'phiInvolved' in row && row.phiInvolved ? ' (PHI)' : ''} to class ${row.expected[0]}, activity ${row.expected[2]}, valid against OCSF 1.3.0`, () => {
      const { document, event } = served({
        action: row.action,
        phiInvolved: 'phiInvolved' in row ? row.phiInvolved : true,
        fieldsAccessed: 'phiInvolved' in row && !row.phiInvolved ? '' : '["diagnosis"]',
        resourceType: 'resourceType' in row ? row.resourceType : 'claim',
        success: 'success' in row ? row.success : true,
        sourceIp: row.action === 'auth.login' ? '' : '10.1.2.3',
        details: '{"ward":"3B"}',
      });
      const ocsf = toOcsf(event, document, 42);
      const [classUid, activityId, activityName] = row.expected;
      expect(ocsf).to.include({
        class_uid: classUid,
        activity_id: activityId,
        activity_name: activityName,
        type_uid: classUid * 100 + activityId,
      });
      const validate = validatorOf(classUid);
      const valid = validate(ocsf);
      expect(validate.errors ?? [], JSON.stringify(validate.errors)).to.deep.equal([]);
      expect(valid).to.equal(true);
    });
  }

  it('keeps the served document whole in raw_data, the event id, tenant and position in metadata, and the outcome in status', () => {
    const { document, event } = served({ success: false, justification: 'break-glass', userAgent: 'ehr/2.1' });
    const ocsf = toOcsf(event, document, 1234) as Record<string, any>;
    expect(ocsf.raw_data).to.equal(document);
    expect(ocsf.metadata).to.deep.include({ uid: event.event_id, tenant_uid: event.tenant_id, sequence: 1234, version: OCSF_VERSION });
    expect(ocsf.time).to.equal(Date.parse('2026-11-02T08:00:00.123Z'));
    expect(ocsf).to.include({ status_id: 2, status: 'Failure' });
    expect(ocsf.actor).to.deep.equal({ user: { uid: 'user-1', name: 'user-1' } });
    expect(ocsf.http_request).to.deep.equal({ user_agent: 'ehr/2.1' });
    expect(ocsf.unmapped).to.deep.include({
      user_role: 'clinician',
      resource_id: 'claim-1',
      justification: 'break-glass',
      fields_accessed: ['diagnosis'],
    });
  });

  it('is refused by the class schema when a required attribute is missing or an attribute is made up', () => {
    const { document, event } = served({ action: 'billing.invoice.update', phiInvolved: false, fieldsAccessed: '' });
    const ocsf = toOcsf(event, document, 1);
    const validate = validatorOf(6003);
    const { actor: _actor, ...withoutActor } = ocsf;
    expect(validate(withoutActor)).to.equal(false);
    expect(validate({ ...ocsf, leaf_index: 1 })).to.equal(false);
    expect(validate({ ...ocsf, activity_id: 7 })).to.equal(false);
  });

  it('names each class it uses once, each with a schema fixture', () => {
    const uids = OCSF_CLASSES.map((ocsfClass) => ocsfClass.uid);
    expect(new Set(uids).size).to.equal(uids.length);
    for (const uid of uids) expect(SCHEMA_OF_CLASS[uid], String(uid)).to.be.a('string');
  });

  it('renders a native record as the served document with leaf_index appended, and an ocsf record as valid OCSF', () => {
    const { document, event } = served({ details: '{"note":"\\"tenant_id\\":\\"x\\""}' });
    const native = eventRecord('native', event.tenant_id, document, 77);
    expect(JSON.parse(native.json)).to.deep.equal({ ...JSON.parse(document), leaf_index: 77 });
    expect(native).to.include({ action: event.action, tenantId: event.tenant_id, leafIndex: 77 });
    expect(native.timestampMs).to.equal(Date.parse(event.timestamp));
    const ocsf = eventRecord('ocsf', event.tenant_id, document, 77);
    expect(validatorOf(6005)(JSON.parse(ocsf.json))).to.equal(true);
  });
});
