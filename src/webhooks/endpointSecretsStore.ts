import { prepared, type Queryable } from '../db/database.ts';
import type { SealedSecrets } from './secretBox.ts';

/*
 * The sealed signing secrets of webhook_endpoints, as every reader gets them: the rule of which ones are
 * valid now lives here and nowhere else. webhookStore.ts writes them (registration, rotation) and reads
 * their expiry for the endpoint it returns.
 */

/**
 * Which secrets are valid now, written once for every read (docs/webhooks.md "Rotating the signing secret"):
 * a rotation's previous secret signs until its expiry, never after, and reads as none once it has expired.
 * The signer applies the rule again at the moment of signing (secretBox.secretsSigningAt).
 */
const PREVIOUS_SECRET_SIGNS = 'previous_secret_expires_at > now()';
export const PREVIOUS_SECRET_EXPIRY = `CASE WHEN ${PREVIOUS_SECRET_SIGNS} THEN previous_secret_expires_at END AS previous_secret_expires_at`;
/** The columns sealedSecretsOf reads. */
const SEALED_SECRETS = `secret_ciphertext,
  CASE WHEN ${PREVIOUS_SECRET_SIGNS} THEN previous_secret_ciphertext END AS previous_secret_ciphertext,
  ${PREVIOUS_SECRET_EXPIRY}`;

interface SealedSecretsRow {
  secret_ciphertext: Buffer;
  previous_secret_ciphertext: Buffer | null;
  previous_secret_expires_at: Date | null;
  [column: string]: unknown;
}

function sealedSecretsOf(row: SealedSecretsRow): SealedSecrets {
  const previous =
    row.previous_secret_ciphertext && row.previous_secret_expires_at
      ? { ciphertext: row.previous_secret_ciphertext, expiresAt: row.previous_secret_expires_at }
      : null;
  return { current: row.secret_ciphertext, previous };
}

/** The endpoint's sealed secrets: the current one, and the previous one while it is still valid. */
export async function findEndpointSecrets(db: Queryable, id: string): Promise<SealedSecrets | undefined> {
  const { rows } = await db.query<SealedSecretsRow>(`SELECT ${SEALED_SECRETS} FROM webhook_endpoints WHERE id = $1`, [id]);
  return rows[0] ? sealedSecretsOf(rows[0]) : undefined;
}

/** What a delivery attempt needs of its endpoint. */
export interface AttemptTarget {
  readonly id: string;
  readonly active: boolean;
  readonly url: string;
  readonly secrets: SealedSecrets;
}

/**
 * The endpoints of a batch of deliveries, read once each: a batch is mostly deliveries to a few endpoints,
 * and repeating each one's URL and sealed secrets on every delivery was most of the bytes a worker parsed.
 */
export async function findAttemptTargets(db: Queryable, ids: readonly string[]): Promise<Map<string, AttemptTarget>> {
  const { rows } = await db.query<SealedSecretsRow & { id: string; active: boolean; url: string }>(
    prepared(`SELECT id, active, url, ${SEALED_SECRETS} FROM webhook_endpoints WHERE id = ANY($1::text[])`, [ids]),
  );
  return new Map(rows.map((row) => [row.id, { id: row.id, active: row.active, url: row.url, secrets: sealedSecretsOf(row) }]));
}
