import { randomUUID } from 'node:crypto';
import type { NewEvent } from '../../src/events/eventStore.ts';

/** One producer event of the ingest benchmarks, as a producer sends it. */
export function producerEvent(tenant: string, index: number) {
  return {
    event_id: randomUUID(),
    timestamp: new Date().toISOString(),
    tenant_id: tenant,
    action: index % 3 === 0 ? 'phi.read' : 'phi.query',
    user_id: `user-${index % 500}`,
    user_role: 'clinician',
    resource_type: 'patient_record',
    resource_id: `p-${index}`,
    phi_involved: true,
    fields_accessed: ['diagnosis', 'medications'],
    success: true,
    source_ip: '10.1.2.3',
    user_agent: 'bench-producer/1.0',
    details: { ward: `${index % 40}` },
  };
}

/** The same producer event as the write path receives it (NewEvent), for benchmarks that write below HTTP. */
export function producerNewEvent(tenantId: string, index: number): NewEvent {
  return {
    tenantId,
    occurredAtMs: Date.now(),
    eventId: randomUUID(),
    action: index % 3 === 0 ? 'phi.read' : 'phi.query',
    userId: `user-${index % 500}`,
    userRole: 'clinician',
    resourceType: 'patient_record',
    resourceId: `p-${index}`,
    fieldsAccessed: '["diagnosis","medications"]',
    phiInvolved: true,
    sourceIp: '10.1.2.3',
    userAgent: 'bench-producer/1.0',
    justification: '',
    success: true,
    details: `{"ward":"${index % 40}"}`,
  };
}
