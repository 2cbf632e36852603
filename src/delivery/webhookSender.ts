import { Pool } from 'undici';
import { guardedLookup, isGuardFailure, literalTargetRefusal, TARGET_REFUSED } from '../webhooks/targetGuard.ts';
import { AttemptHandler } from './attemptHandler.ts';
import { systemClock, type Clock } from '../platform/clock.ts';

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
  /**
   * Success is a 2xx within 10 s (docs/webhooks.md), measured from connect to the end of the response: the
   * default of endpoints without a timeout of their own.
   */
  readonly timeoutMs: number;
  /** Keep-alive connections per endpoint: also the most concurrent requests one endpoint gets. */
  readonly connectionsPerEndpoint: number;
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS: when false, every connection goes through the SSRF guard. */
  readonly allowPrivateTargets: boolean;
  /** Tells which pools have been idle long enough to close. */
  readonly clock?: Clock;
}

/** A pool unused for this long is closed; the endpoint gets a new one when it is next delivered to. */
const IDLE_POOL_MS = 5 * 60_000;
/** How often requests past their deadline are aborted: the 10 s limit is kept to within this. */
const DEADLINE_SWEEP_MS = 100;
/**
 * undici's own timeouts sit this far past the deadline, as a backstop only. They start later than the
 * attempt and can fire early: a timer of up to a second starts from the event loop's cached time, a longer
 * one runs on a 499 ms tick. At the limit itself they once ended a 600 ms attempt at 571 ms, and a 10 s one
 * could have failed a receiver answering at 9.6 s, which the contract counts as a success.
 */
const UNDICI_TIMEOUT_MARGIN_MS = 1_000;

/** An endpoint's pool and its URL taken apart once, not for every request. */
interface Target {
  readonly url: string;
  /** The time limit the pool's backstop timeouts were set for. */
  readonly timeoutMs: number;
  readonly pool: Pool;
  readonly path: string;
  /** Why the URL's literal address is refused, when it is. */
  readonly blocked: string | undefined;
  lastUsedAt: number;
}

class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

/**
 * POSTs signed bodies with undici: one keep-alive pool per endpoint, so that a hung endpoint's
 * connections are its own even when it shares a host with healthy ones. Redirects are not followed: a 3xx
 * is a failure like any other non-2xx.
 */
export class WebhookSender {
  private readonly options: WebhookSenderOptions;
  private readonly clock: Clock;
  private readonly targets = new Map<string, Target>();
  /**
   * Requests in flight and when each must be aborted. One timer sweeps them all: a timer per request
   * (AbortSignal.timeout) was a measurable part of the worker's time at thousands of requests a second.
   */
  private readonly deadlines = new Map<AttemptHandler, number>();
  private readonly sweeper: NodeJS.Timeout;
  /** Runs while requests are in flight only: an idle worker is not woken ten times a second for nothing. */
  private deadlineTimer: NodeJS.Timeout | undefined;

  constructor(options: WebhookSenderOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.sweeper = setInterval(() => this.closeIdlePools(), IDLE_POOL_MS / 5).unref();
  }

  /** Sends one delivery to `url` over the pool of endpoint `endpointId`, within `timeoutMs` (the endpoint's own, or the default). */
  send(
    endpointId: string,
    url: string,
    body: string,
    headers: Record<string, string>,
    timeoutMs = this.options.timeoutMs,
  ): Promise<SendResult> {
    const started = performance.now();
    const target = this.targetFor(endpointId, url, timeoutMs);
    if (target.blocked) return Promise.resolve({ ok: false, statusCode: null, error: target.blocked, responseExcerpt: '', durationMs: 0 });
    return new Promise((resolve) => {
      const handler = new AttemptHandler((response) => {
        this.deadlines.delete(handler);
        const durationMs = Math.round(performance.now() - started);
        if (response.error) {
          resolve({
            ok: false,
            statusCode: null,
            error: describeFailure(response.error, timeoutMs),
            responseExcerpt: '',
            durationMs,
          });
          return;
        }
        const ok = response.statusCode >= 200 && response.statusCode < 300;
        resolve({ ok, statusCode: response.statusCode, error: null, responseExcerpt: response.excerpt, durationMs });
      });
      this.deadlines.set(handler, started + timeoutMs);
      this.deadlineTimer ??= setInterval(() => this.abortOverdue(), DEADLINE_SWEEP_MS).unref();
      target.pool.dispatch({ path: target.path, method: 'POST', headers, body }, handler);
    });
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    clearInterval(this.deadlineTimer);
    this.deadlineTimer = undefined;
    await Promise.all([...this.targets.values()].map(({ pool }) => pool.close()));
    this.targets.clear();
  }

  private targetFor(endpointId: string, url: string, timeoutMs: number): Target {
    const existing = this.targets.get(endpointId);
    if (existing && existing.url === url && existing.timeoutMs === timeoutMs) {
      existing.lastUsedAt = this.clock.now();
      return existing;
    }
    const parsed = new URL(url);
    // A changed URL or time limit (an in-place update) gets a pool for its new origin and backstops.
    if (existing) void existing.pool.close();
    const backstopMs = timeoutMs + UNDICI_TIMEOUT_MARGIN_MS;
    const pool = new Pool(parsed.origin, {
      connections: this.options.connectionsPerEndpoint,
      keepAliveTimeout: 30_000,
      headersTimeout: backstopMs,
      bodyTimeout: backstopMs,
      // The guard is the socket's own DNS lookup, so the address checked is the address connected to.
      connect: {
        timeout: backstopMs,
        ...(this.options.allowPrivateTargets ? {} : { lookup: guardedLookup }),
      },
    });
    const target = {
      url,
      timeoutMs,
      pool,
      path: `${parsed.pathname}${parsed.search}`,
      blocked: this.literalAddressBlocked(parsed),
      lastUsedAt: this.clock.now(),
    };
    this.targets.set(endpointId, target);
    return target;
  }

  private abortOverdue(): void {
    if (this.deadlines.size === 0) {
      clearInterval(this.deadlineTimer);
      this.deadlineTimer = undefined;
      return;
    }
    // The monotonic clock: a wall-clock step (NTP on a VM) must not cut a request short.
    const now = performance.now();
    for (const [handler, deadline] of this.deadlines) {
      if (deadline > now) continue;
      this.deadlines.delete(handler);
      handler.abort(new TimeoutError('the request reached its deadline'));
    }
  }

  private closeIdlePools(): void {
    const cutoff = this.clock.now() - IDLE_POOL_MS;
    for (const [endpointId, target] of this.targets) {
      if (target.lastUsedAt >= cutoff) continue;
      this.targets.delete(endpointId);
      void target.pool.close();
    }
  }

  /** A URL naming an IP address never reaches the DNS lookup, so it is checked here. */
  private literalAddressBlocked(url: URL): string | undefined {
    return this.options.allowPrivateTargets ? undefined : literalTargetRefusal(url);
  }
}

function describeFailure(error: unknown, timeoutMs: number): string {
  const failure = error as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string; name?: string } };
  // An aborted request ends with the reason it was aborted with: our deadline's TimeoutError.
  if (
    failure.name === 'TimeoutError' ||
    failure.code === 'UND_ERR_HEADERS_TIMEOUT' ||
    failure.code === 'UND_ERR_BODY_TIMEOUT' ||
    failure.code === 'UND_ERR_CONNECT_TIMEOUT'
  ) {
    return `timeout: no complete response within ${timeoutMs} ms`;
  }
  const cause = failure.cause ?? failure;
  if (isGuardFailure(cause)) return TARGET_REFUSED;
  return `${cause.code ?? failure.code ?? 'error'}: ${cause.message ?? failure.message ?? String(error)}`;
}
