import { isIP } from 'node:net';
import { Agent, request } from 'undici';
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
  /** Keep-alive connections per receiver origin: also the most concurrent requests one receiver gets. */
  readonly connectionsPerOrigin: number;
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: when false, every connection goes through the SSRF guard. */
  readonly allowPrivateTargets: boolean;
}

/**
 * POSTs signed bodies with undici (one pool per receiver origin, keep-alive). Redirects are not followed:
 * a 3xx is a failure like any other non-2xx.
 */
export class WebhookSender {
  private readonly agent: Agent;
  private readonly options: WebhookSenderOptions;

  constructor(options: WebhookSenderOptions) {
    this.options = options;
    this.agent = new Agent({
      connections: options.connectionsPerOrigin,
      keepAliveTimeout: 30_000,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      // The guard is the socket's own DNS lookup, so the address checked is the address connected to.
      connect: options.allowPrivateTargets ? { timeout: options.timeoutMs } : { timeout: options.timeoutMs, lookup: guardedLookup },
    });
  }

  async send(url: string, body: string, headers: Record<string, string>): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const blocked = this.literalAddressBlocked(url);
    if (blocked) return { ok: false, statusCode: null, error: blocked, responseExcerpt: '', durationMs: 0 };
    try {
      const response = await request(url, {
        dispatcher: this.agent,
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
    await this.agent.close();
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
