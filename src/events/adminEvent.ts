import type { NewEvent } from './eventStore.ts';
import { uuidv7 } from './uuidv7.ts';
import { systemClock } from '../platform/clock.ts';

/** Who performed an admin action, as recorded in the tenant's trail. */
export interface Actor {
  readonly userId: string;
  readonly userRole: string;
  /** Where the request came from, when an API call made the change. */
  readonly sourceIp?: string;
  readonly userAgent?: string;
}

/**
 * An event the service writes about its own administration or use (`admin.key.create`,
 * `admin.webhook.disable`, `audit.export`, …), dated now. `details` must hold only what an auditor needs:
 * never a key, a hash or a secret.
 */
export function adminEvent(change: {
  tenantId: string;
  action: string;
  actor: Actor;
  resourceType: string;
  resourceId: string;
  details: Record<string, unknown>;
  /** false for an action that was refused or did not complete. */
  success?: boolean;
}): NewEvent {
  const now = systemClock.now();
  return {
    tenantId: change.tenantId,
    occurredAtMs: now,
    eventId: uuidv7(now),
    action: change.action,
    userId: change.actor.userId,
    userRole: change.actor.userRole,
    resourceType: change.resourceType,
    resourceId: change.resourceId,
    fieldsAccessed: '',
    phiInvolved: false,
    sourceIp: change.actor.sourceIp ?? '',
    userAgent: change.actor.userAgent ?? 'audit-trail',
    justification: '',
    success: change.success ?? true,
    details: JSON.stringify(change.details),
  };
}
