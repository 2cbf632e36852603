import { createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';
import type { Queryable } from '../db/database.ts';
import { NotificationListener } from '../db/notificationListener.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import { addressInRanges, parseAddress, parseCidr, type Cidr } from '../platform/cidr.ts';
import { UnauthorizedError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import { hashKeySecret, parseApiKey, type KeyEnvironment } from './apiKeyFormat.ts';
import { findApiKeyOrDecoy, type ApiKeyRecord } from './apiKeyStore.ts';

/** Who is calling, once the key checked out. */
export interface Principal {
  /** An operator-minted key, or a customer portal session (auth/portalSessions.ts) acting like one. */
  readonly kind: 'api_key' | 'portal_session';
  readonly tenantId: string;
  /** The key's lookup id, or the session's id: what rate limits and logs are keyed by. */
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
   * How long a key stays cached. Revocation must reach every instance within 5 s (docs/api.md), and the
   * notification is only an accelerator: the TTL alone keeps that promise if a notification is lost.
   */
  readonly cacheTtlMs?: number;
  readonly cacheMaxEntries?: number;
  /** Measures the cache lifetime. */
  readonly clock?: Clock;
}

interface CachedKey {
  readonly key: VerifiableKey;
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
  private readonly clock: Clock;
  private readonly decoy: VerifiableKey;
  // The pepper as a KeyObject: imported once, not on every request's HMAC.
  private readonly pepperKey: KeyObject;
  private readonly listener: NotificationListener;

  constructor(options: ApiKeyVerifierOptions) {
    this.options = options;
    this.ttlMs = options.cacheTtlMs ?? 4_000;
    this.maxEntries = options.cacheMaxEntries ?? 50_000;
    this.clock = options.clock ?? systemClock;
    this.pepperKey = createSecretKey(Buffer.from(options.pepper, 'utf8'));
    this.decoy = {
      principal: { kind: 'api_key', tenantId: '', lookupId: '', scopes: new Set() },
      // The HMAC of a text no key's secret can be (secrets are 32 hex characters).
      secretHash: hashKeySecret(this.pepperKey, 'decoy-secret-that-matches-no-key'),
      environment: options.environment,
      revoked: true,
      allowedCidrs: [],
    };
    this.listener = new NotificationListener({
      databaseUrl: options.databaseUrl,
      channel: NOTIFY_CHANNEL,
      name: 'audit-trail key-listener',
      log: options.log,
      onNotification: (lookupId) => this.invalidate(lookupId),
      // Changes made while nobody listened are unknown: start again from an empty cache.
      onGap: () => this.invalidate(),
    });
  }

  /** Subscribes to key changes; failures to connect are retried in the background, never fatal. */
  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }

  /**
   * Only a key that passes is answered from the cache. Every failure is decided on the key as Postgres has
   * it now, so that an unknown lookup id and a known one with a wrong secret cost the same round trip: a
   * 401 answered from the cache for a recently used id, and after a database lookup for an unknown one,
   * told a prober which ids exist and were in use (1.2 ms against 2.3 ms median, z = 35 over 3,000
   * samples each). A failure also sees a revocation at once, not after the cache's TTL.
   */
  async verify(authorization: string | undefined, clientAddress: string): Promise<Principal> {
    const match = authorization === undefined ? null : /^Bearer ([^\s]+)$/i.exec(authorization);
    const parsed = match ? parseApiKey(match[1]!) : undefined;
    if (!parsed) throw new UnauthorizedError('malformed or missing Authorization header');
    const presented = hashKeySecret(this.pepperKey, parsed.secret);
    // An unknown id is checked against a decoy that no secret opens: the same steps as for a known one.
    const cached = this.cached(parsed.lookupId) ?? this.decoy;
    if (this.failure(cached, presented, parsed.environment, clientAddress) === undefined) return cached.principal;
    const key = await this.load(parsed.lookupId);
    const failure = this.failure(key, presented, parsed.environment, clientAddress);
    if (failure === undefined) return key.principal;
    throw new UnauthorizedError(`${failure} (lookup ${parsed.lookupId})`);
  }

  /** Why the presented secret does not open this key from this address; undefined when it does. */
  private failure(key: VerifiableKey, presented: Buffer, environment: KeyEnvironment, clientAddress: string): string | undefined {
    if (!timingSafeEqual(presented, key.secretHash)) return 'unknown key or wrong secret';
    if (key.environment !== this.options.environment || environment !== this.options.environment) return 'key of another environment';
    if (key.revoked) return 'revoked key';
    if (key.allowedCidrs.length > 0) {
      const address = parseAddress(clientAddress);
      if (!address || !addressInRanges(address, key.allowedCidrs)) return "client address outside the key's allow-list";
    }
    return undefined;
  }

  /** Drops a cached key, so the next request reads it again. */
  invalidate(lookupId?: string): void {
    if (lookupId === undefined) this.cache.clear();
    else this.cache.delete(lookupId);
  }

  private cached(lookupId: string): VerifiableKey | undefined {
    const cached = this.cache.get(lookupId);
    return cached && cached.expiresAt > this.clock.now() ? cached.key : undefined;
  }

  /**
   * Reads the key from Postgres and caches what it found. An unknown id reads as a revoked decoy in a row of
   * the same shape (so it costs what a known id costs) and is not cached: a lookup that fails is never
   * answered from the cache anyway, and caching guesses would let a prober fill it.
   */
  private async load(lookupId: string): Promise<VerifiableKey> {
    const { found, record } = await findApiKeyOrDecoy(this.options.db, lookupId, this.decoy);
    const key = toVerifiable(record);
    if (!found) {
      this.cache.delete(lookupId);
      return key;
    }
    if (this.cache.size >= this.maxEntries) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(lookupId, { key, expiresAt: this.clock.now() + this.ttlMs });
    return key;
  }
}

function toVerifiable(record: ApiKeyRecord): VerifiableKey {
  return {
    principal: { kind: 'api_key', tenantId: record.tenantId, lookupId: record.lookupId, scopes: new Set(record.scopes) },
    secretHash: record.secretHash,
    environment: record.environment,
    revoked: record.revokedAt !== null,
    allowedCidrs: record.allowedCidrs.map(parseCidr),
  };
}
