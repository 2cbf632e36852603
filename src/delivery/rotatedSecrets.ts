import type { Queryable } from '../db/database.ts';
import { NotificationListener } from '../db/notificationListener.ts';
import type { Logger } from '../platform/logger.ts';
import type { SealedSecrets } from '../webhooks/secretBox.ts';
import { findEndpointSecrets } from '../webhooks/endpointSecretsStore.ts';
import { ENDPOINT_SECRETS_CHANNEL } from '../webhooks/webhookStore.ts';

export interface RotatedSecretsOptions {
  readonly db: Queryable;
  /** LISTEN needs a connection of its own. */
  readonly databaseUrl: string;
  readonly log: Logger;
}

/** What the worker read of an endpoint's secrets, and the generation (RotatedSecrets.generation) it read them in. */
export interface SecretsRead {
  readonly secrets: SealedSecrets;
  readonly generation: number;
}

/**
 * Keeps a worker from signing with a secret that a rotation retired after the delivery was loaded. A
 * delivery waits in its endpoint's lane for as long as the requests ahead of it take (seconds, a minute
 * behind a backlog), signed only when its turn comes, with the secrets read with it. Expiry is checked at
 * signing time (SigningKeys), but a second rotation during an overlap retires the oldest secret at once,
 * and that only the database knows. Rotations notify (webhookStore.rotateEndpointSecret, delivered at
 * commit); a delivery read before its endpoint's last notification gets the secrets read afresh, once per
 * endpoint and notification however many deliveries wait. What remains is the notification's own
 * latency (milliseconds); and while the listening connection is down (it reconnects within a second or
 * so) rotations go unheard, so every reconnect counts as a rotation of every endpoint.
 *
 * Reads are ordered by generations, not clocks: every notification (and every gap) starts a new one, and
 * a read sent to Postgres after a notification was handled sees the rotation it announced.
 */
export class RotatedSecrets {
  private readonly options: RotatedSecretsOptions;
  private readonly listener: NotificationListener;
  private current = 0;
  /** The generation of each endpoint's last rotation heard of. */
  private readonly rotatedIn = new Map<string, number>();
  /** Notifications may have been missed before this generation: whatever was read earlier is suspect. */
  private gapIn = 0;
  /** Secrets read again after a rotation, or being read, per endpoint. */
  private readonly rereads = new Map<string, { readonly generation: number; readonly read: Promise<SecretsRead | undefined> }>();

  constructor(options: RotatedSecretsOptions) {
    this.options = options;
    this.listener = new NotificationListener({
      databaseUrl: options.databaseUrl,
      channel: ENDPOINT_SECRETS_CHANNEL,
      name: 'audit-trail delivery-worker secrets',
      log: options.log,
      onNotification: (endpointId) => {
        if (endpointId) this.rotatedIn.set(endpointId, ++this.current);
      },
      onGap: () => {
        this.gapIn = ++this.current;
        this.rotatedIn.clear();
        this.rereads.clear();
      },
    });
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }

  /** The generation a read sent now belongs to: taken just before loading deliveries. */
  generation(): number {
    return this.current;
  }

  /**
   * The secrets to sign with: those read with the delivery, unless a rotation of its endpoint was heard of
   * since; then those read after it (undefined if the endpoint is gone meanwhile).
   */
  async signing(endpointId: string, loaded: SecretsRead): Promise<SealedSecrets | undefined> {
    let read: SecretsRead | undefined = loaded;
    // Again if another rotation was heard of while reading: the read may have seen the state before it.
    while (read && read.generation < this.changedIn(endpointId)) read = await this.reread(endpointId);
    return read?.secrets;
  }

  private changedIn(endpointId: string): number {
    return Math.max(this.gapIn, this.rotatedIn.get(endpointId) ?? 0);
  }

  /** The endpoint's secrets read after its last rotation heard of; undefined if the endpoint is gone. */
  private reread(endpointId: string): Promise<SecretsRead | undefined> {
    const pending = this.rereads.get(endpointId);
    if (pending && pending.generation >= this.changedIn(endpointId)) return pending.read;
    const generation = this.current;
    const read = findEndpointSecrets(this.options.db, endpointId).then((secrets) => (secrets ? { secrets, generation } : undefined));
    this.rereads.set(endpointId, { generation, read });
    // A failed read is not kept: the next delivery of the endpoint tries again.
    read.catch(() => {
      if (this.rereads.get(endpointId)?.read === read) this.rereads.delete(endpointId);
    });
    return read;
  }
}
