/**
 * Opening the portal: the link's token is taken from the fragment and removed from the address at once
 * (it never reaches a server log or a Referer, and a copied address carries nothing), then exchanged once
 * for the session's access token. A reload has no token: the HttpOnly cookie the exchange set resumes it.
 */
import { API_BASE, apiError, type ApiError } from './api.ts';
import type { PortalSession } from './types.ts';

/** A page that says why the portal will not open, and what to do next. */
export interface Refusal {
  readonly title: string;
  /** What happened. */
  readonly message: string;
  /** What to do about it. */
  readonly next: string;
  /** Whether trying again here can help (the service could not be reached). */
  readonly retry?: boolean;
}

export type Opening =
  | { readonly kind: 'open'; readonly session: PortalSession; readonly token: string }
  | ({ readonly kind: 'refused' } & Refusal);

/** Where a new link comes from: the person's console, whose name the portal does not know. */
const ASK_AGAIN = 'Go back to the page that sent you here and open the audit trail again: it makes a new link.';

/** The pages of a session that is over, by how it ended. */
export const SESSION_OVER = {
  expired: {
    title: 'This session has expired',
    message: 'A portal session lasts at most an hour, and this one has run its time.',
    next: ASK_AGAIN,
  },
  ended: {
    title: 'This session has ended',
    message: 'It was ended by the console that opened it, or by a sign-out.',
    next: ASK_AGAIN,
  },
  signedOut: {
    title: 'Signed out',
    message: 'This portal session has ended. Nothing of it can be used again, in this tab or another.',
    next: 'To come back, open the audit trail again from your console.',
  },
} as const satisfies Record<string, Refusal>;

export const UNREACHABLE: Refusal = {
  title: 'The service cannot be reached',
  message: 'The audit trail did not answer. Your link is not used up by this: it can still open the portal.',
  next: 'Try again in a moment.',
  retry: true,
};

export async function openSession(): Promise<Opening> {
  const linkToken = new URLSearchParams(location.hash.slice(1)).get('link');
  if (location.hash) history.replaceState(null, '', location.pathname + location.search);
  const response = linkToken
    ? await fetch(`${API_BASE}/portal/sessions/exchange`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ link_token: linkToken }),
        cache: 'no-store',
      })
    : await fetch(`${API_BASE}/portal/sessions/resume`, { method: 'POST', cache: 'no-store' });
  if (response.ok) {
    const body = (await response.json()) as { session: PortalSession; access_token: string };
    return { kind: 'open', session: body.session, token: body.access_token };
  }
  return refusal(await apiError(response), linkToken !== null);
}

/** What the person is told, by the service's reason. */
function refusal(error: ApiError, hadLink: boolean): Opening {
  switch (error.code) {
    case 'portal_link_used':
      return {
        kind: 'refused',
        title: 'This link has already been used',
        message: 'Each portal link opens the portal once, in one tab, so that a link that is forwarded or left in a history shows nothing.',
        next: `If you opened it a moment ago, go back to that tab: it is still open. Otherwise: ${ASK_AGAIN.toLowerCase()}`,
      };
    case 'portal_session_expired':
      return { kind: 'refused', ...SESSION_OVER.expired };
    case 'portal_session_ended':
      return { kind: 'refused', ...SESSION_OVER.ended, message: error.message };
    case 'rate_limit_exceeded':
      return {
        kind: 'refused',
        title: 'Too many attempts',
        message: 'This address tried too many links that did not open.',
        next: 'Wait a minute, then open your link again.',
        retry: true,
      };
    default:
      return hadLink
        ? {
            kind: 'refused',
            title: 'This link is not valid',
            message: 'The link may be incomplete, or cut short by a mail program.',
            next: ASK_AGAIN,
          }
        : {
            kind: 'refused',
            title: 'No portal session',
            message: 'Open the portal with the link you were given. A page reloaded inside another site cannot resume its session.',
            next: ASK_AGAIN,
          };
  }
}
