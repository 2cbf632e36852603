import type { DeclareOutcome } from '../lifecycle/retentionPolicies.ts';
import type { RetentionPolicyRecord } from '../lifecycle/retentionStore.ts';
import type { Health } from './conditions.ts';

/**
 * What a RetentionPolicy resource shows, decided without I/O (retentionPolicyReconciler.ts reads and
 * reports): a policy in force is Ready (Locked or Applied) unless its archive before expiry is failing, which
 * stalls it while the policy goes on applying; status.enforced shows the stored period, or, while none is
 * stored, what status showed before; an applied change is told with the period it replaced.
 */

/** The PolicyApplied Event's message for a change applied; undefined when nothing changed. */
export function appliedMessage(outcome: Exclude<DeclareOutcome, { kind: 'refused' }>): string | undefined {
  if (outcome.kind !== 'applied') return undefined;
  const was = outcome.previous ? ` (was ${outcome.previous.period.text}${outcome.previous.locked ? ', locked' : ''})` : '';
  return `${describe(outcome.policy)}${was}.`;
}

/** The health of a policy in force, given the tenant's archive failure if any. */
export function policyHealth(policy: RetentionPolicyRecord, archiveFailure: { failedAt: Date; reason: string } | undefined): Health {
  if (archiveFailure) {
    // The policy is in force; what is not happening is its expiry, which waits for the archive.
    const message = `${describe(policy)}. Archiving before expiry failed at ${archiveFailure.failedAt.toISOString()}: ${archiveFailure.reason}. Nothing of that range expired; the next pass tries again.`;
    return { state: 'Stalled', reason: 'ArchiveFailing', message };
  }
  return { state: 'Ready', reason: policy.locked ? 'Locked' : 'Applied', message: readyMessage(policy) };
}

/** status.enforced and status.locked: the stored policy's, or what status showed before. */
export function policyStatus(
  enforced: RetentionPolicyRecord | undefined,
  previous: { enforced?: string; locked?: boolean } | undefined,
): { enforced: string | undefined; locked: boolean | undefined } {
  return enforced
    ? { enforced: enforced.period.text, locked: enforced.locked }
    : { enforced: previous?.enforced, locked: previous?.locked };
}

function describe(policy: RetentionPolicyRecord): string {
  return `Tenant ${policy.tenantId} keeps its events ${policy.period.text}${policy.locked ? ' (locked)' : ''}`;
}

function readyMessage(policy: RetentionPolicyRecord): string {
  const archive = policy.archive
    ? ` Expiring events are archived to s3://${String(policy.archive.bucket)} first, and expire only once the archive is read back intact.`
    : '';
  return `${describe(policy)}.${archive}`;
}
