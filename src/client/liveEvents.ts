/**
 * The client side of GET /audit/events/live: a Server-Sent Events reader (the WHATWG EventSource parsing
 * rules, over fetch, so that it can send the Authorization header EventSource cannot), and the loop that
 * reconnects a dropped stream with Last-Event-ID, so that the events yielded are every matching event,
 * each once, across reconnections.
 */

import { AuditTrailApiError, sleep, type ApiTransport } from './apiTransport.ts';
import type { AuditEvent } from './auditEvent.ts';

/** One dispatched SSE event, or a change of the reconnection delay. */
export interface ServerSentEvent {
  /** The last event id as of this event (the stream's, carried over from earlier events). */
  readonly id: string | undefined;
  readonly event: string;
  readonly data: string;
}

/** Parses an SSE byte stream; `onRetry` hears the server's reconnection delay. */
export async function* serverSentEvents(
  body: AsyncIterable<Uint8Array>,
  onRetry: (ms: number) => void = () => undefined,
): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let buffered = '';
  let lastId: string | undefined;
  let idBuffer: string | undefined;
  let data: string[] = [];
  let event = '';
  // A CR at the end of a chunk may be the first half of a CRLF: it is kept until the next chunk says.
  const lines = function* (final: boolean): Generator<string> {
    for (;;) {
      const match = /\r\n|\r|\n/.exec(buffered);
      if (!match || (match[0] === '\r' && match.index === buffered.length - 1 && !final)) return;
      yield buffered.slice(0, match.index);
      buffered = buffered.slice(match.index + match[0].length);
    }
  };
  const feed = function* (line: string): Generator<ServerSentEvent> {
    if (line === '') {
      if (idBuffer !== undefined) lastId = idBuffer;
      if (data.length > 0) yield { id: lastId, event: event || 'message', data: data.join('\n') };
      data = [];
      event = '';
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) idBuffer = value;
    else if (field === 'retry' && /^\d+$/.test(value)) onRetry(Number(value));
  };
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    for (const line of lines(false)) yield* feed(line);
  }
  buffered += decoder.decode();
  // An event not closed by a blank line when the stream ends is discarded, as EventSource does.
  for (const line of lines(true)) yield* feed(line);
}

export interface LiveOptions {
  /** Resume just after this event (an id a previous stream yielded); without it, follow from now. */
  lastEventId?: string;
  /** Ends the iteration (it then returns, without throwing). */
  signal?: AbortSignal;
}

/**
 * Events of the live stream at `path`, reconnecting after a drop (after the delay the server asks, 1 s by
 * default) with the id of the last event yielded. 429 and 503 are retried by the transport; another error
 * answer rejects; connections that fail maxRetries times in a row reject with the last failure.
 */
export async function* followLive(api: ApiTransport, path: string, options: LiveOptions = {}): AsyncGenerator<AuditEvent> {
  let lastEventId = options.lastEventId;
  let retryMs = 1_000;
  let failures = 0;
  const outer = options.signal;
  while (!outer?.aborted) {
    // Ours to abort when the caller stops iterating: the connection is released at once.
    const connection = new AbortController();
    const stopConnection = () => connection.abort();
    outer?.addEventListener('abort', stopConnection, { once: true });
    const signal = connection.signal;
    try {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const response = await api.request('GET', path, undefined, { headers, signal });
      failures = 0;
      for await (const message of serverSentEvents(response.body as unknown as AsyncIterable<Uint8Array>, (ms) => (retryMs = ms))) {
        if (message.event !== 'message') continue;
        const event = JSON.parse(message.data) as AuditEvent;
        lastEventId = message.id ?? lastEventId;
        yield event;
      }
    } catch (error) {
      if (outer?.aborted) return;
      if (error instanceof AuditTrailApiError || error instanceof SyntaxError) throw error;
      // The connection failed or dropped: reconnect, unless it keeps failing.
      failures += 1;
      if (failures > api.maxRetries) throw error;
      await sleep(Math.max(retryMs, api.backoffMs(failures - 1)), outer);
      continue;
    } finally {
      outer?.removeEventListener('abort', stopConnection);
      connection.abort();
    }
    await sleep(retryMs, outer);
  }
}
