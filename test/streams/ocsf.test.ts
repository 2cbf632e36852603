import { expect } from 'chai';
import { renderEventDocument } from '../../src/events/eventDocument.ts';
import { formatTimestamp } from '../../src/events/eventFields.ts';
import { DEFAULT_OCSF_VERSION, OCSF_VERSIONS, ocsfTestRecord, toOcsf, type ServedEvent } from '../../src/streams/ocsf.ts';
import { OCSF_CLASSES } from '../../src/streams/ocsfClasses.ts';
import { eventRecord, testRecord } from '../../src/streams/records.ts';
import { newEvent } from '../support/newEvents.ts';
import { OcsfValidator } from '../support/ocsfValidator.ts';

/** A served document and its parsed event, as the API serves them. */
function served(overrides: Parameters<typeof newEvent>[0] = {}): { document: string; event: ServedEvent } {
  const stored = newEvent({ occurredAtMs: Date.parse('2026-11-02T08:00:00.123Z'), ...overrides });
  const document = renderEventDocument(stored, formatTimestamp(stored.occurredAtMs));
  return { document, event: JSON.parse(document) as ServedEvent };
}

const validators = Object.fromEntries(OCSF_VERSIONS.map((version) => [version, new OcsfValidator(version)]));

/** The table of docs/streams.md, one row per case: action (and what else decides) → class and activity. */
const TABLE = [
  { action: 'phi.read', expected: [6005, 1, 'Read'] },
  { action: 'phi.query', expected: [6005, 4, 'Query'] },
  { action: 'phi.export', expected: [6005, 1, 'Read'] },
  { action: 'phi.decrypt', expected: [6005, 10, 'Decrypt'] },
  { action: 'phi.annotate', expected: [6005, 99, 'annotate'] },
  { action: 'claims.read', phiInvolved: true, expected: [6005, 1, 'Read'] },
  { action: 'phi.read', sourceIp: '', expected: [0, 99, 'read'] },
  { action: 'auth.login', phiInvolved: false, sourceIp: '', expected: [3002, 1, 'Logon'] },
  { action: 'portal.session.logout', phiInvolved: false, success: false, expected: [3002, 2, 'Logoff'] },
  { action: 'admin.user.create', phiInvolved: false, resourceType: 'user', expected: [3001, 1, 'Create'] },
  { action: 'admin.user.password_reset', phiInvolved: false, resourceType: 'user', expected: [3001, 4, 'Password Reset'] },
  { action: 'admin.user.rename', phiInvolved: false, resourceType: 'user', expected: [3004, 99, 'rename'] },
  { action: 'admin.key.create', phiInvolved: false, resourceType: 'api_key', sourceIp: '', expected: [3004, 1, 'Create'] },
  { action: 'admin.key.revoke', phiInvolved: false, resourceType: 'api_key', expected: [3004, 9, 'Disable'] },
  { action: 'admin.webhook.rotate_secret', phiInvolved: false, resourceType: 'webhook_endpoint', expected: [3004, 3, 'Update'] },
  { action: 'admin.stream.pause', phiInvolved: false, resourceType: 'log_stream', expected: [3004, 12, 'Suspend'] },
  { action: 'audit.export', phiInvolved: false, resourceType: 'audit_trail', expected: [6003, 2, 'Read'] },
  { action: 'billing.invoice.update', phiInvolved: false, resourceType: 'invoice', expected: [6003, 3, 'Update'] },
  { action: 'billing.invoice.approve', phiInvolved: false, resourceType: 'invoice', expected: [6003, 99, 'approve'] },
  { action: 'billing.invoice.approve', phiInvolved: false, sourceIp: '', userAgent: 'batch/1', expected: [0, 99, 'approve'] },
] as const;

/** The event of a row of the table. */
function rowEvent(row: (typeof TABLE)[number]) {
  return served({
    action: row.action,
    phiInvolved: 'phiInvolved' in row ? row.phiInvolved : true,
    fieldsAccessed: 'phiInvolved' in row && !row.phiInvolved ? '' : '["diagnosis"]',
    resourceType: 'resourceType' in row ? row.resourceType : 'claim',
    success: 'success' in row ? row.success : true,
    sourceIp: 'sourceIp' in row ? row.sourceIp : '10.1.2.3',
    ...('userAgent' in row ? { userAgent: row.userAgent } : {}),
    details: '{"ward":"3B"}',
  });
}

describe('the ocsf stream format, validated by a schema compiled from OCSF’s own files', () => {
  for (const version of OCSF_VERSIONS) {
    describe(`OCSF ${version}`, () => {
      const validator = validators[version]!;

      for (const row of TABLE) {
        const what = `${row.action}${'phiInvolved' in row && row.phiInvolved ? ' (PHI)' : ''}${'sourceIp' in row ? ' without a source IP' : ''}`;
        it(`maps ${what} to class ${row.expected[0]}, activity ${row.expected[1]} ${row.expected[2]}, valid by the schema`, () => {
          const { document, event } = rowEvent(row);
          const ocsf = toOcsf(event, document, 42, version);
          const [classUid, activityId, activityName] = row.expected;
          expect(ocsf).to.include({
            class_uid: classUid,
            activity_id: activityId,
            activity_name: activityName,
            type_uid: classUid * 100 + activityId,
          });
          expect(validator.problems(ocsf)).to.deep.equal([]);
        });
      }

      it('names the service an Authentication was to, and declares every profile whose attributes it uses', () => {
        const { document, event } = served({ action: 'auth.login', phiInvolved: false, fieldsAccessed: '', tenantId: 'acme' });
        const ocsf = toOcsf(event, document, 1, version) as Record<string, any>;
        expect(ocsf.service).to.deep.equal({ uid: 'acme' });
        // In 1.3.0 an IAM class has `actor` only through the host profile; in 1.7.0 it is the class's own.
        expect(ocsf.metadata.profiles).to.deep.equal(version === '1.3.0' ? ['host'] : undefined);
        const { service: _service, ...withoutService } = ocsf;
        expect(validator.problems(withoutService).join()).to.include('must match a schema in anyOf');
      });

      it('invents nothing: no source endpoint without a source IP, no user agent without one', () => {
        const { document, event } = served({
          action: 'admin.key.create',
          phiInvolved: false,
          fieldsAccessed: '',
          sourceIp: '',
          userAgent: '',
        });
        const ocsf = toOcsf(event, document, 1, version);
        expect(ocsf).to.not.have.property('src_endpoint');
        expect(ocsf).to.not.have.property('http_request');
        expect(JSON.stringify(ocsf)).to.not.include('unknown');
      });

      it('keeps the served document whole in raw_data, the event id, tenant and position in metadata, and the outcome in status', () => {
        const { document, event } = served({ success: false, justification: 'break-glass', userAgent: 'ehr/2.1' });
        const ocsf = toOcsf(event, document, 1234, version) as Record<string, any>;
        expect(ocsf.raw_data).to.equal(document);
        expect(ocsf.metadata).to.deep.include({ uid: event.event_id, tenant_uid: event.tenant_id, sequence: 1234, version });
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
        expect(validator.problems(ocsf)).to.deep.equal([]);
      });

      it('sends a test record that is an OCSF event too, valid by the schema', () => {
        const record = JSON.parse(
          testRecord('str_x', 'acme', { format: 'ocsf', ocsfVersion: version }, Date.parse('2026-11-02T08:00:00Z')).json,
        );
        expect(record).to.deep.equal(ocsfTestRecord('str_x', 'acme', Date.parse('2026-11-02T08:00:00Z'), version));
        expect(validator.problems(record)).to.deep.equal([]);
      });
    });
  }

  describe('the compiled schema refuses what OCSF refuses', () => {
    const validator = validators['1.7.0']!;
    const apiActivity = () => {
      const { document, event } = served({ action: 'billing.invoice.update', phiInvolved: false, fieldsAccessed: '' });
      return toOcsf(event, document, 1, '1.7.0') as Record<string, any>;
    };

    it('a required attribute missing, or one made up, at the top or in an object', () => {
      const { actor: _actor, ...withoutActor } = apiActivity();
      expect(validator.problems(withoutActor).join()).to.include("must have required property 'actor'");
      expect(validator.problems({ ...apiActivity(), leaf_index: 1 }).join()).to.include('leaf_index');
      const record = apiActivity();
      record.api.service.colour = 'blue';
      expect(validator.problems(record).join()).to.include('colour');
    });

    it('an enum value the class does not have, a wrong type_uid, a caption not matching its id', () => {
      expect(validator.problems({ ...apiActivity(), activity_id: 7, type_uid: 600307 })).to.not.deep.equal([]);
      expect(validator.problems({ ...apiActivity(), type_uid: 600399 }).join()).to.include('type_uid');
      expect(validator.problems({ ...apiActivity(), activity_name: 'Read' }).join()).to.include('activity_name');
      expect(validator.problems({ ...apiActivity(), severity_id: 42 }).join()).to.include('severity_id');
    });

    it('a value of the wrong type: a string time, a malformed IP, a string where an integer goes', () => {
      expect(validator.problems({ ...apiActivity(), time: '2026-11-02T08:00:00Z' }).join()).to.include('/time');
      expect(validator.problems({ ...apiActivity(), src_endpoint: { ip: 'not-an-ip' } }).join()).to.include('/src_endpoint/ip');
      expect(validator.problems({ ...apiActivity(), metadata: { ...apiActivity().metadata, sequence: '1' } }).join()).to.include(
        'sequence',
      );
    });

    it("an object's constraint: an endpoint with none of ip, name, uid…", () => {
      expect(validator.problems({ ...apiActivity(), src_endpoint: { port: 443 } }).join()).to.include('/src_endpoint');
    });

    it("a profile's attribute whose profile is not declared, and a profile the class does not have", () => {
      const withDevice: Record<string, any> = { ...apiActivity(), device: { type_id: 1, hostname: 'ehr-1' } };
      expect(validator.problems(withDevice).join()).to.include('device');
      const declared = { ...withDevice, metadata: { ...withDevice.metadata, profiles: ['host'] } };
      expect(validator.problems(declared)).to.deep.equal([]);
      expect(
        validator.problems({ ...apiActivity(), metadata: { ...apiActivity().metadata, profiles: ['no_such_profile'] } }),
      ).to.not.deep.equal([]);
      // 1.3.0: an IAM record with an actor must declare host.
      const { document, event } = served({ action: 'admin.key.create', phiInvolved: false, fieldsAccessed: '' });
      const entity = toOcsf(event, document, 1, '1.3.0') as Record<string, any>;
      const { profiles: _profiles, ...undeclared } = entity.metadata;
      expect(validators['1.3.0']!.problems({ ...entity, metadata: undeclared }).join()).to.include('actor');
    });

    it('a deprecated attribute', () => {
      expect(
        validator
          .problems({ ...apiActivity(), metadata: { ...apiActivity().metadata, extension: { name: 'x', uid: '1', version: '1' } } })
          .join(),
      ).to.include('extension');
    });

    it('another release’s version in metadata', () => {
      expect(validator.problems({ ...apiActivity(), metadata: { ...apiActivity().metadata, version: '1.3.0' } }).join()).to.include(
        'version',
      );
    });
  });

  it('names each class it uses once, each with its schema in both releases', () => {
    const uids = OCSF_CLASSES.map((ocsfClass) => ocsfClass.uid);
    expect(new Set(uids).size).to.equal(uids.length);
    for (const version of OCSF_VERSIONS)
      expect(validators[version]!.classes.map((known) => known.uid).sort()).to.deep.equal([...uids].sort());
  });

  it(`renders a native record as the served document with leaf_index appended, and an ocsf record as valid OCSF ${DEFAULT_OCSF_VERSION} by default`, () => {
    const { document, event } = served({ details: '{"note":"\\"tenant_id\\":\\"x\\""}' });
    const native = eventRecord('native', event.tenant_id, document, 77);
    expect(JSON.parse(native.json)).to.deep.equal({ ...JSON.parse(document), leaf_index: 77 });
    expect(native).to.include({ action: event.action, tenantId: event.tenant_id, leafIndex: 77 });
    expect(native.timestampMs).to.equal(Date.parse(event.timestamp));
    const ocsf = JSON.parse(eventRecord('ocsf', event.tenant_id, document, 77).json);
    expect(ocsf.metadata.version).to.equal('1.7.0');
    expect(validators['1.7.0']!.problems(ocsf)).to.deep.equal([]);
    const older = JSON.parse(eventRecord('ocsf', event.tenant_id, document, 77, '1.3.0').json);
    expect(validators['1.3.0']!.problems(older)).to.deep.equal([]);
  });
});
