import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import SwaggerParser from '@apidevtools/swagger-parser';
import Router from '@koa/router';
import { generateClientTypes } from '../../tools/openapi-typegen/index.ts';
import type { z } from 'zod';
import { AUDIT_EVENT_FIELDS, type AuditEvent } from '../../src/client/auditEvent.ts';
import { auditEventSchema, eventListSchema } from '../../src/http/apiSchemas.ts';
import { servedRoutes, undocumentedRoutes } from '../../src/http/openapi.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

describe('GET /api/v2/public/openapi.json', () => {
  let db: TestDatabase;
  let api: TestService;
  let document: any;

  before(async () => {
    db = await createTestDatabase();
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    const response = await call(`${api.baseUrl}/openapi.json`);
    expect(response.status).to.equal(200);
    document = response.json;
  });

  after(async () => {
    await api?.stop();
    await db?.drop();
  });

  it('is a valid OpenAPI 3.1 document', async () => {
    expect(document.openapi).to.equal('3.1.0');
    // validate() dereferences in place; give it a copy.
    await SwaggerParser.validate(structuredClone(document));
  });

  it('documents every list filter with the rules the API enforces', () => {
    const parameters = document.paths['/audit/events'].get.parameters;
    const byName = Object.fromEntries(parameters.map((parameter: { name: string }) => [parameter.name, parameter]));
    expect(Object.keys(byName)).to.have.members([
      'action',
      'resource_type',
      'phi_involved',
      'since',
      'until',
      'user_id',
      'resource_id',
      'action_prefix',
      'limit',
      'cursor',
      'q',
    ]);
    // Typed as a client writes them; the wire text is decoded exactly (limit=abc is a 422: events-api tests).
    expect(byName.phi_involved.schema).to.deep.equal({ type: 'boolean' });
    expect(byName.limit.schema).to.include({ type: 'integer', minimum: 1, maximum: 1000 });
    expect(byName.action.schema.pattern).to.be.a('string');
    expect(byName.since.schema.format).to.equal('date-time');
    for (const exact of ['user_id', 'resource_id'])
      expect(byName[exact].schema).to.include({ type: 'string', minLength: 1, maxLength: 256 });
    expect(byName.q.schema).to.include({ type: 'string', maxLength: 100 });
    // The export takes the same filters in its body (not the search: a search's walk is bounded per page).
    const exportBody = document.components.schemas.ExportRequest.properties;
    expect(Object.keys(exportBody)).to.have.members([
      'action',
      'resource_type',
      'phi_involved',
      'since',
      'until',
      'user_id',
      'resource_id',
      'action_prefix',
    ]);
    expect(Object.values(byName).every((parameter: any) => parameter.required === false)).to.equal(true);
  });

  it('declares the rate-limit, Retry-After and truncation headers on the responses that carry them', () => {
    const headerNames = (response: { headers?: Record<string, { $ref: string }> }) =>
      Object.values(response.headers ?? {}).map((header) => header.$ref.replace('#/components/headers/', ''));
    const list = document.paths['/audit/events'].get.responses;
    expect(headerNames(list['200'])).to.include.members(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']);
    expect(headerNames(list['429'])).to.include.members(['RateLimit-Limit', 'Retry-After']);
    expect(list['401'].headers).to.equal(undefined);
    const exported = document.paths['/audit/export'].post.responses['200'];
    expect(headerNames(exported)).to.include('X-Service-Truncated');
    expect(document.components.headers['X-Service-Truncated'].schema).to.deep.equal({ type: 'boolean' });
    expect(document.components.headers['Retry-After'].schema).to.deep.equal({ type: 'integer' });
  });

  it('documents secret rotation, test sends and the signature headers of every delivery', () => {
    const rotation = document.paths['/audit/webhooks/{id}/rotate-secret'].post;
    expect(rotation.requestBody.required).to.equal(false);
    expect(document.components.schemas.WebhookSecretRotation.properties.overlap_s).to.include({
      type: 'integer',
      minimum: 0,
      maximum: 604800,
      default: 86400,
    });
    expect(document.components.schemas.WebhookSecretRotation.additionalProperties).to.equal(false);
    expect(Object.keys(rotation.responses)).to.include.members(['200', '403', '404', '409', '422']);
    expect(document.components.schemas.WebhookSecretRotated.required).to.include.members([
      'secret',
      'standard_webhooks_secret',
      'previous_secret_expires_at',
    ]);
    expect(document.components.schemas.WebhookRegistered.required).to.include('standard_webhooks_secret');
    const test = document.paths['/audit/webhooks/{id}/test'].post;
    expect(test.requestBody).to.equal(undefined);
    expect(Object.keys(test.responses)).to.include.members(['200', '403', '404', '409']);
    expect(document.components.schemas.WebhookTestResult.required).to.have.members(['success', 'status_code', 'duration_ms', 'error']);
    const delivery = document.webhooks.auditEvent.post;
    expect(delivery.parameters.map((parameter: { name: string }) => parameter.name)).to.include.members([
      'X-Service-Signature',
      'webhook-id',
      'webhook-timestamp',
      'webhook-signature',
    ]);
  });

  it("gives the export's two formats their own response types", () => {
    const content = document.paths['/audit/export'].post.responses['200'].content;
    expect(content['application/json'].schema).to.deep.equal({ $ref: '#/components/schemas/ExportResult' });
    expect(content['application/x-ndjson'].schema).to.deep.equal({ $ref: '#/components/schemas/ExportLines' });
    expect(document.components.schemas.ExportResult.type).to.equal('object');
    expect(document.components.schemas.ExportLines.type).to.equal('string');
  });

  it('describes real responses: a live page and event satisfy the documented schemas', async () => {
    await seedEvents(db.url, [newEvent({ tenantId: 'doc' })]);
    const { key } = await mintKey(db.url, { tenantId: 'doc', scopes: ['audit:read'] });
    const page = await call(`${api.baseUrl}/audit/events`, { key });
    expect(eventListSchema.safeParse(page.json).success).to.equal(true);
    const one = await call(`${api.baseUrl}/audit/events/${page.json.events[0].event_id}`, { key });
    const parsed = auditEventSchema.safeParse(one.json);
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).to.equal(true);
    // And the document's component is generated from that same schema.
    // (All but redaction, which only a redacted event has.)
    expect(document.components.schemas.AuditEvent.required).to.have.members(
      Object.keys(auditEventSchema.shape).filter((name) => name !== 'redaction'),
    );
  });

  it("documents the event from the client's field table: every field, in order, with its type and description", () => {
    const component = document.components.schemas.AuditEvent;
    expect(Object.keys(component.properties)).to.deep.equal([...Object.keys(AUDIT_EVENT_FIELDS), 'redaction']);
    for (const [name, field] of Object.entries(AUDIT_EVENT_FIELDS)) {
      expect(component.properties[name], name).to.include({ type: field.type, description: field.description });
    }
    // The server's type of an event and the client's are one type: each is assignable to the other.
    const sameType: [z.infer<typeof auditEventSchema>] extends [AuditEvent]
      ? [AuditEvent] extends [z.infer<typeof auditEventSchema>]
        ? true
        : false
      : false = true;
    expect(sameType).to.equal(true);
  });

  it('documents every route the API serves, and nothing it does not serve', () => {
    // The paths of the live document are those of the features' routers: building the app checks it.
    const operations = Object.entries(document.paths).flatMap(([path, methods]: [string, any]) =>
      Object.keys(methods).map((method) => `${method} ${path}`),
    );
    expect(operations).to.include.members([
      'get /audit/events',
      'get /audit/events/{event_id}',
      'post /audit/export',
      'post /audit/webhooks',
    ]);
    const router = new Router();
    router.get('/audit/things/:thing_id', () => undefined);
    router.post('/audit/things', () => undefined);
    const contribution = { paths: { '/audit/things/{thing_id}': { get: {} }, '/audit/gone': { delete: {} } } };
    expect(undocumentedRoutes(servedRoutes(router), contribution)).to.deep.equal([
      'served but not documented: post /audit/things',
      'documented but not served: delete /audit/gone',
    ]);
  });

  describe('a client generated with openapi-typescript and openapi-fetch', function () {
    this.timeout(120_000);
    let workdir: string;

    before(async () => {
      // Inside the project, so that the client's imports of openapi-fetch resolve to ours.
      await mkdir('node_modules/.cache', { recursive: true });
      workdir = await mkdtemp(join('node_modules/.cache', 'openapi-client-'));
      await writeFile(join(workdir, 'api.ts'), await generateClientTypes(document));
      await writeFile(join(workdir, 'package.json'), JSON.stringify({ type: 'module' }));
      await writeFile(
        join(workdir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'es2024',
            lib: ['es2024', 'dom'],
            module: 'nodenext',
            moduleResolution: 'nodenext',
            types: [],
            strict: true,
            noEmit: true,
            allowImportingTsExtensions: true,
            skipLibCheck: true,
          },
          include: ['*.ts'],
        }),
      );
    });

    after(async () => {
      if (workdir) await rm(workdir, { recursive: true, force: true });
    });

    /** Type-checks the client file with the project's TypeScript; the compiler's diagnostics, '' when clean. */
    async function typeCheck(client: string): Promise<string> {
      await writeFile(join(workdir, 'client.ts'), client);
      try {
        await promisify(execFile)(join(process.cwd(), 'node_modules/.bin/tsc'), ['-p', workdir]);
        return '';
      } catch (failure) {
        return String((failure as { stdout?: string }).stdout ?? failure);
      }
    }

    it('lists events with limit: 3, phi_involved: true and reads both export formats, without casts', async () => {
      const diagnostics = await typeCheck(`
import createClient from 'openapi-fetch';
import type { paths } from './api.ts';

// JSON responses typed as JSON; the NDJSON export is read as text (parseAs), its own media type.
const client = createClient<paths, 'application/json'>({ baseUrl: 'http://127.0.0.1:8080/api/v2/public', headers: { Authorization: 'Bearer atr_live_x' } });

export async function newestPhiEvents(): Promise<string[]> {
  const { data, error, response } = await client.GET('/audit/events', { params: { query: { limit: 3, phi_involved: true } } });
  if (error) throw new Error(error.error);
  const remaining: string | null = response.headers.get('RateLimit-Remaining');
  const next: string | null = data.page.next_cursor;
  return [...data.events.map((event) => event.event_id), String(remaining), String(next)];
}

export async function exportBoth(): Promise<[number, boolean, string]> {
  const json = await client.POST('/audit/export', { params: { query: { format: 'json' } }, body: { phi_involved: true } });
  if (!json.data) throw new Error('export failed');
  const lines = await client.POST('/audit/export', { params: { query: { format: 'ndjson' } }, body: { action: 'phi.read' }, parseAs: 'text' });
  return [json.data.count, json.data.truncated, lines.data ?? ''];
}
`);
      expect(diagnostics).to.equal('');
    });

    it('refuses what the server refuses: limit as text, phi_involved as a string', async () => {
      const diagnostics = await typeCheck(`
import createClient from 'openapi-fetch';
import type { paths } from './api.ts';

const client = createClient<paths>({ baseUrl: 'http://127.0.0.1:8080/api/v2/public' });
await client.GET('/audit/events', { params: { query: { limit: 'abc', phi_involved: 'yes' } } });
`);
      expect(diagnostics).to.include("client.ts(6,56): error TS2322: Type 'string' is not assignable to type 'number'");
      expect(diagnostics).to.include("client.ts(6,70): error TS2322: Type 'string' is not assignable to type 'boolean | undefined'");
    });
  });
});
