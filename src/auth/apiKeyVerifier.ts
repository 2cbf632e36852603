import { timingSafeEqual } from 'node:crypto';
import pg from 'pg';
import type { Queryable } from '../db/database.ts';
import { addressInRanges, parseAddress, parseCidr, type Cidr } from '../platform/cidr.ts';
import { UnauthorizedError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import { hashKeySecret, parseApiKey, type KeyEnvironment } from './apiKeyFormat.ts';
import { findApiKey, type ApiKeyRecord } from './apiKeyStore.ts';

/** Who is calling, once the key checked out. */
export interface Principal {
  readonly tenantId: string;
  readonly lookupId: string;
  readonly scopes: ReadonlySet<string>;
}

export interface ApiKeyVerifierOptions {
  readonly db: Queryable;
  /** A connection string for the LISTEN connection, which cannot be a pooled one. */
  readonly databaseUrl: string;
  readonly pepper: string;
  readonly environment: KeyEnvironment;
  readonly log: Logger;
  /**
   * How long a key stays cached. Revocation must reach every instance within 5 s (DESIGN.md), and the
   * notification is only an accelerator: the TTL alone keeps that promise if a notification is lost.
   */
  readonly cacheTtlMs?: number;
  readonly cacheMaxEntries?: number;
}

interface CachedKey {
  readonly key: VerifiableKey | undefined;
  readonly expiresAt: number;
}

interface VerifiableKey {
  readonly principal: Principal;
  readonly secretHash: Buffer;
  readonly environment: KeyEnvironment;
  readonly revoked: boolean;
  readonly allowedCidrs: readonly Cidr[];
}

const NOTIFY_CHANNEL = 'audit_api_key_changed';

/**
 * Checks bearer keys. Every failure is the same UnauthorizedError (its message is for logs only), and an
 * unknown lookup id costs the same HMAC and comparison as a known one, so timing does not reveal which
 * ids exist.
 */
export class ApiKeyVerifier {
  private readonly options: ApiKeyVerifierOptions;
  private readonly cache = new Map<string, CachedKey>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly decoyHash: Buffer;
  private listener: pg.Client | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: ApiKeyVerifierOptions) {
    this.options = options;
    this.ttlMs = options.cacheTtlMs ?? 4_000;
    this.maxEntries = options.cacheMaxEntries ?? 50_000;
    this.decoyHash = hashKeySecret(options.pepper, 'decoy-secret-that-matches-no-key');
  }

  /** Subscribes to key changes; failures to connect are retried in the background, never fatal. */
  async start(): Promise<void> {
    await this.listen().catch((error: Error) => {
      this.options.log.warn({ err: error }, 'key change notifications unavailable; relying on cache expiry');
      this.scheduleReconnect();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    await this.listener?.end().catch(() => undefined);
  }

  async verify(authorization: string | undefined, clientAddress: string): Promise<Principal> {
    const match = authorization === undefined ? null : /^Bearer ([^\s]+)$/i.exec(authorization);
    const parsed = match ? parseApiKey(match[1]!) : undefined;
    if (!parsed) throw new UnauthorizedError('malformed or missing Authorization header');
    const key = await this.lookup(parsed.lookupId);
    const presented = hashKeySecret(this.options.pepper, parsed.secret);
    const secretMatches = timingSafeEqual(presented, key?.secretHash ?? this.decoyHash);
    if (!key || !secretMatches) throw new UnauthorizedError(`unknown key or wrong secret (lookup ${parsed.lookupId})`);
    if (key.environment !== this.options.environment || parsed.environment !== this.options.environment) {
      throw new UnauthorizedError(`key of another environment (lookup ${parsed.lookupId})`);
    }
    if (key.revoked) throw new UnauthorizedError(`revoked key (lookup ${parsed.lookupId})`);
    if (key.allowedCidrs.length > 0) {
      const address = parseAddress(clientAddress);
      if (!address || !addressInRanges(address, key.allowedCidrs)) {
        throw new UnauthorizedError(`client address outside the key's allow-list (lookup ${parsed.lookupId})`);
      }
    }
    return key.principal;
  }

  /** Drops a cached key, so the next request reads it again. */
  invalidate(lookupId?: string): void {
    if (lookupId === undefined) this.cache.clear();
    else this.cache.delete(lookupId);
  }

  private async lookup(lookupId: string): Promise<VerifiableKey | undefined> {
    const now = Date.now();
    const cached = this.cache.get(lookupId);
    if (cached && cached.expiresAt > now) return cached.key;
    const record = await findApiKey(this.options.db, lookupId);
    const key = record && toVerifiable(record);
    if (this.cache.size >= this.maxEntries) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(lookupId, { key, expiresAt: now + this.ttlMs });
    return key;
  }

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.options.databaseUrl, application_name: 'audit-trail key-listener' });
    client.on('notification', (message) => this.invalidate(message.payload));
    client.on('error', (error) => {
      this.options.log.warn({ err: error }, 'key change listener lost its connection');
      this.dropListener(client);
    });
    client.on('end', () => this.dropListener(client));
    await client.connect();
    await client.query(`LISTEN ${NOTIFY_CHANNEL}`);
    this.listener = client;
    // Changes made while nobody listened are unknown: start from an empty cache.
    this.invalidate();
  }

  private dropListener(client: pg.Client): void {
    if (this.listener !== client) return;
    this.listener = undefined;
    this.invalidate();
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.stopped) return;
      this.listen().catch(() => this.scheduleReconnect());
    }, 1_000);
    this.reconnectTimer.unref();
  }
}

function toVerifiable(record: ApiKeyRecord): VerifiableKey {
  return {
    principal: { tenantId: record.tenantId, lookupId: record.lookupId, scopes: new Set(record.scopes) },
    secretHash: record.secretHash,
    environment: record.environment,
    revoked: record.revokedAt !== null,
    allowedCidrs: record.allowedCidrs.map(parseCidr),
  };
}
