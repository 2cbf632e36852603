import type { ApiKeyRecord } from '../auth/apiKeyStore.ts';
import { parseCidr } from '../platform/cidr.ts';
import type { Health } from './conditions.ts';
import type { SecretState } from './kubeResources.ts';
import { ROTATE_ANNOTATION, type ApiKeySpec } from './resources.ts';

/**
 * What a reconcile of a live ApiKey resource does, decided without I/O: apiKeyReconciler.ts reads the key's
 * record, its Secret and the rotate annotation, hands them in, and carries out the answer. In order:
 *
 * - `spec.revoked`: the key is revoked (if it is not yet), whatever became of the Secret: a settled state.
 * - a Secret of that name owned by someone else: nothing is minted, revoked or rewritten (SecretConflict).
 * - no key yet: one is minted into the Secret.
 * - a rotation asked for (the annotation's new value): a new key, the old one revoked.
 * - a key that never reached anyone (neither the Secret nor status shows it: a crash in between): rotated.
 * - a delivered key whose Secret was deleted or changed: the key keeps working; SecretMissing says how to get
 *   a new one.
 * - otherwise the key is settled (settleApiKey): revoked outside Kubernetes, grants to update, or active.
 */
export type ApiKeyStep =
  | { readonly kind: 'revoked'; readonly revokeFirst: boolean }
  | { readonly kind: 'secret-conflict' }
  | { readonly kind: 'mint' }
  /** `request`: the annotation value handled, for status; undefined when no one asked (an undelivered key). */
  | { readonly kind: 'rotate'; readonly record: ApiKeyRecord; readonly request: string | undefined }
  | { readonly kind: 'secret-missing'; readonly health: Health }
  | { readonly kind: 'settle'; readonly record: ApiKeyRecord };

export interface ApiKeyFacts {
  readonly spec: ApiKeySpec;
  /** The key this resource manages, if one was minted. */
  readonly record: ApiKeyRecord | undefined;
  /** The rotate annotation's value when it asks for a rotation not handled yet. */
  readonly rotation: string | undefined;
  /** The Secret spec.secretName names; not read (undefined) for a revoked key, whose Secret does not matter. */
  readonly secret: SecretState | undefined;
  /** The key status shows. */
  readonly statusLookupId: string | undefined;
}

/** Keys of the Secret the controller writes for an ApiKey. */
export const SECRET_KEY_FIELD = 'apiKey';
export const SECRET_LOOKUP_FIELD = 'lookupId';

export function decideApiKey(facts: ApiKeyFacts): ApiKeyStep {
  const { spec, record, rotation, secret } = facts;
  if (spec.revoked) return { kind: 'revoked', revokeFirst: record !== undefined && !record.revokedAt };
  if (secret?.state === 'foreign') return { kind: 'secret-conflict' };
  if (!record) return { kind: 'mint' };
  if (rotation !== undefined) return { kind: 'rotate', record, request: rotation };
  if (delivers(secret, record) || record.revokedAt) return { kind: 'settle', record };
  if (facts.statusLookupId !== record.lookupId) return { kind: 'rotate', record, request: undefined };
  const what =
    secret?.state !== 'owned'
      ? `Secret ${spec.secretName} was deleted`
      : `Secret ${spec.secretName} no longer holds key ${record.lookupId}`;
  return {
    kind: 'secret-missing',
    health: {
      state: 'Stalled',
      reason: 'SecretMissing',
      message: `${what}; the key still works. To mint a new key into a new Secret, set annotation ${ROTATE_ANNOTATION} to a new value.`,
    },
  };
}

/** What a key that is where it should be still needs: recognising a revocation made elsewhere, or its grants brought in line. */
export function settleApiKey(
  record: ApiKeyRecord,
  spec: ApiKeySpec,
): { readonly kind: 'revoked-outside'; readonly health: Health } | { readonly kind: 'update-grants' | 'active' } {
  if (record.revokedAt) {
    return {
      kind: 'revoked-outside',
      health: {
        state: 'Stalled',
        reason: 'RevokedOutsideKubernetes',
        message: `Key ${record.lookupId} was revoked outside Kubernetes (audit-trail keys revoke). Set spec.revoked: true to accept that, or annotation ${ROTATE_ANNOTATION} to a new value for a new key.`,
      },
    };
  }
  return { kind: grantsChanged(record, spec) ? 'update-grants' : 'active' };
}

/** Whether the Secret is this resource's own and holds the key of `record`. */
export function delivers(secret: SecretState | undefined, record: ApiKeyRecord): boolean {
  return secret?.state === 'owned' && secret.values[SECRET_LOOKUP_FIELD] === record.lookupId;
}

export function activeHealth(record: ApiKeyRecord): Health {
  return { state: 'Ready', reason: 'Active', message: `Key ${record.lookupId} is active.` };
}

export function revokedHealth(record: ApiKeyRecord | undefined): Health {
  const message = record ? `Key ${record.lookupId} is revoked (spec.revoked).` : 'The key was revoked before it was minted.';
  return { state: 'Ready', reason: 'Revoked', message };
}

export function grantsOf(spec: ApiKeySpec) {
  return { tenantId: spec.tenantId, scopes: spec.scopes, allowedCidrs: spec.allowedCidrs ?? [], description: spec.description ?? '' };
}

/** Compared as stored: CIDRs normalised (a bare address is a /32 or /128), order irrelevant. */
function grantsChanged(record: ApiKeyRecord, spec: ApiKeySpec): boolean {
  const sorted = (values: readonly string[]) => JSON.stringify([...values].sort());
  const normalised = (cidr: string) => {
    try {
      return parseCidr(cidr).text;
    } catch {
      return cidr; // refused by updateGrants with a clear error
    }
  };
  return (
    sorted(record.scopes) !== sorted(spec.scopes) ||
    sorted(record.allowedCidrs) !== sorted((spec.allowedCidrs ?? []).map(normalised)) ||
    record.description !== (spec.description ?? '')
  );
}
