import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { AuditEvent } from '../auditEvent.ts';
import { buildEnvelope, deliveredEventOf } from '../webhookEnvelope.ts';
import { standardWebhooksSecretOf } from '../webhookSignature.ts';
import { signatureHeaders } from '../webhookSigning.ts';
import { MATCH_OPTIONS, URL_OPTION, eventFilters } from './commandOptions.ts';
import { clientFrom } from './connection.ts';
import { followAfter, untilInterrupted } from './liveFollowing.ts';
import { printable } from './tableOutput.ts';
import { CLIENT_VERSION, UsageError } from './usage.ts';

/** A receiver has as long as a webhook delivery gives it (DELIVERY_TIMEOUT_MS's default). */
const FORWARD_TIMEOUT_MS = 10_000;

/**
 * `audit-trail-client listen --forward-to URL`: a webhook endpoint on a developer's machine without
 * registering one. Every matching event from the live endpoint is POSTed to URL as a webhook delivery
 * would be (the same envelope bytes, X-Service-Signature and Standard Webhooks headers), signed with a
 * secret printed at start (or given with --secret, to keep a receiver's configuration across runs). It
 * forwards what is sealed after the trail's newest event at its start, one event at a time, in the live
 * stream's order; a receiver that fails or is down is reported and the next event goes on (there are no
 * retries: this is for development).
 */
export async function runListen(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { ...URL_OPTION, ...MATCH_OPTIONS, 'forward-to': { type: 'string' }, secret: { type: 'string' } },
  });
  const target = forwardTarget(values['forward-to']);
  if (values.secret !== undefined && !/^[0-9a-f]{64}$/.test(values.secret))
    throw new UsageError('--secret takes 64 lowercase hex characters');
  const secret = values.secret ?? randomBytes(32).toString('hex');
  const filters = eventFilters(values);
  const client = clientFrom(values.url);
  // Where forwarding starts: after the trail's newest event, so that an event written once Ready is printed is
  // forwarded, however long the live connection takes to open.
  const newest = (await client.listPage({ limit: 1 })).events[0]?.event_id;
  await untilInterrupted((signal) => {
    // Said once Ctrl-C is handled: a user (or a script) that stops it as soon as it is ready gets exit 0.
    process.stdout.write(
      `Ready: forwarding live events to ${target}\n` +
        `signing secret: ${secret} (Standard Webhooks: ${standardWebhooksSecretOf(secret)})\n` +
        'Ctrl-C to quit\n',
    );
    return followAfter(client, { ...filters, lastEventId: newest, signal }, async (event) => {
      process.stdout.write(await forward(event, target, secret, signal));
    });
  });
  return 0;
}

function forwardTarget(value: string | undefined): string {
  if (value === undefined) throw new UsageError('listen needs --forward-to URL, e.g. http://127.0.0.1:3000/webhooks');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError('--forward-to is not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--forward-to must be an http or https URL');
  return url.href;
}

/** POSTs one event as a signed delivery; the line to print about how the receiver answered. */
async function forward(event: AuditEvent, target: string, secret: string, interrupted: AbortSignal): Promise<string> {
  const body = buildEnvelope(deliveredEventOf(event));
  const headers = {
    'content-type': 'application/json',
    'user-agent': `audit-trail-client/${CLIENT_VERSION} (listen)`,
    ...signatureHeaders([secret], event.event_id, body),
    'x-service-event-id': event.event_id,
    'x-service-delivery-attempt': '1',
  };
  const about = `${printable(event.timestamp)}  ${printable(event.action)}  ${printable(event.event_id)}`;
  const started = performance.now();
  const attempt = new AbortController();
  const abort = () => attempt.abort();
  const timer = setTimeout(abort, FORWARD_TIMEOUT_MS);
  interrupted.addEventListener('abort', abort, { once: true });
  try {
    // Redirects are not followed, as by the service's deliveries: a 3xx is the receiver's answer.
    const response = await fetch(target, { method: 'POST', headers, body, redirect: 'manual', signal: attempt.signal });
    await response.arrayBuffer().catch(() => undefined);
    return `${about}  -> ${response.status} (${Math.round(performance.now() - started)} ms)\n`;
  } catch (error) {
    if (interrupted.aborted) throw error;
    const cause = (error as { cause?: { code?: unknown } }).cause;
    const reason = attempt.signal.aborted
      ? `no answer within ${FORWARD_TIMEOUT_MS / 1000} s`
      : String(cause?.code ?? (error as Error).message);
    return `${about}  -> failed: ${reason}\n`;
  } finally {
    clearTimeout(timer);
    interrupted.removeEventListener('abort', abort);
  }
}
