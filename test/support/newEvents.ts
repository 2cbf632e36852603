import { randomUUID } from 'node:crypto';
import type { NewEvent } from '../../src/events/eventStore.ts';

/*
 * Events to write or send, built without a database: a test that only renders, hashes or sends them needs
 * no services. Seeding them into a database is events.ts.
 */

/** A producer event (ingestion input) with sensible values; override what a test cares about. */
export function producerEvent(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    tenant_id: 'tenant-a',
    action: 'phi.read',
    user_id: 'user-1',
    user_role: 'clinician',
    resource_type: 'claim',
    resource_id: `claim-${randomUUID().slice(0, 8)}`,
    phi_involved: true,
    fields_accessed: ['diagnosis'],
    success: true,
    source_ip: '10.1.2.3',
    user_agent: 'test-agent/1.0',
    details: { reason: 'test' },
    ...overrides,
  };
}

/** A stored-event row for seeding many events directly through the write path. */
export function newEvent(overrides: Partial<NewEvent> = {}): NewEvent {
  const occurredAtMs = overrides.occurredAtMs ?? Date.now();
  return {
    tenantId: 'tenant-a',
    occurredAtMs,
    eventId: randomUUID(),
    action: 'phi.read',
    userId: 'user-1',
    userRole: 'clinician',
    resourceType: 'claim',
    resourceId: 'claim-1',
    fieldsAccessed: '["diagnosis"]',
    phiInvolved: true,
    sourceIp: '10.1.2.3',
    userAgent: 'test-agent/1.0',
    justification: '',
    success: true,
    details: '{}',
    ...overrides,
  };
}
