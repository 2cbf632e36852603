import type { V1Secret } from '@kubernetes/client-node';
import { expect } from 'chai';
import {
  managedSpec,
  streamChangeEvent,
  streamCredentials,
  streamHealth,
  streamStatus,
  tenantsProblem,
} from '../../src/controller/auditLogStreamDecision.ts';
import type { AuditLogStreamSpec } from '../../src/controller/streamResource.ts';
import type { StreamState } from '../../src/streams/streamRegistry.ts';
import type { LogStream } from '../../src/streams/streamStore.ts';

const HTTPS: AuditLogStreamSpec = {
  allTenants: true,
  destination: { type: 'https', url: 'https://collector.example/in', secretRef: { name: 'collector' } },
};
const S3: AuditLogStreamSpec = {
  tenantIds: ['acme'],
  destination: { type: 's3', bucket: 'trail', prefix: 'audit', region: 'eu-west-1', forcePathStyle: true, secretRef: { name: 'aws' } },
  filter: { phiInvolved: false },
  paused: true,
};

function secret(data: Record<string, string>, labelled = true): V1Secret {
  return {
    metadata: { name: 'collector', labels: labelled ? { 'audittrail.dev/stream-credentials': 'true' } : {} },
    data: Object.fromEntries(Object.entries(data).map(([key, value]) => [key, Buffer.from(value).toString('base64')])),
  };
}

const STREAM = {
  id: 's1',
  tenantIds: null,
  destinationType: 'https',
  lastError: '503 from the collector',
  lastDeliveredAt: new Date(Date.UTC(2030, 0, 1)),
} as unknown as LogStream;

describe("an AuditLogStream's spec and Secret, decided", () => {
  it('wants exactly one of allTenants and tenantIds', () => {
    expect(tenantsProblem(HTTPS)).to.equal(undefined);
    expect(tenantsProblem(S3)).to.equal(undefined);
    expect(tenantsProblem({ ...HTTPS, tenantIds: ['acme'] })).to.include({ state: 'Stalled', reason: 'InvalidSpec' });
    expect(tenantsProblem({ destination: HTTPS.destination })?.message).to.equal(
      'spec.tenantIds: set either allTenants: true or tenantIds, not both',
    );
  });

  it('reads a labelled Secret with every member the type needs', () => {
    const signingSecret = 'a'.repeat(32);
    expect(streamCredentials(secret({ signingSecret, unrelated: 'x' }), HTTPS, 'ns')).to.deep.equal({ values: { signingSecret } });
  });

  it('says so when the Secret does not exist', () => {
    expect(streamCredentials(undefined, HTTPS, 'ns')).to.deep.equal({
      problem: { state: 'Stalled', reason: 'SecretNotFound', message: 'Secret collector does not exist in ns.' },
    });
  });

  it('reads nothing of a Secret not labelled for streams, and says how its owner consents', () => {
    const result = streamCredentials(secret({ signingSecret: 'a'.repeat(32) }, false), HTTPS, 'ns');
    expect(result).to.have.nested.property('problem.reason', 'SecretNotLabelled');
    expect(result).to.not.have.property('values');
    expect('problem' in result && result.problem.message).to.contain(
      'kubectl label secret collector -n ns audittrail.dev/stream-credentials=true',
    );
  });

  it('refuses a signing secret shorter than 32 characters', () => {
    expect(streamCredentials(secret({ signingSecret: 'a'.repeat(31) }), HTTPS, 'ns')).to.have.nested.property(
      'problem.reason',
      'SecretKeyInvalid',
    );
  });

  it('names every member missing (an empty one counts as missing)', () => {
    expect(streamCredentials(secret({ accessKeyId: '' }), S3, 'ns')).to.deep.equal({
      problem: {
        state: 'Stalled',
        reason: 'SecretKeyMissing',
        message: 'Secret aws has no accessKeyId or secretAccessKey, which a s3 destination needs.',
      },
    });
  });
});

describe("an AuditLogStream's stream, reported", () => {
  it('tells of a stream created or updated, and of nothing unchanged', () => {
    expect(streamChangeEvent(STREAM, 'created')).to.deep.equal({ reason: 'StreamCreated', message: 'Stream s1 created.' });
    expect(streamChangeEvent(STREAM, 'updated')).to.deep.equal({ reason: 'StreamUpdated', message: 'Stream s1 updated in place.' });
    expect(streamChangeEvent(STREAM, 'unchanged')).to.equal(undefined);
  });

  it("shows the stream's state, its tenants (* for all) and its last error in status", () => {
    const state = { status: 'failing', lagEvents: 12 } as StreamState;
    expect(streamStatus(STREAM, state)).to.deep.equal({
      id: 's1',
      state: 'Failing',
      tenants: '*',
      lagEvents: 12,
      lastDeliveredAt: '2030-01-01T00:00:00.000Z',
      lastError: '503 from the collector',
    });
    expect(streamStatus(undefined, undefined)).to.deep.equal({
      id: undefined,
      state: undefined,
      tenants: undefined,
      lagEvents: undefined,
      lastDeliveredAt: undefined,
      lastError: undefined,
    });
  });

  it('is Ready while active or paused, Stalled with the refusal while failing', () => {
    expect(streamHealth(STREAM, 'active')).to.include({ state: 'Ready', reason: 'Active' });
    expect(streamHealth(STREAM, 'paused')).to.include({ state: 'Ready', reason: 'Paused' });
    const failing = streamHealth(STREAM, 'failing');
    expect(failing).to.include({ state: 'Stalled', reason: 'DestinationRefused' });
    expect(failing.message).to.contain('503 from the collector');
  });

  it("puts the resource's spec in the API's terms, with the Secret's credentials in their members", () => {
    const spec = managedSpec(S3, { accessKeyId: 'AKIA', secretAccessKey: 'shh' });
    expect(spec).to.deep.equal({
      tenantIds: ['acme'],
      destination: {
        type: 's3',
        bucket: 'trail',
        prefix: 'audit',
        region: 'eu-west-1',
        force_path_style: true,
        access_key_id: 'AKIA',
        secret_access_key: 'shh',
      },
      signingSecret: undefined,
      format: 'native',
      ocsfVersion: undefined,
      filter: { phi_involved: false },
      startAt: undefined,
      treeHeads: true,
      paused: true,
    });
    expect(managedSpec(HTTPS, { signingSecret: 'k'.repeat(32) })).to.include({ tenantIds: null, signingSecret: 'k'.repeat(32) });
  });
});
