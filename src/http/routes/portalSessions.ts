import Router from '@koa/router';
import { z } from 'zod';
import type { KeyRateLimiter } from '../../auth/rateLimiter.ts';
import { CAPABILITIES, portalSessionRequestSchema, type OpenedSession, type PortalSessions } from '../../auth/portalSessions.ts';
import type { PortalSessionRecord } from '../../auth/portalSessionStore.ts';
import { ForbiddenError, UnauthorizedError } from '../../platform/errors.ts';
import { countingFailures, requireScope } from '../authenticate.ts';
import { authenticatedResponse, json, ref, standardErrorResponses, type OpenApiContribution } from '../openapi.ts';
import { jsonBody, optionalJsonBody, parseBody, parseQuery } from '../requestInput.ts';
import { actorOf, principalOf, type AppContext, type RequestState } from '../state.ts';
import { noQuerySchema } from './events.ts';
import { systemClock } from '../../platform/clock.ts';

/** Where the browser's cookie is sent: the resume route alone (auth/portalSessions.ts). */
const PORTAL_RESUME_PATH = '/api/v2/public/portal/sessions/resume';
const BROWSER_COOKIE = 'atr_portal_session';

export interface PortalSessionRoutesOptions {
  readonly sessions: PortalSessions;
  /** PUBLIC_BASE_URL: the origin (and path prefix, if any) browsers reach the service at. */
  readonly publicBaseUrl: string | undefined;
  readonly failureLimiter?: KeyRateLimiter;
}

const sessionSchema = z
  .looseObject({
    id: z.string().meta({ example: 'pss_6f1c0e3a9b2d4c5e8f7a6b5c4d3e2f1a' }),
    tenant_id: z.string(),
    capabilities: z.array(z.enum(CAPABILITIES)),
    created_at: z.string().meta({ format: 'date-time' }),
    expires_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'PortalSession' });
const mintedSchema = z
  .looseObject({
    session: sessionSchema,
    url: z.string().meta({
      format: 'uri',
      description:
        'Opens the portal for the tenant, once: hand it to one browser. Its token is in the fragment, which browsers never send.',
    }),
  })
  .meta({ id: 'PortalSessionMinted' });
const openedSchema = z
  .looseObject({
    session: sessionSchema,
    access_token: z.string().meta({ description: "The session's bearer for the public API; hold it in memory only." }),
  })
  .meta({ id: 'PortalSessionOpened' });
const exchangeSchema = z
  .strictObject({ link_token: z.string().max(200).meta({ description: "The token from the link's fragment (#link=…)." }) })
  .meta({ id: 'PortalSessionExchange' });

function toApi(session: PortalSessionRecord) {
  return {
    id: session.id,
    tenant_id: session.tenantId,
    capabilities: session.capabilities,
    created_at: session.createdAt.toISOString(),
    expires_at: session.expiresAt.toISOString(),
  };
}

/** The link a backend hands to a browser: the portal page, with the token in the fragment. */
function portalLink(ctx: AppContext, publicBaseUrl: string | undefined, linkToken: string): string {
  // Without PUBLIC_BASE_URL, the origin the caller reached us at: right for a local service, rarely behind a proxy.
  const base = (publicBaseUrl ?? `${ctx.protocol}://${ctx.host}`).replace(/\/+$/, '');
  return `${base}/portal/#link=${linkToken}`;
}

/** Minting and ending sessions: calls of the platform's backend, with a key holding portal:sessions. */
export function portalSessionRoutes(options: PortalSessionRoutesOptions): Router<RequestState> {
  const { sessions, publicBaseUrl } = options;
  const router = new Router<RequestState>();

  router.post('/portal/sessions', requireScope('portal:sessions'), optionalJsonBody('4kb'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const body: unknown = ctx.request.body === undefined ? {} : ctx.request.body;
    const { session, linkToken } = await sessions.mint(principalOf(ctx), body, actorOf(ctx));
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { session: toApi(session), url: portalLink(ctx, publicBaseUrl, linkToken) };
  });

  router.delete('/portal/sessions/:id', async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const principal = principalOf(ctx);
    const id = ctx.params.id!;
    // A backend's key ends any session of its tenant; a session may end itself (the portal's sign-out).
    const ownSession = principal.kind === 'portal_session' && principal.lookupId === id;
    if (!ownSession && !(principal.kind === 'api_key' && principal.scopes.has('portal:sessions'))) {
      throw new ForbiddenError('Ending a portal session needs the portal:sessions scope, or the session itself.', 'portal:sessions');
    }
    await sessions.end(principal.tenantId, id, actorOf(ctx));
    if (ownSession) clearBrowserCookie(ctx, publicBaseUrl);
    ctx.status = 204;
  });

  return router;
}

/**
 * The browser's side, before it has a bearer: the exchange of the link's token and the resume of a reloaded
 * page. Mounted without key authentication; their failures count against the client address's budget.
 */
export function portalBrowserRoutes(options: PortalSessionRoutesOptions): Router<RequestState> {
  const { sessions, publicBaseUrl, failureLimiter } = options;
  const router = new Router<RequestState>();

  router.post('/portal/sessions/exchange', jsonBody('4kb'), async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    const { link_token: linkToken } = parseBody(exchangeSchema, ctx.request.body);
    const opened = await countingFailures(ctx, failureLimiter, () => sessions.exchange(linkToken));
    setBrowserCookie(ctx, publicBaseUrl, opened.browserSecret!, opened.session.expiresAt.getTime() - systemClock.now());
    respondOpened(ctx, opened);
  });

  router.post('/portal/sessions/resume', async (ctx) => {
    parseQuery(noQuerySchema, ctx.query);
    // SameSite=Strict keeps the cookie off other sites' requests; Fetch Metadata refuses them outright
    // where the browser sends it (every current one does).
    const site = ctx.get('Sec-Fetch-Site');
    if (site !== '' && site !== 'same-origin') throw new UnauthorizedError(`portal resume from a ${site} request`);
    const cookie = ctx.cookies.get(BROWSER_COOKIE);
    const opened = await countingFailures(ctx, failureLimiter, async () => {
      if (!cookie) throw new UnauthorizedError('portal resume without the browser cookie');
      return sessions.resume(cookie);
    });
    respondOpened(ctx, opened);
  });

  return router;
}

function respondOpened(ctx: AppContext, opened: OpenedSession): void {
  ctx.set('Cache-Control', 'no-store');
  ctx.body = { session: toApi(opened.session), access_token: opened.accessToken };
}

function secureCookies(ctx: AppContext, publicBaseUrl: string | undefined): boolean {
  return publicBaseUrl === undefined ? ctx.protocol === 'https' : publicBaseUrl.startsWith('https:');
}

/**
 * Written by hand rather than with ctx.cookies, which refuses a Secure cookie on a plain connection: behind
 * a proxy that terminates TLS the service speaks plain HTTP, and the browser still needs Secure.
 */
function setBrowserCookie(ctx: AppContext, publicBaseUrl: string | undefined, value: string, maxAgeMs: number): void {
  const attributes = [
    `${BROWSER_COOKIE}=${value}`,
    `Path=${PORTAL_RESUME_PATH}`,
    `Max-Age=${Math.max(0, Math.floor(maxAgeMs / 1000))}`,
    'HttpOnly',
    'SameSite=Strict',
    ...(secureCookies(ctx, publicBaseUrl) ? ['Secure'] : []),
  ];
  ctx.append('Set-Cookie', attributes.join('; '));
}

function clearBrowserCookie(ctx: AppContext, publicBaseUrl: string | undefined): void {
  setBrowserCookie(ctx, publicBaseUrl, '', 0);
}

const sessionIdParameter = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^pss_[0-9a-f]{32}$' } };

export const portalSessionsOpenApi: OpenApiContribution = {
  schemas: [portalSessionRequestSchema, sessionSchema, mintedSchema],
  paths: {
    '/portal/sessions': {
      post: {
        operationId: 'createPortalSession',
        summary:
          "Mint a customer portal session for the key's tenant (docs/portal.md). The answer's url opens the portal once; its capabilities are a subset of the key's scopes.",
        security: [{ apiKey: [] }],
        requestBody: { required: false, content: json(ref('PortalSessionRequest')) },
        responses: {
          '201': authenticatedResponse({ description: 'The session and its link.', content: json(ref('PortalSessionMinted')) }),
          ...standardErrorResponses('portal:sessions'),
        },
      },
    },
    '/portal/sessions/{id}': {
      delete: {
        operationId: 'endPortalSession',
        summary: 'End a portal session at once: its next request, on any instance, is refused. Idempotent.',
        security: [{ apiKey: [] }],
        parameters: [sessionIdParameter],
        responses: {
          '204': authenticatedResponse({ description: 'Ended.' }),
          '404': authenticatedResponse({ description: "Unknown session, or another tenant's.", content: json(ref('Error')) }),
          ...standardErrorResponses('portal:sessions'),
        },
      },
    },
  },
};

const browserErrors = {
  '401': { description: 'Unknown token or cookie (one identical body).', content: json(ref('Error')) },
  '410': {
    description: 'portal_link_used (the link was opened before), portal_session_expired or portal_session_ended.',
    content: json(ref('Error')),
  },
  '429': { description: 'Too many failed attempts from this address.', content: json(ref('RateLimited')) },
};

export const portalBrowserOpenApi: OpenApiContribution = {
  schemas: [exchangeSchema, openedSchema],
  paths: {
    '/portal/sessions/exchange': {
      post: {
        operationId: 'exchangePortalLink',
        summary:
          "The portal page's first call: exchanges the link's single-use token for the session's access token, and sets the HttpOnly cookie that lets a reload resume.",
        security: [],
        requestBody: { required: true, content: json(ref('PortalSessionExchange')) },
        responses: {
          '200': {
            description: 'The session and its access token.',
            headers: {
              'Set-Cookie': { schema: { type: 'string' }, description: `HttpOnly, SameSite=Strict, Path=${PORTAL_RESUME_PATH}.` },
            },
            content: json(ref('PortalSessionOpened')),
          },
          ...browserErrors,
          '422': { description: 'No link_token.', content: json(ref('Error')) },
        },
      },
    },
    '/portal/sessions/resume': {
      post: {
        operationId: 'resumePortalSession',
        summary: 'A reloaded portal page gets its access token again with the cookie the exchange set.',
        security: [],
        responses: {
          '200': { description: 'The session and its access token.', content: json(ref('PortalSessionOpened')) },
          ...browserErrors,
        },
      },
    },
  },
};
