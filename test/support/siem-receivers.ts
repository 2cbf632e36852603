import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { gunzipSync } from 'node:zlib';

/**
 * Loopback stand-ins for the two SIEM intakes a log stream speaks to, implementing their documented wire
 * protocols rather than accepting anything:
 *
 * - Splunk HTTP Event Collector, `/services/collector/event` (Splunk docs: "Format events for HTTP Event
 *   Collector" and the HEC status codes table of "Troubleshoot HTTP Event Collector"): `Authorization:
 *   Splunk <token>`; concatenated JSON event objects, gzip allowed; answers `{"text", "code"}`: 0 Success,
 *   1 Token disabled (403), 2 Token is required (401), 3 Invalid authorization (401), 4 Invalid token (403),
 *   5 No data (400), 6 Invalid data format (400), 7 Incorrect index (400), 9 Server is busy (503),
 *   10 Data channel is missing (400, tokens with indexer acknowledgement), 12 Event field is required,
 *   13 Event field cannot be blank, 15 Error in handling indexed fields (400), with `invalid-event-number`
 *   for a bad event (the events before it are indexed, as HEC does). Indexer acknowledgement ("About HTTP
 *   Event Collector Indexer Acknowledgment"): a token with `ack` answers `{"text","code":0,"ackId":N}`, ids
 *   counting from 0 per channel; `POST /services/collector/ack` with the channel (query `channel` or the
 *   header) and `{"acks":[ids]}` answers `{"acks":{"<id>":true|false}}`, an id reported true once and then
 *   forgotten; an unknown channel is 400 code 11 Invalid data channel, and 14 ACK is disabled for a token
 *   without it. `ackMode` holds acknowledgements back (`late`: for `ackDelayMs`; `never`), and
 *   `loseChannels()` forgets every channel, as a restart does. A body over `max_content_length`
 *   (limits.conf [http_input]; 1 MB here, Splunk Cloud's) is 413; the body text of that answer is not
 *   documented, this one is an assumption.
 * - Datadog logs intake, HTTP API v2 `POST /api/v2/logs` (Datadog API reference, "Send logs"): `DD-API-KEY`;
 *   a JSON array of log objects (or one object), gzip allowed; at most 1,000 entries and 5 MB uncompressed;
 *   202 `{}` on success; 400 bad payload, 401 missing key, 403 invalid key, 413 over 5 MB, 429 and 5xx,
 *   errors as `{"errors": [{"status", "title", "detail"}]}`. The answer to an array of more than 1,000
 *   entries is not documented; this one (400) is an assumption.
 *
 * Both keep what they accepted, in order, and can be told to answer busy, to refuse, or to drop connections.
 */

interface ReceivedRequest {
  readonly headers: IncomingMessage['headers'];
  /** The body as it arrived (compressed when it was). */
  readonly rawBody: Buffer;
  readonly receivedAt: number;
}

interface Answer {
  readonly status: number;
  readonly body: string;
  readonly headers?: Record<string, string>;
}

/** What a receiver does with the next requests, whatever they hold. */
type Mode = 'normal' | 'busy' | 'drop' | 'unauthorized';

abstract class LoopbackIntake {
  readonly requests: ReceivedRequest[] = [];
  mode: Mode = 'normal';
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listens on an ephemeral port, or again on the port it had (after stop()). */
  async start(): Promise<this> {
    const server = createServer((request, response) => void this.receive(request, response));
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  /** Stops listening and cuts every connection: the destination is down until start(). */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  protected abstract answer(request: IncomingMessage, body: Buffer): Answer;

  private async receive(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const rawBody = Buffer.concat(chunks);
    if (this.mode === 'drop') {
      request.socket.destroy();
      return;
    }
    this.requests.push({ headers: request.headers, rawBody, receivedAt: Date.now() });
    const answer = this.answer(request, rawBody);
    response.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers }).end(answer.body);
  }
}

/** A gunzipped body, or undefined when the gzip is broken. */
function decoded(request: IncomingMessage, body: Buffer): Buffer | undefined {
  if (request.headers['content-encoding'] !== 'gzip') return body;
  try {
    return gunzipSync(body);
  } catch {
    return undefined;
  }
}

/** Splits HEC's body, JSON objects one after another, into the objects; undefined at the first that does not parse. */
function concatenatedObjects(text: string): { objects: unknown[]; invalidAt?: number } {
  const objects: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index]!;
    if (inString) {
      if (char === '\\') index += 1;
      else if (char === '"') inString = false;
      continue;
    }
    if (char === '"') inString = true;
    else if (char === '{') {
      if (depth === 0) start = index;
      depth += 1;
    } else if (char === '}') {
      depth -= 1;
      if (depth === 0) {
        try {
          objects.push(JSON.parse(text.slice(start, index + 1)));
        } catch {
          return { objects, invalidAt: objects.length };
        }
      }
    } else if (depth === 0 && !/\s/.test(char)) {
      return { objects, invalidAt: objects.length };
    }
  }
  return depth === 0 ? { objects } : { objects, invalidAt: objects.length };
}

export interface HecEvent {
  readonly time?: number;
  readonly host?: string;
  readonly source?: string;
  readonly sourcetype?: string;
  readonly index?: string;
  readonly event: any;
  readonly fields?: Record<string, unknown>;
}

/** How a loopback HEC acknowledges: as soon as asked, only `ackDelayMs` after the batch, or never. */
type AckMode = 'prompt' | 'late' | 'never';

export class SplunkHecReceiver extends LoopbackIntake {
  /** Every event indexed, in arrival order. */
  readonly events: HecEvent[] = [];
  ackMode: AckMode = 'prompt';
  ackDelayMs = 0;
  /** Ack queries answered, by channel. */
  readonly ackQueries: Array<{ channel: string; acks: number[] }> = [];
  /** Per channel: the next ackId, and when each pending id may be reported indexed. */
  private readonly channels = new Map<string, { nextId: number; pending: Map<number, number> }>();
  readonly tokens: Map<string, { disabled?: boolean; ack?: boolean }>;
  readonly allowedIndexes: readonly string[] | undefined;
  maxContentLength: number;

  constructor(
    options: { tokens?: Record<string, { disabled?: boolean; ack?: boolean }>; allowedIndexes?: string[]; maxContentLength?: number } = {},
  ) {
    super();
    this.tokens = new Map(Object.entries(options.tokens ?? { 'hec-token': {} }));
    this.allowedIndexes = options.allowedIndexes;
    this.maxContentLength = options.maxContentLength ?? 1_000_000;
  }

  protected answer(request: IncomingMessage, body: Buffer): Answer {
    const hec = (status: number, code: number, text: string, extra: Record<string, unknown> = {}) => ({
      status,
      body: JSON.stringify({ text, code, ...extra }),
    });
    const path = (request.url ?? '').split('?')[0];
    if (request.method === 'GET' && path === '/services/collector/health') return hec(200, 17, 'HEC is healthy');
    if (request.method === 'POST' && path === '/services/collector/ack') return this.answerAck(request, body, hec);
    if (
      request.method !== 'POST' ||
      !['/services/collector/event', '/services/collector', '/services/collector/event/1.0'].includes(path!)
    ) {
      return { status: 404, body: '' };
    }
    const authorization = request.headers.authorization;
    if (authorization === undefined) return hec(401, 2, 'Token is required');
    const match = /^Splunk (.+)$/.exec(authorization);
    if (!match) return hec(401, 3, 'Invalid authorization');
    const token = this.tokens.get(match[1]!);
    if (!token || this.mode === 'unauthorized') return hec(403, 4, 'Invalid token');
    if (token.disabled) return hec(403, 1, 'Token disabled');
    if (this.mode === 'busy') return { ...hec(503, 9, 'Server is busy'), headers: { 'retry-after': '1' } };
    if (body.length > this.maxContentLength) {
      return { status: 413, body: `Content-Length of ${body.length} too large (maximum is ${this.maxContentLength})` };
    }
    if (token.ack && request.headers['x-splunk-request-channel'] === undefined) return hec(400, 10, 'Data channel is missing');
    const text = decoded(request, body)?.toString('utf8');
    if (text === undefined) return hec(400, 6, 'Invalid data format');
    if (text.trim() === '') return hec(400, 5, 'No data');
    const { objects, invalidAt } = concatenatedObjects(text);
    for (let index = 0; index < objects.length; index += 1) {
      const problem = this.eventProblem(objects[index]);
      if (problem) return hec(400, problem[0], problem[1], { 'invalid-event-number': index });
      this.events.push(objects[index] as HecEvent);
    }
    if (invalidAt !== undefined) return hec(400, 6, 'Invalid data format', { 'invalid-event-number': invalidAt });
    if (!token.ack) return hec(200, 0, 'Success');
    const channelName = String(request.headers['x-splunk-request-channel']);
    let channel = this.channels.get(channelName);
    if (!channel) {
      channel = { nextId: 0, pending: new Map() };
      this.channels.set(channelName, channel);
    }
    const ackId = channel.nextId;
    channel.nextId += 1;
    channel.pending.set(ackId, Date.now() + (this.ackMode === 'late' ? this.ackDelayMs : 0));
    return hec(200, 0, 'Success', { ackId });
  }

  /** Forgets every channel and what was pending on it, as an HEC restart (or its idle cleanup) does. */
  loseChannels(): void {
    this.channels.clear();
  }

  private answerAck(request: IncomingMessage, body: Buffer, hec: (status: number, code: number, text: string) => Answer): Answer {
    const authorization = /^Splunk (.+)$/.exec(request.headers.authorization ?? '');
    const token = authorization ? this.tokens.get(authorization[1]!) : undefined;
    if (!token) return hec(403, 4, 'Invalid token');
    if (!token.ack) return hec(400, 14, 'ACK is disabled');
    const channelName =
      new URL(request.url ?? '/', 'http://hec').searchParams.get('channel') ?? request.headers['x-splunk-request-channel'];
    if (channelName === undefined) return hec(400, 10, 'Data channel is missing');
    const channel = this.channels.get(String(channelName));
    if (!channel) return hec(400, 11, 'Invalid data channel');
    let ids: unknown;
    try {
      ids = (JSON.parse(body.toString('utf8')) as { acks?: unknown }).acks;
    } catch {
      return hec(400, 6, 'Invalid data format');
    }
    if (!Array.isArray(ids) || ids.some((id) => !Number.isSafeInteger(id))) return hec(400, 6, 'Invalid data format');
    this.ackQueries.push({ channel: String(channelName), acks: ids as number[] });
    const acks: Record<string, boolean> = {};
    for (const id of ids as number[]) {
      const due = channel.pending.get(id);
      const indexed = due !== undefined && this.ackMode !== 'never' && Date.now() >= due;
      if (indexed) channel.pending.delete(id);
      acks[String(id)] = indexed;
    }
    return { status: 200, body: JSON.stringify({ acks }) };
  }

  private eventProblem(object: unknown): [code: number, text: string] | undefined {
    if (typeof object !== 'object' || object === null || Array.isArray(object)) return [6, 'Invalid data format'];
    const event = object as Record<string, unknown>;
    if (!('event' in event)) return [12, 'Event field is required'];
    if (event.event === '' || event.event === null) return [13, 'Event field cannot be blank'];
    if (event.index !== undefined && this.allowedIndexes && !this.allowedIndexes.includes(String(event.index)))
      return [7, 'Incorrect index'];
    if (event.time !== undefined && (typeof event.time !== 'number' || !Number.isFinite(event.time))) return [6, 'Invalid data format'];
    const fields = event.fields;
    if (
      fields !== undefined &&
      (typeof fields !== 'object' ||
        fields === null ||
        Object.values(fields).some((value) => typeof value === 'object' && !Array.isArray(value)))
    ) {
      return [15, 'Error in handling indexed fields'];
    }
    return undefined;
  }
}

export class DatadogReceiver extends LoopbackIntake {
  /** Every log accepted, in arrival order. */
  readonly logs: Array<Record<string, any>> = [];
  readonly apiKeys: Set<string>;

  constructor(options: { apiKeys?: string[] } = {}) {
    super();
    this.apiKeys = new Set(options.apiKeys ?? ['dd-api-key']);
  }

  protected answer(request: IncomingMessage, body: Buffer): Answer {
    const error = (status: number, title: string, detail: string) => ({
      status,
      body: JSON.stringify({ errors: [{ status: String(status), title, detail }] }),
    });
    if (request.method !== 'POST' || (request.url ?? '').split('?')[0] !== '/api/v2/logs')
      return error(404, 'Not Found', 'no such endpoint');
    const key = request.headers['dd-api-key'];
    if (key === undefined) return error(401, 'Unauthorized', 'API key is missing');
    if (!this.apiKeys.has(String(key)) || this.mode === 'unauthorized') return error(403, 'Forbidden', 'API key is invalid');
    if (this.mode === 'busy') return { ...error(503, 'Service Unavailable', 'try again later'), headers: { 'retry-after': '1' } };
    const payload = decoded(request, body);
    if (payload === undefined) return error(400, 'Bad Request', 'the payload could not be decompressed');
    if (payload.length > 5_000_000) return error(413, 'Payload Too Large', 'the payload is above 5MB uncompressed');
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload.toString('utf8'));
    } catch {
      return error(400, 'Bad Request', 'the payload is not JSON');
    }
    const logs = Array.isArray(parsed) ? parsed : [parsed];
    if (logs.length > 1000) return error(400, 'Bad Request', 'at most 1000 logs per request');
    if (logs.some((log) => typeof log !== 'object' || log === null || Array.isArray(log)))
      return error(400, 'Bad Request', 'each log must be an object');
    this.logs.push(...(logs as Array<Record<string, any>>));
    return { status: 202, body: '{}' };
  }
}
