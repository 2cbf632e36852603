/**
 * How AuditTrailClient talks to the API: one request at a time over the platform's fetch, retrying 429 and
 * 503 with exponential backoff and full jitter while honouring Retry-After; and the encodings the API
 * takes and gives (RFC 3339 instants, query strings, NDJSON).
 */

export interface ClientOptions {
  /** e.g. `https://audit.example.com/api/v2/public` */
  baseUrl: string;
  apiKey: string;
  /** Retries of one call after 429 or 503 before giving up (default 5); for live(), reconnections in a row that fail. */
  maxRetries?: number;
  /** First backoff step; each retry doubles it up to maxDelayMs (defaults 500 ms and 30 s). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  userAgent?: string;
  fetch?: typeof fetch;
}

/** A non-success answer of the API, with its status and documented error body. */
export class AuditTrailApiError extends Error {
  override name = 'AuditTrailApiError';
  readonly status: number;
  readonly code: string;
  readonly body: unknown;
  readonly requestId: string | null;

  constructor(status: number, body: unknown, requestId: string | null) {
    const code = typeof body === 'object' && body !== null && 'error' in body ? String((body as { error: unknown }).error) : 'http_error';
    const message = typeof body === 'object' && body !== null && 'message' in body ? String((body as { message: unknown }).message) : '';
    super(`HTTP ${status} ${code}${message ? `: ${message}` : ''}`);
    this.status = status;
    this.code = code;
    this.body = body;
    this.requestId = requestId;
  }
}

/**
 * No answer at all from the service: refused, unresolvable, timed out, a TLS failure. fetch says only
 * "fetch failed"; this names the address that could not be reached and keeps fetch's error as its cause.
 */
export class AuditTrailUnreachableError extends Error {
  override name = 'AuditTrailUnreachableError';
  readonly url: string;

  constructor(url: string, cause: unknown) {
    const reason = (cause as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
    super(`cannot reach the service at ${url}: ${String(reason?.code ?? reason?.message ?? 'network error')}`, { cause });
    this.url = url;
  }
}

const RETRYABLE = new Set([429, 503]);

/** The API at one base URL with one key. */
export class ApiTransport {
  private readonly options: Required<Omit<ClientOptions, 'userAgent' | 'fetch'>> & Pick<ClientOptions, 'userAgent'>;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    this.options = { maxRetries: 5, baseDelayMs: 500, maxDelayMs: 30_000, ...options, baseUrl: options.baseUrl.replace(/\/+$/, '') };
    this.fetchImpl = options.fetch ?? fetch;
  }

  /** Retries after 429 or 503 of one call. */
  get maxRetries(): number {
    return this.options.maxRetries;
  }

  /**
   * The response when it is a success; otherwise AuditTrailApiError, after retrying 429 and 503. `init`
   * adds headers (they override the defaults) and a signal that cancels the call, its waits included.
   */
  async request(
    method: string,
    path: string,
    body?: unknown,
    init: { headers?: Record<string, string>; signal?: AbortSignal; text?: string } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.apiKey}`, accept: 'application/json' };
    if (this.options.userAgent) headers['user-agent'] = this.options.userAgent;
    if (body !== undefined) headers['content-type'] = 'application/json';
    // A signed note (a witness's cosignatures) travels as the text it is.
    if (init.text !== undefined) headers['content-type'] = 'text/plain; charset=utf-8';
    Object.assign(headers, init.headers);
    for (let attempt = 0; ; attempt += 1) {
      const response = await this.fetchImpl(`${this.options.baseUrl}${path}`, {
        method,
        headers,
        body: init.text ?? (body === undefined ? undefined : JSON.stringify(body)),
        signal: init.signal,
      }).catch((error: unknown) => {
        // fetch's network failure is a TypeError; an abort (the caller's signal) passes through as it is.
        throw error instanceof TypeError ? new AuditTrailUnreachableError(this.options.baseUrl, error) : error;
      });
      if (response.ok) return response;
      const errorBody = await response.json().catch(() => undefined);
      if (!RETRYABLE.has(response.status) || attempt >= this.options.maxRetries) {
        throw new AuditTrailApiError(response.status, errorBody, response.headers.get('x-request-id'));
      }
      await sleep(this.backoffMs(attempt, response.headers.get('retry-after')), init.signal);
      init.signal?.throwIfAborted();
    }
  }

  /** Full jitter over an exponential ceiling, but never sooner than the server's Retry-After. */
  backoffMs(attempt: number, retryAfter: string | null = null): number {
    const ceiling = Math.min(this.options.maxDelayMs, this.options.baseDelayMs * 2 ** attempt);
    const jittered = Math.random() * ceiling;
    const serverSays = retryAfter !== null && /^\d+$/.test(retryAfter) ? Number(retryAfter) * 1000 : 0;
    return Math.max(jittered, serverSays);
  }
}

/** The filters as the API takes them: instants in RFC 3339. */
export function filterValues(filters: object): Record<string, string | boolean | undefined> {
  return Object.fromEntries(
    Object.entries(filters as Record<string, Date | string | boolean | undefined>).map(([name, value]) => [
      name,
      value instanceof Date ? value.toISOString() : value,
    ]),
  );
}

export function toQuery(values: Record<string, string | boolean | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value !== undefined) params.set(name, String(value));
  const text = params.toString();
  return text ? `?${text}` : '';
}

export async function* ndjsonLines(response: Response): AsyncGenerator<string> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line.length > 0) yield line;
      newline = buffered.indexOf('\n');
    }
  }
  buffered += decoder.decode();
  if (buffered.trim().length > 0) yield buffered;
}

/** Waits `ms`, or less when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
