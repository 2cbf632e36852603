import { expect } from 'chai';
import SwaggerParser from '@apidevtools/swagger-parser';
import { auditEventSchema, eventListSchema } from '../../src/http/apiSchemas.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent, seedEvents } from '../support/events.ts';
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
    expect(Object.keys(byName)).to.have.members(['action', 'resource_type', 'phi_involved', 'since', 'until', 'limit', 'cursor']);
    expect(byName.phi_involved.schema.enum).to.deep.equal(['true', 'false']);
    expect(byName.action.schema.pattern).to.be.a('string');
    expect(byName.since.schema.format).to.equal('date-time');
    expect(Object.values(byName).every((parameter: any) => parameter.required === false)).to.equal(true);
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
    expect(document.components.schemas.AuditEvent.required).to.have.members(Object.keys(auditEventSchema.shape));
  });
});
