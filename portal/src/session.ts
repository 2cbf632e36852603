/**
 * Opening the portal: the link's token is taken from the fragment and removed from the address at once
 * (it never reaches a server log or a Referer, and a copied address carries nothing), then exchanged once
 * for the session's access token. A reload has no token: the HttpOnly cookie the exchange set resumes it.
 */
import { API_BASE, apiError, type ApiError } from './api.ts';
import type { PortalSession } from './types.ts';

export type Opening =
  | { readonly kind: 'open'; readonly session: PortalSession; readonly token: string }
  | { readonly kind: 'refused'; readonly title: string; readonly message: string };

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
        message: 'Each portal link opens the portal once. Ask for a new link where you got this one.',
      };
    case 'portal_session_expired':
      return { kind: 'refused', title: 'This session has expired', message: 'Ask for a new portal link where you got this one.' };
    case 'portal_session_ended':
      return { kind: 'refused', title: 'This session has ended', message: error.message };
    case 'rate_limit_exceeded':
      return { kind: 'refused', title: 'Too many attempts', message: 'Wait a minute, then open your link again.' };
    default:
      return {
        kind: 'refused',
        title: hadLink ? 'This link is not valid' : 'No portal session',
        message: hadLink
          ? 'The link may be incomplete. Ask for a new portal link where you got this one.'
          : 'Open the portal with the link you were given. A page reloaded inside another site cannot resume its session.',
      };
  }
}
