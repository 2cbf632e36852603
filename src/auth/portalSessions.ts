/**
 * Customer portal sessions (docs/portal.md "Sessions"). A platform's backend mints one with a key holding
 * `portal:sessions`; the answer's link opens the portal for that tenant. Three secrets, each with one job:
 *
 * - the link token (`psl_…`), in the link's fragment (never sent to a server by the browser, so never in an
 *   access log or a Referer), exchanged once: the first exchange wins, any later one is refused;
 * - the access token (`psa_…`), returned by the exchange and held in the page's memory, sent as a bearer
 *   on the portal's calls to the public API, where it is a key whose scopes are the session's capabilities.
 *   A bearer works in a frame of another site, where browsers withhold SameSite=Strict (and third-party)
 *   cookies, and a browser never attaches it by itself, so no other site can make requests with it (no CSRF);
 * - the browser secret (`psb_…`), an HttpOnly, SameSite=Strict cookie scoped to the portal's session paths,
 *   which lets a reload of the page get its access token again without the (used) link.
 *
 * Every request reads the session row (a primary-key lookup joined with its key): ending a session, its
 * expiry, or revoking the key that minted it takes effect on the next request, on every api instance.
 */
import { createHmac, randomBytes, timingSafeEqual, type KeyObject, createSecretKey } from 'node:crypto';
import { z } from 'zod';
import type { Queryable } from '../db/database.ts';
import { adminEvent, type Actor } from '../events/adminEvent.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { AppError, ForbiddenError, NotFoundError, UnauthorizedError } from '../platform/errors.ts';
import { parseInput } from '../platform/inputValidation.ts';
import type { Principal } from './apiKeyVerifier.ts';
import {
  endPortalSession,
  findLiveSession,
  findPortalSession,
  insertPortalSession,
  useLink,
  type LiveSession,
  type PortalSessionRecord,
} from './portalSessionStore.ts';
import { hashKeySecret } from './apiKeyFormat.ts';
import type { Scope } from './scopes.ts';

export type { PortalSessionRecord };

const PORTAL_SESSION_ID_PATTERN = /^pss_[0-9a-f]{32}$/;
const LINK_TOKEN = /^psl_([0-9a-f]{32})_([0-9a-f]{64})$/;
const BROWSER_SECRET = /^psb_([0-9a-f]{32})_([0-9a-f]{64})$/;
const ACCESS_TOKEN = /^psa_([0-9a-f]{32})_([0-9a-f]{64})$/;

/**
 * What a session may be granted: the scopes of what the portal shows (the trail, the export, webhooks, log
 * streams). A session never mints sessions: portal:sessions is not offered.
 */
export const CAPABILITIES = ['audit:read', 'audit:export', 'webhooks:write', 'streams:write'] as const satisfies readonly Scope[];

export const portalSessionRequestSchema = z
  .strictObject({
    ttl_s: z
      .int('must be an integer number of seconds')
      .min(60, 'must be from 60 to 3600')
      .max(3600, 'must be from 60 to 3600')
      .default(900)
      .meta({ description: 'How long the session lives, from now: 60 to 3600 seconds (default 900). The link is valid as long.' }),
    capabilities: z
      .array(z.enum(CAPABILITIES, { message: `must be one of ${CAPABILITIES.join(', ')}` }))
      .min(1)
      .max(CAPABILITIES.length)
      .refine((list) => list.includes('audit:read'), 'must include audit:read: every page of the portal reads the trail')
      .default(['audit:read'])
      .meta({
        description:
          'Scopes of the calling key the session gets (default audit:read, which it must include); a capability not granted is absent from the portal and refused by the API.',
      }),
  })
  .meta({ id: 'PortalSessionRequest' });

/** 410: the link or session can no longer be used, and the page says which. */
class PortalSessionGoneError extends AppError {
  readonly status = 410;
  readonly code: 'portal_link_used' | 'portal_session_expired' | 'portal_session_ended';

  constructor(code: PortalSessionGoneError['code'], message: string) {
    super(message);
    this.code = code;
  }
}

export interface MintedSession {
  readonly session: PortalSessionRecord;
  /** The link's token: shown once to the minting backend, never stored. */
  readonly linkToken: string;
}

export interface OpenedSession {
  readonly session: PortalSessionRecord;
  readonly accessToken: string;
  /** Set only by the exchange: the cookie's value. */
  readonly browserSecret?: string;
}

export interface PortalSessionsOptions {
  readonly db: Queryable;
  /** Mint and end, each with its admin.portal_session.* event in one transaction. */
  readonly writer: EventWriter;
  readonly pepper: string;
}

export class PortalSessions {
  private readonly db: Queryable;
  private readonly writer: EventWriter;
  private readonly pepperKey: KeyObject;
  // Access tokens are MACs of the session id under a key of their own, derived from the pepper.
  private readonly accessKey: KeyObject;

  constructor(options: PortalSessionsOptions) {
    this.db = options.db;
    this.writer = options.writer;
    this.pepperKey = createSecretKey(Buffer.from(options.pepper, 'utf8'));
    this.accessKey = createSecretKey(createHmac('sha256', this.pepperKey).update('audit-trail portal access token v1').digest());
  }

  /** Mints a session for the calling key's tenant; `input` is the request body. */
  async mint(caller: Principal, input: unknown, actor: Actor): Promise<MintedSession> {
    const request = parseInput(portalSessionRequestSchema, input);
    const capabilities = [...new Set(request.capabilities)].sort();
    const missing = capabilities.find((capability) => !caller.scopes.has(capability));
    if (missing) throw new ForbiddenError(`A session gets at most its key's scopes, and this key lacks ${missing}.`, missing);
    const idHex = randomBytes(16).toString('hex');
    const linkSecret = randomBytes(32).toString('hex');
    const session = await this.writer.recordWith('internal', async (client) => {
      const record = await insertPortalSession(client, {
        id: `pss_${idHex}`,
        tenantId: caller.tenantId,
        capabilities,
        mintedBy: caller.lookupId,
        linkHash: hashKeySecret(this.pepperKey, linkSecret),
        ttlSeconds: request.ttl_s,
      });
      return { result: record, events: [sessionEvent('admin.portal_session.create', record, actor)] };
    });
    return { session, linkToken: `psl_${idHex}_${linkSecret}` };
  }

  /**
   * Exchanges the link's token for the browser's session, once. A wrong or unknown token is the uniform
   * 401; a right one that cannot be used any more says why (410), so the page can tell the person.
   */
  async exchange(linkToken: string): Promise<OpenedSession> {
    const match = LINK_TOKEN.exec(linkToken);
    if (!match) throw new UnauthorizedError('malformed portal link token');
    const id = `pss_${match[1]}`;
    const live = await findLiveSession(this.db, id);
    this.checkSecret(live?.linkHash, match[2]!, id);
    refuseIfOver(live!);
    if (live!.linkUsedAt)
      throw new PortalSessionGoneError('portal_link_used', 'This link has been used already; each link opens the portal once.');
    const browserSecret = randomBytes(32).toString('hex');
    const used = await useLink(this.db, id, hashKeySecret(this.pepperKey, browserSecret));
    // Another exchange, an end or the expiry came between the read and the update.
    if (!used) throw new PortalSessionGoneError('portal_link_used', 'This link has been used already; each link opens the portal once.');
    return { session: used, accessToken: this.accessTokenOf(id), browserSecret: `psb_${match[1]}_${browserSecret}` };
  }

  /** A reload of the page: the browser's cookie gets the access token again while the session lives. */
  async resume(browserSecret: string): Promise<OpenedSession> {
    const match = BROWSER_SECRET.exec(browserSecret);
    if (!match) throw new UnauthorizedError('malformed portal browser secret');
    const id = `pss_${match[1]}`;
    const live = await findLiveSession(this.db, id);
    this.checkSecret(live?.browserHash ?? undefined, match[2]!, id);
    refuseIfOver(live!);
    return { session: live!, accessToken: this.accessTokenOf(id) };
  }

  /** The caller behind an access token; the uniform 401 for anything but a live session. */
  async verifyAccess(token: string): Promise<Principal> {
    const match = ACCESS_TOKEN.exec(token);
    if (!match) throw new UnauthorizedError('malformed portal access token');
    const id = `pss_${match[1]}`;
    const expected = Buffer.from(this.accessTokenOf(id).slice(-64), 'hex');
    if (!timingSafeEqual(expected, Buffer.from(match[2]!, 'hex'))) throw new UnauthorizedError(`wrong portal access token (${id})`);
    const live = await findLiveSession(this.db, id);
    if (!live?.linkUsedAt || live.endedAt || live.expired || live.keyScopes === null) {
      throw new UnauthorizedError(`portal session over or unknown (${id})`);
    }
    // The key's scopes now: a session never outgrows the key that minted it, even after the key changes.
    const keyScopes = new Set(live.keyScopes);
    return {
      kind: 'portal_session',
      tenantId: live.tenantId,
      lookupId: id,
      scopes: new Set(live.capabilities.filter((capability) => keyScopes.has(capability))),
    };
  }

  /** Ends a session of the tenant at once; ending an ended one is a no-op that returns it. */
  async end(tenantId: string, id: string, actor: Actor): Promise<PortalSessionRecord> {
    if (!PORTAL_SESSION_ID_PATTERN.test(id)) throw new NotFoundError('No such portal session.');
    const ended = await this.writer.recordWith('internal', async (client) => {
      const record = await endPortalSession(client, tenantId, id);
      return { result: record, events: record ? [sessionEvent('admin.portal_session.end', record, actor)] : [] };
    });
    if (ended) return ended;
    const existing = await findPortalSession(this.db, tenantId, id);
    if (!existing) throw new NotFoundError('No such portal session.');
    return existing;
  }

  private accessTokenOf(id: string): string {
    return `psa_${id.slice(4)}_${createHmac('sha256', this.accessKey).update(id).digest('hex')}`;
  }

  /** Compares in constant time, and does the same work for an unknown session as for a known one. */
  private checkSecret(storedHash: Buffer | undefined, secret: string, id: string): void {
    const presented = hashKeySecret(this.pepperKey, secret);
    const matches = timingSafeEqual(presented, storedHash ?? DECOY_HASH);
    if (!storedHash || !matches) throw new UnauthorizedError(`unknown portal session or wrong secret (${id})`);
  }
}

const DECOY_HASH = Buffer.alloc(32);

function refuseIfOver(session: LiveSession): void {
  if (session.endedAt) throw new PortalSessionGoneError('portal_session_ended', 'This portal session has been ended.');
  if (session.keyScopes === null) {
    throw new PortalSessionGoneError('portal_session_ended', 'This portal session has ended: the key that opened it was revoked.');
  }
  if (session.expired) throw new PortalSessionGoneError('portal_session_expired', 'This portal session has expired.');
}

function sessionEvent(action: string, session: PortalSessionRecord, actor: Actor) {
  return adminEvent({
    tenantId: session.tenantId,
    action,
    actor,
    resourceType: 'portal_session',
    resourceId: session.id,
    // Never a token, a secret or a hash: what an auditor needs to know about the grant.
    details: {
      capabilities: session.capabilities,
      expires_at: session.expiresAt.toISOString(),
      minted_by: `api_key:${session.mintedBy}`,
    },
  });
}
