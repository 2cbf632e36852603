import { expect } from 'chai';
import { readFileSync, readdirSync } from 'node:fs';
import { load } from 'js-yaml';
import { Ajv } from 'ajv';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { createHash } from 'node:crypto';
import { crdManifest } from '../../src/controller/crdManifest.ts';
import { legalHoldSpecSchema, retentionPolicySpecSchema } from '../../src/controller/lifecycleKinds.ts';
import { RESOURCE_KINDS } from '../../src/controller/resourceKinds.ts';
import { SCHEMA_VERSION_ANNOTATION, apiKeySpecSchema } from '../../src/controller/resources.ts';
import { webhookEndpointSpecSchema, type WebhookEndpointSpec } from '../../src/controller/webhookEndpointResource.ts';
import { settingsOf } from '../../src/controller/webhookEndpointState.ts';
import { auditLogStreamSpecSchema } from '../../src/controller/streamResource.ts';
import { violatedRules } from '../support/kube-apiserver/celRules.ts';
import { webhookRegistrationSchema } from '../../src/webhooks/webhookRules.ts';
import { renderCrds } from '../../scripts/generate-crds.ts';

type Schema = {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: unknown;
  [key: string]: unknown;
};

const committed = (name: string) => readFileSync(`crds/${name}`, 'utf8');
const manifest = (name: string) => load(committed(name)) as { spec: { versions: Array<{ schema: { openAPIV3Schema: Schema } }> } };
const specSchema = (name: string) => manifest(name).spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!;

/** Structural schema rules of apiextensions.k8s.io/v1 that a generator can get wrong. */
function structuralProblems(node: Schema, path: string): string[] {
  const problems: string[] = [];
  if (node.type === undefined && !node['x-kubernetes-int-or-string'] && !node['x-kubernetes-preserve-unknown-fields'])
    problems.push(`${path}: no type`);
  if (node.properties && node.additionalProperties !== undefined) problems.push(`${path}: properties with additionalProperties`);
  for (const banned of ['$schema', '$ref', 'definitions', 'oneOf', 'anyOf', 'allOf', 'not'])
    if (banned in node) problems.push(`${path}: ${banned}`);
  for (const [name, child] of Object.entries(node.properties ?? {})) problems.push(...structuralProblems(child, `${path}.${name}`));
  if (node.items) problems.push(...structuralProblems(node.items, `${path}[]`));
  return problems;
}

/**
 * Each kind's schema at each of its schema versions: the first 16 hex of the SHA-256 of the CRD's schema as
 * generated. Controllers compare versions to tell CRDs older than they need (the API server prunes what an
 * older schema does not know), so a schema change must raise schemaVersion in resources.ts and add a line here.
 */
const SCHEMA_FINGERPRINTS: Record<string, Record<number, string>> = {
  ApiKey: { 1: '1598dbeb770ac167', 2: 'c62a796a4eb07ed8' },
  WebhookEndpoint: { 1: '2f1ec60112194971', 2: 'd3951be011b5722e' },
  RetentionPolicy: { 1: '2c942f011c744e21', 2: '694ac4aa1ed13575' },
  AuditLogStream: { 1: '688138bea478a293', 2: '0b5acf451682ac8f' },
  LegalHold: { 1: '672b5374f61bdca8' },
};

describe('CustomResourceDefinitions', () => {
  const files = [...renderCrds().keys()];

  it('carry the schema version of their kind, raised with every change of the schema', () => {
    for (const resource of RESOURCE_KINDS) {
      const crd = crdManifest(resource) as any;
      expect(crd.metadata.annotations[SCHEMA_VERSION_ANNOTATION]).to.equal(String(resource.schemaVersion));
      // Not the kind's own description (kubectl explain <kind>): the API server prunes and validates nothing by it,
      // so a CRD without it need not stop the controller.
      const { description, ...schema } = crd.spec.versions[0].schema.openAPIV3Schema;
      expect(description, `${resource.kind}: a description for kubectl explain`).to.be.a('string').with.length.above(80);
      const fingerprint = createHash('sha256')
        .update(JSON.stringify({ openAPIV3Schema: schema }))
        .digest('hex')
        .slice(0, 16);
      const known = SCHEMA_FINGERPRINTS[resource.kind] ?? {};
      expect(
        known[resource.schemaVersion],
        `${resource.kind}'s schema is ${fingerprint}; if it changed, raise its schemaVersion in src/controller/resources.ts to ` +
          `${Math.max(0, ...Object.keys(known).map(Number)) + 1} and record ${fingerprint} for it in SCHEMA_FINGERPRINTS`,
      ).to.equal(fingerprint);
      // Versions only go up: an older version's fingerprint stays what it was.
      expect(Math.max(...Object.keys(known).map(Number)), resource.kind).to.equal(resource.schemaVersion);
    }
  });

  it('are committed exactly as scripts/generate-crds.ts writes them (run make crds), in crds/ and in the chart', () => {
    expect(readdirSync('crds').sort()).to.deep.equal([...files].sort());
    for (const [name, text] of renderCrds()) {
      expect(committed(name), `crds/${name} is stale`).to.equal(text);
      expect(readFileSync(`charts/audit-trail/crds/${name}`, 'utf8'), `chart copy of ${name}`).to.equal(text);
    }
  });

  it('are valid apiextensions.k8s.io/v1 objects with structural schemas, status subresources, printer columns and the audit-trail category', () => {
    for (const name of files) {
      const crd = load(committed(name)) as any;
      new CustomResourceDefinition(crd).validate();
      expect(crd.spec.names.categories).to.deep.equal(['audit-trail']);
      expect(crd.spec.names.shortNames).to.have.length(1);
      const [version] = crd.spec.versions;
      expect(version.subresources).to.deep.equal({ status: {} });
      expect(version.additionalPrinterColumns.map((column: { name: string }) => column.name)).to.include.members(['Tenant', 'Age']);
      // kubectl get shows the Ready condition's status and reason beside each kind's own columns.
      const column = (columnName: string) => version.additionalPrinterColumns.find((item: { name: string }) => item.name === columnName);
      expect(column('Ready')).to.deep.equal({ name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' });
      expect(column('Reason')).to.deep.equal({ name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason' });
      expect(structuralProblems(version.schema.openAPIV3Schema, name)).to.deep.equal([]);
      expect(JSON.stringify(version.schema)).to.include('x-kubernetes-validations');
    }
  });

  // The OpenAPI part of admission (CEL rules aside, which need an API server) against the zod schemas the
  // controller and the public API use: each input is accepted or refused by both alike.
  const ajv = new Ajv({ strict: false, allErrors: true });
  const admits = (name: string, spec: unknown) => ajv.validate(specSchema(name), spec);

  const apiKeyCases: Array<[string, unknown, boolean]> = [
    ['a minimal key', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'acme-key' }, true],
    [
      'every field',
      {
        tenantId: 'acme_2',
        scopes: ['audit:read', 'audit:export', 'webhooks:write'],
        allowedCidrs: ['203.0.113.0/24'],
        description: 'SIEM',
        revoked: false,
        secretName: 'a.b-c',
      },
      true,
    ],
    ['an unknown scope', { tenantId: 'acme', scopes: ['admin'], secretName: 'k' }, false],
    ['no scopes', { tenantId: 'acme', scopes: [], secretName: 'k' }, false],
    ['a tenant with a dot', { tenantId: 'acme.prod', scopes: ['audit:read'], secretName: 'k' }, false],
    ['a missing secretName', { tenantId: 'acme', scopes: ['audit:read'] }, false],
    ['an upper-case secretName', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'Key' }, false],
    ['a 501-character description', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'k', description: 'd'.repeat(501) }, false],
    ['a controller class', { tenantId: 'acme', scopes: ['audit:read'], secretName: 'k', controllerClass: 'production-eu' }, true],
    [
      'a controller class that is not a DNS label',
      { tenantId: 'acme', scopes: ['audit:read'], secretName: 'k', controllerClass: 'Prod_EU' },
      false,
    ],
  ];
  for (const [what, spec, expected] of apiKeyCases) {
    it(`ApiKey: ${expected ? 'admits' : 'refuses'} ${what}, as the controller's schema does`, () => {
      expect(admits('apikeys.audittrail.dev.yaml', spec)).to.equal(expected);
      expect(apiKeySpecSchema.safeParse(spec).success).to.equal(expected);
    });
  }

  const webhookCases: Array<[string, Record<string, unknown>, boolean]> = [
    ['a minimal endpoint', { tenantId: 'acme', url: 'https://siem.example.com/hook', secretName: 'hook' }, true],
    [
      'documented filter examples',
      { tenantId: 'acme', url: 'https://siem.example.com/hook', eventFilter: ['phi.', 'admin.', 'phi.read'], secretName: 'hook' },
      true,
    ],
    ['a wildcard filter', { tenantId: 'acme', url: 'https://siem.example.com/hook', eventFilter: ['phi.*'], secretName: 'hook' }, false],
    ['an upper-case filter', { tenantId: 'acme', url: 'https://siem.example.com/hook', eventFilter: ['PHI.'], secretName: 'hook' }, false],
    [
      '51 filter entries',
      {
        tenantId: 'acme',
        url: 'https://siem.example.com/hook',
        eventFilter: Array.from({ length: 51 }, (_, i) => `a${i}.`),
        secretName: 'hook',
      },
      false,
    ],
    ['a URL over 2,048 characters', { tenantId: 'acme', url: `https://siem.example.com/${'a'.repeat(2048)}`, secretName: 'hook' }, false],
    ['a relative URL', { tenantId: 'acme', url: '/hook', secretName: 'hook' }, false],
    ['an ftp URL', { tenantId: 'acme', url: 'ftp://siem.example.com/hook', secretName: 'hook' }, false],
    ['credentials in the URL', { tenantId: 'acme', url: 'https://user:pw@siem.example.com/hook', secretName: 'hook' }, false],
    [
      'a 501-character description',
      { tenantId: 'acme', url: 'https://siem.example.com/hook', description: 'd'.repeat(501), secretName: 'hook' },
      false,
    ],
    [
      'a disabled endpoint of a controller class',
      { tenantId: 'acme', url: 'https://siem.example.com/hook', disabled: true, controllerClass: 'staging', secretName: 'hook' },
      true,
    ],
    [
      'delivery settings at their bounds and a payload filter',
      {
        tenantId: 'acme',
        url: 'https://siem.example.com/hook',
        payloadFilter: {
          all: [
            { path: 'details.ward', equals: '3B' },
            { path: 'resource.type', in: ['claim', 'upload'] },
          ],
        },
        timeoutSeconds: 30,
        retryScheduleSeconds: [1, 86_400],
        rateLimitPerSecond: 1000,
        ordered: true,
        signatureSchemes: ['ed25519', 'hmac'],
        secretName: 'hook',
      },
      true,
    ],
    ['a 31-second timeout', { tenantId: 'acme', url: 'https://siem.example.com/hook', timeoutSeconds: 31, secretName: 'hook' }, false],
    ['a rate limit of 0', { tenantId: 'acme', url: 'https://siem.example.com/hook', rateLimitPerSecond: 0, secretName: 'hook' }, false],
    [
      'eight retry delays',
      { tenantId: 'acme', url: 'https://siem.example.com/hook', retryScheduleSeconds: [1, 1, 1, 1, 1, 1, 1, 1], secretName: 'hook' },
      false,
    ],
    [
      'an unknown signature scheme',
      { tenantId: 'acme', url: 'https://siem.example.com/hook', signatureSchemes: ['rsa'], secretName: 'hook' },
      false,
    ],
  ];
  const registration = webhookRegistrationSchema({ allowHttp: false });
  for (const [what, spec, expected] of webhookCases) {
    it(`WebhookEndpoint: ${expected ? 'admits' : 'refuses'} ${what}, as the controller's schema and the public API do`, () => {
      expect(admits('webhookendpoints.audittrail.dev.yaml', spec)).to.equal(expected);
      expect(webhookEndpointSpecSchema.safeParse(spec).success).to.equal(expected);
      const api = registration.safeParse(settingsOf(spec as WebhookEndpointSpec)).success;
      expect(api, 'the public API decides differently').to.equal(expected);
    });
  }

  const retentionCases: Array<[string, Record<string, unknown>, boolean]> = [
    ['six years', { tenantId: 'acme', retain: '6y' }, true],
    [
      '18 months, locked, archived',
      { tenantId: 'acme', retain: '18mo', locked: true, archive: { bucket: 'audit-archive', prefix: 'acme/' } },
      true,
    ],
    ['30 days', { tenantId: 'acme', retain: '30d' }, true],
    ['minutes (m is minutes elsewhere; months are mo)', { tenantId: 'acme', retain: '6m' }, false],
    ['no period', { tenantId: 'acme' }, false],
    ['zero days', { tenantId: 'acme', retain: '0d' }, false],
    ['a fraction', { tenantId: 'acme', retain: '1.5y' }, false],
    ['an archive without a bucket', { tenantId: 'acme', retain: '6y', archive: { prefix: 'a/' } }, false],
  ];
  for (const [what, spec, expected] of retentionCases) {
    it(`RetentionPolicy: ${expected ? 'admits' : 'refuses'} ${what}, as the controller's schema does`, () => {
      expect(admits('retentionpolicies.audittrail.dev.yaml', spec)).to.equal(expected);
      expect(retentionPolicySpecSchema.safeParse(spec).success).to.equal(expected);
    });
  }

  const streamSpec = (overrides: Record<string, unknown>) => ({
    tenantIds: ['acme'],
    destination: { type: 'splunk_hec', url: 'https://splunk.example.com:8088', secretRef: { name: 'hec' } },
    ...overrides,
  });
  const streamCases: Array<[string, Record<string, unknown>, boolean]> = [
    ['a stream of listed tenants', streamSpec({}), true],
    ['a stream of every tenant', streamSpec({ tenantIds: undefined, allTenants: true }), true],
    [
      'an s3 destination',
      streamSpec({ destination: { type: 's3', bucket: 'b-1', prefix: 'audit', region: 'eu-west-1', secretRef: { name: 's3' } } }),
      true,
    ],
    [
      'an unknown destination type',
      streamSpec({ destination: { type: 'syslog', url: 'https://x.example', secretRef: { name: 'x' } } }),
      false,
    ],
    ['a destination without secretRef', streamSpec({ destination: { type: 'datadog', url: 'https://x.example' } }), false],
    ['an unknown format', streamSpec({ format: 'cef' }), false],
    ['a wildcard filter', streamSpec({ filter: { actionPrefixes: ['phi.*'] } }), false],
  ];
  for (const [what, spec, expected] of streamCases) {
    it(`AuditLogStream: ${expected ? 'admits' : 'refuses'} ${what}, as the controller's schema does`, () => {
      expect(admits('auditlogstreams.audittrail.dev.yaml', spec)).to.equal(expected);
      expect(auditLogStreamSpecSchema.safeParse(spec).success).to.equal(expected);
    });
  }

  it("AuditLogStream: the CRD's rules refuse both or neither of allTenants and tenantIds, a url-less HEC, and a changed startAt", () => {
    const rules = specSchema('auditlogstreams.audittrail.dev.yaml') as never;
    const fields = (spec: unknown, old?: unknown) => violatedRules(rules, spec, old).map((violation) => violation.message);
    expect(fields(streamSpec({}))).to.deep.equal([]);
    expect(fields(streamSpec({ allTenants: true }))).to.deep.equal(['set either allTenants: true or tenantIds, not both']);
    expect(fields(streamSpec({ tenantIds: undefined }))).to.deep.equal(['set either allTenants: true or tenantIds, not both']);
    expect(fields(streamSpec({ destination: { type: 'splunk_hec', secretRef: { name: 'hec' } } }))).to.deep.equal([
      's3 needs bucket, prefix and region; the other types need url',
    ]);
    expect(fields(streamSpec({ startAt: '2026-01-01T00:00:00Z' }), streamSpec({}))).to.deep.equal([
      'startAt is immutable; create another AuditLogStream',
    ]);
    const columns = (manifest('auditlogstreams.audittrail.dev.yaml').spec.versions[0] as any).additionalPrinterColumns;
    expect(columns.map((column: { name: string }) => column.name)).to.deep.equal([
      'Tenant',
      'Destination',
      'State',
      'Lag',
      'Ready',
      'Reason',
      'ID',
      'Class',
      'Age',
    ]);
  });

  const holdCases: Array<[string, Record<string, unknown>, boolean]> = [
    ['a whole tenant', { tenantId: 'acme', reason: 'litigation', reference: 'case-1' }, true],
    [
      'a range and action families',
      {
        tenantId: 'acme',
        since: '2026-01-01T00:00:00Z',
        until: '2026-02-01T00:00:00.500+01:00',
        actionPrefixes: ['phi.', 'admin.key'],
        reason: 'r',
        reference: 'c',
      },
      true,
    ],
    ['no reason', { tenantId: 'acme', reference: 'case-1' }, false],
    ['no reference', { tenantId: 'acme', reason: 'r' }, false],
    ['a date without a time', { tenantId: 'acme', since: '2026-01-01', reason: 'r', reference: 'c' }, false],
    ['a wildcard action', { tenantId: 'acme', actionPrefixes: ['phi.*'], reason: 'r', reference: 'c' }, false],
  ];
  for (const [what, spec, expected] of holdCases) {
    it(`LegalHold: ${expected ? 'admits' : 'refuses'} ${what}, as the controller's schema does`, () => {
      expect(admits('legalholds.audittrail.dev.yaml', spec)).to.equal(expected);
      expect(legalHoldSpecSchema.safeParse(spec).success).to.equal(expected);
    });
  }
});
