/**
 * The public API as the portal calls it: same origin, the session's access token as the bearer (held here,
 * in memory, never in storage), JSON in and out. Every failure becomes an ApiError carrying the documented
 * error body, so pages can say what went wrong in the service's own words.
 */
import type { AuditEvent } from './types.ts';

/** Relative to /portal/, so a service behind a path prefix works unchanged. */
export const API_BASE = new URL('../api/v2/public', document.baseURI).pathname;

export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Turns an error answer into an ApiError with the service's code and message. */
export async function apiError(response: Response): Promise<ApiError> {
  let body: { error?: unknown; message?: unknown; details?: Array<{ field: string; message: string }> } = {};
  try {
    body = (await response.json()) as typeof body;
  } catch {
    // Not JSON (a proxy's page): the status says enough.
  }
  const code = typeof body.error === 'string' ? body.error : `http_${response.status}`;
  const details = body.details?.map((detail) => `${detail.field}: ${detail.message}`).join('; ');
  const message = details || (typeof body.message === 'string' ? body.message : `The service answered ${response.status}.`);
  return new ApiError(response.status, code, message);
}

export interface Page<T> {
  readonly items: T[];
  readonly nextCursor: string | null;
  /** A search's page whose walk stopped short: events older than this were not searched yet. */
  readonly searchedTo?: string;
}

/** How many events the filters match (GET /audit/events/count): `capped` past 10,000. */
export interface EventCount {
  readonly count: number;
  readonly capped: boolean;
}

export class PortalApi {
  private readonly token: string;
  private sessionOver: () => void = () => undefined;

  constructor(token: string) {
    this.token = token;
  }

  /** Called when the session is over (a 401): the page stops and says so. */
  onSessionOver(listener: () => void): void {
    this.sessionOver = listener;
  }

  async request(
    method: string,
    path: string,
    options: { query?: Record<string, string | undefined>; body?: unknown } = {},
  ): Promise<Response> {
    const url = new URL(API_BASE + path, location.origin);
    for (const [name, value] of Object.entries(options.query ?? {}))
      if (value !== undefined && value !== '') url.searchParams.set(name, value);
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(url, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      cache: 'no-store',
      credentials: 'omit',
      referrerPolicy: 'no-referrer',
    });
    if (response.status === 401) this.sessionOver();
    if (!response.ok) throw await apiError(response);
    return response;
  }

  async json<T>(method: string, path: string, options: { query?: Record<string, string | undefined>; body?: unknown } = {}): Promise<T> {
    const response = await this.request(method, path, options);
    return (response.status === 204 ? undefined : await response.json()) as T;
  }

  async listEvents(filters: Record<string, string | undefined>, cursor: string | undefined, limit: number): Promise<Page<AuditEvent>> {
    const body = await this.json<{ events: AuditEvent[]; page: { next_cursor: string | null; searched_to?: string } }>(
      'GET',
      '/audit/events',
      { query: { ...filters, cursor, limit: String(limit) } },
    );
    return { items: body.events, nextCursor: body.page.next_cursor, searchedTo: body.page.searched_to };
  }

  /** The count takes the filters, not the search (docs/api.md). */
  countEvents(filters: Record<string, string | undefined>): Promise<EventCount> {
    return this.json<EventCount>('GET', '/audit/events/count', { query: { ...filters, q: undefined } });
  }

  async listActions(): Promise<string[]> {
    return (await this.json<{ actions: string[] }>('GET', '/audit/actions')).actions;
  }

  /** The event as served, text and parsed: the verifier hashes what the service sent. */
  getEvent(id: string): Promise<AuditEvent> {
    return this.json<AuditEvent>('GET', `/audit/events/${encodeURIComponent(id)}`);
  }
}
