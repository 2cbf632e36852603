import { Agent } from 'undici';
import { guardedLookup, isGuardFailure, literalTargetRefusal, TARGET_REFUSED } from '../../webhooks/targetGuard.ts';
import type { SendOutcome } from './destination.ts';

/** At most this much of an answer is read: enough for an error's text, never a whole page. */
const ANSWER_BYTES = 4096;

export interface HttpAnswer {
  readonly status: number;
  /** The start of the body, as text. */
  readonly body: string;
  readonly headers: Record<string, string | string[] | undefined>;
}

export interface HttpPosterOptions {
  /** A request without a complete answer within this is a timeout (a failure that heals: retried). */
  readonly timeoutMs: number;
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: when false, every connection goes through the webhooks' SSRF guard. */
  readonly allowPrivateTargets: boolean;
}

class BlockedDestinationError extends Error {
  override name = 'BlockedDestinationError';
}

/**
 * POSTs a destination's batches over keep-alive connections (undici). Every connection is made by the
 * webhooks' SSRF guard (webhooks/targetGuard.ts), whose lookup is the socket's own, so the address checked
 * is the address connected to; a URL naming an address is checked here, as it never reaches a lookup.
 * Redirects are not followed.
 */
export class HttpPoster {
  private readonly options: HttpPosterOptions;
  private readonly agent: Agent;

  constructor(options: HttpPosterOptions) {
    this.options = options;
    this.agent = new Agent({
      connections: 4,
      keepAliveTimeout: 30_000,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: { timeout: options.timeoutMs, ...(options.allowPrivateTargets ? {} : { lookup: guardedLookup }) },
    });
  }

  /** Rejects with the network failure (refused, reset, timeout, blocked target); any status resolves. */
  async post(url: URL, headers: Record<string, string>, body: Buffer): Promise<HttpAnswer> {
    const blocked = this.literalAddressBlocked(url);
    if (blocked) throw new BlockedDestinationError(blocked);
    const response = await this.agent.request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers: { ...headers, 'content-length': String(body.length) },
      body,
      signal: AbortSignal.timeout(this.options.timeoutMs),
    });
    const chunks: Buffer[] = [];
    let read = 0;
    for await (const chunk of response.body) {
      chunks.push(chunk as Buffer);
      read += (chunk as Buffer).length;
      if (read >= ANSWER_BYTES) {
        response.body.destroy();
        break;
      }
    }
    return {
      status: response.statusCode,
      body: Buffer.concat(chunks).subarray(0, ANSWER_BYTES).toString('utf8'),
      headers: response.headers,
    };
  }

  close(): Promise<void> {
    return this.agent.close();
  }

  private literalAddressBlocked(url: URL): string | undefined {
    return this.options.allowPrivateTargets ? undefined : literalTargetRefusal(url);
  }
}

/**
 * What a request that got no answer means: a refused target (the SSRF guard) will not heal by retrying;
 * a refused or reset connection, a timeout or a DNS failure will.
 */
export function outcomeOfNetworkFailure(error: unknown): SendOutcome {
  const reason = describeNetworkFailure(error);
  const failure = error as { name?: string; cause?: { name?: string } };
  const refused = failure.name === 'BlockedDestinationError' || (failure.cause ?? failure).name === 'BlockedTargetError';
  return refused ? { kind: 'refused', reason } : { kind: 'retry', reason };
}

/** A network failure as a destination's last_error: its code and message, never a header or body sent. */
function describeNetworkFailure(error: unknown): string {
  const failure = error as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string; name?: string } };
  if (failure.name === 'TimeoutError' || failure.name === 'AbortError' || failure.code?.endsWith('_TIMEOUT'))
    return 'timeout: no answer in time';
  if (failure.name === 'BlockedDestinationError') return failure.message ?? 'target refused';
  const cause = failure.cause ?? failure;
  if (isGuardFailure(cause)) return TARGET_REFUSED;
  return `${cause.code ?? failure.code ?? 'error'}: ${cause.message ?? failure.message ?? String(error)}`;
}
