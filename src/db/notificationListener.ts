import pg from 'pg';
import type { Logger } from '../platform/logger.ts';
import { ensureOrdinarySlot } from './connectionBudget.ts';
import { postgresClient } from './postgresClient.ts';

export interface NotificationListenerOptions {
  /** LISTEN needs a connection of its own: a pooled one would lose its subscription when returned. */
  readonly databaseUrl: string;
  readonly channel: string;
  readonly name: string;
  readonly log: Logger;
  readonly onNotification: (payload: string | undefined) => void;
  /**
   * Called when notifications may have been missed: after each (re)connect and when the connection drops.
   * Whoever relies on them must fall back to re-reading state.
   */
  readonly onGap?: () => void;
}

const RECONNECT_DELAY_MS = 1_000;

/**
 * A Postgres LISTEN subscription that reconnects by itself. Failing to connect is never fatal: callers
 * must work without notifications (polling, cache expiry) and only get faster with them.
 */
export class NotificationListener {
  private readonly options: NotificationListenerOptions;
  private client: pg.Client | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: NotificationListenerOptions) {
    this.options = options;
  }

  async start(): Promise<void> {
    await this.listen().catch((error: Error) => {
      this.options.log.warn({ err: error, channel: this.options.channel }, 'notifications unavailable; will retry');
      this.scheduleReconnect();
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    await this.client?.end().catch(() => undefined);
  }

  private async listen(): Promise<void> {
    const client = postgresClient(this.options.databaseUrl, { application_name: this.options.name });
    client.on('notification', (message) => this.options.onNotification(message.payload));
    client.on('error', (error) => {
      this.options.log.warn({ err: error, channel: this.options.channel }, 'notification listener lost its connection');
      this.drop(client);
    });
    client.on('end', () => this.drop(client));
    await client.connect();
    // Not in a slot reserved for superusers, like the pools' connections (connectionBudget.ts).
    await ensureOrdinarySlot(client);
    await client.query(`LISTEN ${pg.escapeIdentifier(this.options.channel)}`);
    this.client = client;
    this.options.onGap?.();
  }

  private drop(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.options.onGap?.();
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.reconnectTimer) return;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.stopped) return;
      this.listen().catch(() => this.scheduleReconnect());
    }, RECONNECT_DELAY_MS);
    this.reconnectTimer.unref();
  }
}
