import { once } from 'node:events';
import { type ChannelModel, type ConfirmChannel, connect, type Message } from 'amqplib';
import { guardedLookup, literalTargetRefusal } from '../../webhooks/targetGuard.ts';
import type { StreamFormat } from '../streamRules.ts';
import type { Destination, EncodedBatch, SendOutcome } from './destination.ts';
import { outcomeOfNetworkFailure } from './httpPoster.ts';
import { systemClock } from '../../platform/clock.ts';

export interface AmqpSettings {
  readonly url: string;
  readonly username: string;
  readonly password: string;
  readonly exchange: string;
  readonly routing_key?: string;
}

export interface AmqpOptions {
  /** A connection, or a batch's confirmations, taking longer than this is retried. */
  readonly timeoutMs: number;
  readonly allowPrivateTargets: boolean;
  /** The stream's format: the default routing key and each message's `type` name it. */
  readonly format: StreamFormat;
}

/** AMQP reply codes that retrying will not heal: the exchange is missing, the user may not, the vhost refuses. */
const REFUSING_CODES = new Set([403, 404, 530]);

/**
 * An AMQP 0-9-1 broker (RabbitMQ), through amqplib: each record of a batch is one persistent message
 * (`application/json`, the record's JSON as it would be a line of NDJSON) published in leaf order on one
 * confirm channel to the stream's exchange with its routing key (`{tenant}` replaced by the tenant id;
 * default `audit.<format>.{tenant}`), `mandatory`, and the batch is delivered once the broker has confirmed
 * every message of it (publisher confirms): only then does the stream's position move. A message the broker
 * could not route to any queue comes back (basic.return) and makes the batch refused: dropped silently, it
 * would be lost. A nack, a closed channel or connection, or no confirmation within timeoutMs is a retry, on a
 * new connection, of the whole batch: consumers deduplicate on the event id, and per tenant the first copy of
 * each event arrives in leaf order. The exchange is the customer's and is never declared.
 *
 * Each message carries `message_id` (none: it is in the record), `app_id` `audit-trail`, `type`
 * (`audit.event` or `ocsf.event`), `timestamp`, and headers `x-audit-stream-id`, `x-audit-tenant-id`; the
 * first message of an OCSF batch carries the tenant's signed tree head in `x-audit-tree-head` (beside the
 * records: docs/streams.md "Records"). Connections are made through the webhooks' SSRF guard.
 */
export class AmqpBroker implements Destination {
  private readonly settings: AmqpSettings;
  private readonly options: AmqpOptions;
  private readonly url: URL;
  private readonly routingKey: string;
  private open: Promise<{ model: ChannelModel; channel: ConfirmChannel }> | undefined;

  constructor(settings: AmqpSettings, options: AmqpOptions) {
    this.settings = settings;
    this.options = options;
    this.url = new URL(settings.url);
    this.routingKey = settings.routing_key ?? `audit.${options.format}.{tenant}`;
  }

  async send(batch: EncodedBatch, signal?: AbortSignal): Promise<SendOutcome> {
    const blocked = this.literalAddressBlocked();
    if (blocked) return { kind: 'refused', reason: blocked };
    let channel: ConfirmChannel;
    try {
      channel = (await this.connected()).channel;
    } catch (error) {
      this.reset();
      return outcomeOfBrokerFailure(error, 'connecting');
    }
    const routingKey = this.routingKey.replaceAll('{tenant}', batch.tenantId);
    const returned: Message[] = [];
    const onReturn = (message: Message) => returned.push(message);
    channel.on('return', onReturn);
    try {
      await this.publishBatch(channel, batch, routingKey, signal);
    } catch (error) {
      // Whatever the channel still holds unconfirmed is given up with it; the batch goes again whole.
      this.reset();
      return outcomeOfBrokerFailure(error, 'publishing');
    } finally {
      channel.off('return', onReturn);
    }
    if (returned.length > 0) {
      const reply = returned[0]!.fields as { replyCode?: number; replyText?: string };
      return {
        kind: 'refused',
        reason: `the broker could not route ${returned.length} message(s) to any queue (${reply.replyCode ?? '?'} ${reply.replyText ?? ''}): exchange ${this.settings.exchange}, routing key ${routingKey}`,
      };
    }
    return { kind: 'delivered' };
  }

  async close(): Promise<void> {
    const open = this.open;
    this.open = undefined;
    if (open) await (await open.catch(() => undefined))?.model.close().catch(() => undefined);
  }

  /** Publishes each line of the batch as a message, then waits for the broker to confirm them all. */
  private async publishBatch(channel: ConfirmChannel, batch: EncodedBatch, routingKey: string, signal?: AbortSignal): Promise<void> {
    const { exchange } = this.settings;
    const properties = {
      persistent: true,
      mandatory: true,
      contentType: 'application/json',
      appId: 'audit-trail',
      type: this.options.format === 'ocsf' ? 'ocsf.event' : 'audit.event',
      timestamp: Math.floor(systemClock.now() / 1000),
    };
    const headers = { 'x-audit-stream-id': batch.streamId, 'x-audit-tenant-id': batch.tenantId };
    // The broker's reason for closing the channel (a missing exchange: 404) comes as an error just before the
    // close, and is what the batch's outcome reports, rather than the "channel closed" of what was pending.
    let channelError: Error | undefined;
    const onError = (error: Error) => {
      channelError = error;
    };
    channel.on('error', onError);
    // Every wait of this batch's (the close, a drain, the deadline) is let go with it: one channel serves every batch.
    const batchDone = new AbortController();
    const { signal: done } = batchDone;
    const closed = once(channel, 'close', { signal: done }).then(() => {
      throw new Error('the channel closed');
    });
    closed.catch(() => undefined);
    try {
      const { body } = batch;
      let start = 0;
      let first = true;
      while (start < body.length) {
        const end = body.indexOf(0x0a, start);
        const content = body.subarray(start, end < 0 ? body.length : end);
        start = end < 0 ? body.length : end + 1;
        const messageHeaders = first && batch.treeHead !== undefined ? { ...headers, 'x-audit-tree-head': batch.treeHead } : headers;
        first = false;
        // false: the socket's buffer is full; go on once it drains (or the channel closes).
        if (!channel.publish(exchange, routingKey, content, { ...properties, headers: messageHeaders }))
          await Promise.race([once(channel, 'drain', { signal: done }), closed]);
      }
      await Promise.race([channel.waitForConfirms(), closed, deadline(this.options.timeoutMs, signal, done)]);
    } catch (error) {
      throw channelError ?? error;
    } finally {
      batchDone.abort();
      channel.off('error', onError);
    }
  }

  private connected(): Promise<{ model: ChannelModel; channel: ConfirmChannel }> {
    if (this.open) return this.open;
    const opening = (async () => {
      const { url, options, settings } = this;
      const model = await connect(
        {
          protocol: url.protocol.slice(0, -1),
          hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
          port: url.port === '' ? undefined : Number(url.port),
          vhost: url.pathname.length > 1 ? decodeURIComponent(url.pathname.slice(1)) : '/',
          username: settings.username,
          password: settings.password,
          heartbeat: 30,
        },
        { timeout: options.timeoutMs, ...(options.allowPrivateTargets ? {} : { lookup: guardedLookup }) },
      );
      // A connection or channel that fails between batches is noticed by the next send, which opens another.
      model.on('error', () => undefined);
      model.on('close', () => {
        if (this.open === opening) this.open = undefined;
      });
      const channel = await model.createConfirmChannel();
      channel.on('error', () => undefined);
      channel.on('close', () => {
        if (this.open === opening) this.reset();
      });
      return { model, channel };
    })();
    this.open = opening;
    return opening;
  }

  private reset(): void {
    const open = this.open;
    this.open = undefined;
    void open?.then(({ model }) => model.close()).catch(() => undefined);
  }

  private literalAddressBlocked(): string | undefined {
    return this.options.allowPrivateTargets ? undefined : literalTargetRefusal(this.url);
  }
}

/** Rejects after `ms`, or when the stream stops; settles never, its timer and listener gone, once `done` aborts. */
function deadline(ms: number, stopping: AbortSignal | undefined, done: AbortSignal): Promise<never> {
  const waiting = new Promise<never>((_resolve, reject) => {
    const timer = setTimeout(() => reject(Object.assign(new Error(`no confirmation within ${ms} ms`), { name: 'TimeoutError' })), ms);
    const onStop = () => reject(new Error('stopped before the broker confirmed'));
    stopping?.addEventListener('abort', onStop, { once: true });
    done.addEventListener('abort', () => {
      clearTimeout(timer);
      stopping?.removeEventListener('abort', onStop);
    });
  });
  waiting.catch(() => undefined);
  return waiting;
}

/** What a failure of the broker means: a refusal by its reply code (access, vhost, exchange), else a retry. */
function outcomeOfBrokerFailure(error: unknown, doing: string): SendOutcome {
  const failure = error as { code?: unknown; message?: string };
  const message = (failure.message ?? String(error)).slice(0, 300);
  const code = typeof failure.code === 'number' ? failure.code : Number(/\b(403|404|530)\b/.exec(message)?.[1]);
  if (REFUSING_CODES.has(code)) return { kind: 'refused', reason: `the broker refused ${doing}: ${message}` };
  const network = outcomeOfNetworkFailure(error) as Exclude<SendOutcome, { kind: 'delivered' }>;
  return network.kind === 'refused' ? network : { kind: 'retry', reason: `${doing}: ${network.reason}` };
}
