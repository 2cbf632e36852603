import { prepared, type Queryable } from '../db/database.ts';
import type { SealedSecrets } from './secretBox.ts';

/*
 * The sealed signing secrets of webhook_endpoints, as every reader gets them: the rule of which ones are
 * valid now lives here and nowhere else. webhookStore.ts writes them (registration, rotation), and an
 * endpoint read (webhookEndpoint.ts) carries their expiry.
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
  ${PREVIOUS_SECRET_EXPIRY}, signature_schemes, headers_ciphertext,
  CASE WHEN 'ed25519' = ANY (signature_schemes) THEN ed25519_key_ciphertext END AS ed25519_key_ciphertext,
  CASE WHEN 'ed25519' = ANY (signature_schemes) AND ${PREVIOUS_SECRET_SIGNS} THEN previous_ed25519_key_ciphertext END
    AS previous_ed25519_key_ciphertext`;

interface SealedSecretsRow {
  secret_ciphertext: Buffer;
  previous_secret_ciphertext: Buffer | null;
  previous_secret_expires_at: Date | null;
  signature_schemes: string[];
  headers_ciphertext: Buffer | null;
  ed25519_key_ciphertext: Buffer | null;
  previous_ed25519_key_ciphertext: Buffer | null;
  [column: string]: unknown;
}

function sealedSecretsOf(row: SealedSecretsRow): SealedSecrets {
  const previous =
    row.previous_secret_ciphertext && row.previous_secret_expires_at
      ? { ciphertext: row.previous_secret_ciphertext, expiresAt: row.previous_secret_expires_at }
      : null;
  const ed25519 = row.ed25519_key_ciphertext
    ? { current: row.ed25519_key_ciphertext, previous: row.previous_ed25519_key_ciphertext }
    : null;
  return {
    current: row.secret_ciphertext,
    previous,
    hmac: row.signature_schemes.includes('hmac'),
    ed25519,
    headers: row.headers_ciphertext,
  };
}

/** The endpoint's sealed secrets: the current one, and the previous one while it is still valid. */
export async function findEndpointSecrets(db: Queryable, id: string): Promise<SealedSecrets | undefined> {
  const { rows } = await db.query<SealedSecretsRow>(`SELECT ${SEALED_SECRETS} FROM webhook_endpoints WHERE id = $1`, [id]);
  return rows[0] ? sealedSecretsOf(rows[0]) : undefined;
}

/** What a delivery attempt needs of its endpoint; null settings are the service's defaults. */
export interface AttemptTarget {
  readonly id: string;
  readonly active: boolean;
  readonly url: string;
  readonly secrets: SealedSecrets;
  readonly timeoutS: number | null;
  readonly retryScheduleS: readonly number[] | null;
  readonly rateLimitPerS: number | null;
  readonly ordered: boolean;
}

/**
 * The endpoints of a batch of deliveries, read once each: a batch is mostly deliveries to a few endpoints,
 * and repeating each one's URL and sealed secrets on every delivery was most of the bytes a worker parsed.
 */
export async function findAttemptTargets(db: Queryable, ids: readonly string[]): Promise<Map<string, AttemptTarget>> {
  const { rows } = await db.query<
    SealedSecretsRow & {
      id: string;
      active: boolean;
      url: string;
      timeout_s: number | null;
      retry_schedule_s: number[] | null;
      rate_limit_per_s: number | null;
      ordered: boolean;
    }
  >(
    prepared(
      `SELECT id, active, url, timeout_s, retry_schedule_s, rate_limit_per_s, ordered, ${SEALED_SECRETS}
       FROM webhook_endpoints WHERE id = ANY($1::text[])`,
      [ids],
    ),
  );
  return new Map(
    rows.map((row) => [
      row.id,
      {
        id: row.id,
        active: row.active,
        url: row.url,
        secrets: sealedSecretsOf(row),
        timeoutS: row.timeout_s,
        retryScheduleS: row.retry_schedule_s,
        rateLimitPerS: row.rate_limit_per_s,
        ordered: row.ordered,
      },
    ]),
  );
}
