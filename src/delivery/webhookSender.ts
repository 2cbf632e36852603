import { isIP } from 'node:net';
import { Pool, request } from 'undici';
import { blockedAddressReason, guardedLookup } from '../webhooks/targetGuard.ts';

/** At most this much of a receiver's response is read and kept (DESIGN.md §2). */
export const RESPONSE_EXCERPT_BYTES = 1024;

export interface SendResult {
  /** A 2xx within the time limit. */
  readonly ok: boolean;
  readonly statusCode: number | null;
  /** Why no usable response arrived (timeout, refused connection, blocked target); null with a status. */
  readonly error: string | null;
  readonly responseExcerpt: string;
  readonly durationMs: number;
}

export interface WebhookSenderOptions {
  /** SPEC.md: success is a 2xx within 10 s, measured from connect to the end of the response. */
  readonly timeoutMs: number;
  /** Keep-alive connections per endpoint: also the most concurrent requests one endpoint gets. */
  readonly connectionsPerEndpoint: number;
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: when false, every connection goes through the SSRF guard. */
  readonly allowPrivateTargets: boolean;
}

/** A pool unused for this long is closed; the endpoint gets a new one when it is next delivered to. */
const IDLE_POOL_MS = 5 * 60_000;

/**
 * POSTs signed bodies with undici: one keep-alive pool per endpoint, so that a hung endpoint's
 * connections are its own even when it shares a host with healthy ones. Redirects are not followed: a 3xx
 * is a failure like any other non-2xx.
 */
export class WebhookSender {
  private readonly options: WebhookSenderOptions;
  private readonly pools = new Map<string, { pool: Pool; origin: string; lastUsedAt: number }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(options: WebhookSenderOptions) {
    this.options = options;
    this.sweeper = setInterval(() => this.closeIdlePools(), IDLE_POOL_MS / 5).unref();
  }

  /** Sends one delivery to `url` over the pool of endpoint `endpointId`. */
  async send(endpointId: string, url: string, body: string, headers: Record<string, string>): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const blocked = this.literalAddressBlocked(url);
    if (blocked) return { ok: false, statusCode: null, error: blocked, responseExcerpt: '', durationMs: 0 };
    try {
      const response = await request(url, {
        dispatcher: this.poolFor(endpointId, new URL(url).origin),
        method: 'POST',
        headers,
        body,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      const excerpt = await readExcerpt(response.body);
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      return { ok, statusCode: response.statusCode, error: null, responseExcerpt: excerpt, durationMs: elapsed() };
    } catch (error) {
      return { ok: false, statusCode: null, error: describeFailure(error, this.options.timeoutMs), responseExcerpt: '', durationMs: elapsed() };
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    await Promise.all([...this.pools.values()].map(({ pool }) => pool.close()));
    this.pools.clear();
  }

  private poolFor(endpointId: string, origin: string): Pool {
    const existing = this.pools.get(endpointId);
    if (existing && existing.origin === origin) {
      existing.lastUsedAt = Date.now();
      return existing.pool;
    }
    // A changed URL (an in-place update) gets a pool for its new origin.
    if (existing) void existing.pool.close();
    const pool = new Pool(origin, {
      connections: this.options.connectionsPerEndpoint,
      keepAliveTimeout: 30_000,
      headersTimeout: this.options.timeoutMs,
      bodyTimeout: this.options.timeoutMs,
      // The guard is the socket's own DNS lookup, so the address checked is the address connected to.
      connect: this.options.allowPrivateTargets ? { timeout: this.options.timeoutMs } : { timeout: this.options.timeoutMs, lookup: guardedLookup },
    });
    this.pools.set(endpointId, { pool, origin, lastUsedAt: Date.now() });
    return pool;
  }

  private closeIdlePools(): void {
    const cutoff = Date.now() - IDLE_POOL_MS;
    for (const [endpointId, entry] of this.pools) {
      if (entry.lastUsedAt >= cutoff) continue;
      this.pools.delete(endpointId);
      void entry.pool.close();
    }
  }

  /** A URL naming an IP address never reaches the DNS lookup, so it is checked here. */
  private literalAddressBlocked(url: string): string | undefined {
    if (this.options.allowPrivateTargets) return undefined;
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
    if (!isIP(host)) return undefined;
    const reason = blockedAddressReason(host);
    return reason ? `target refused: host ${reason}` : undefined;
  }
}

async function readExcerpt(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    length += chunk.length;
    if (length >= RESPONSE_EXCERPT_BYTES) {
      // Stop reading: a receiver must not be able to make us download an unbounded body.
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES).toString('utf8');
}

function describeFailure(error: unknown, timeoutMs: number): string {
  const failure = error as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string; name?: string } };
  if (failure.name === 'TimeoutError' || failure.code === 'UND_ERR_HEADERS_TIMEOUT' || failure.code === 'UND_ERR_BODY_TIMEOUT' || failure.code === 'UND_ERR_CONNECT_TIMEOUT') {
    return `timeout: no complete response within ${timeoutMs} ms`;
  }
  const cause = failure.cause ?? failure;
  if (cause.name === 'BlockedTargetError') return `target refused: ${cause.message}`;
  return `${cause.code ?? failure.code ?? 'error'}: ${cause.message ?? failure.message ?? String(error)}`;
}
