import type pg from 'pg';
import type { Database } from '../db/database.ts';
import { coerceError } from '../platform/errors.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { dropQueueRows, lockTree, recordAppend, recordHeartbeat, registerSealKey, takeQueuedEvents, tenantsToSeal, type LeafRange, type QueuedEvent, type TreeState } from './sealStore.ts';
import { documentLeaf } from './documentLeaf.ts';
import { TileSet, appendLeaves, rightEdgeTiles } from './tiles.ts';
import { loadTiles } from './treeStore.ts';
import type { TreeHeadSigner } from './treeHeadSigner.ts';

export interface SealerOptions {
  readonly db: Database;
  readonly signer: TreeHeadSigner;
  /** SEAL_INTERVAL: every committed event gets its leaf within it while the sealer keeps up. */
  readonly intervalMs: number;
  /** SEAL_HEARTBEAT: a tenant's latest head is never older than this (at most an hour). */
  readonly heartbeatMs: number;
  readonly log: Logger;
  readonly metrics?: ServiceMetrics;
}

export class RetiredSigningKeyError extends Error {
  override name = 'RetiredSigningKeyError';
}

/** Events appended per transaction, give or take one queue row (at most 5,000 events). */
const EVENTS_PER_APPEND = 10_000;
const ERROR_BACKOFF_MS = 1_000;

export interface PassResult {
  readonly sealed: number;
  readonly heads: number;
  /** Tenants skipped because another sealer held their tree. */
  readonly busy: number;
}

/**
 * The sealer role: appends committed events to their tenant's Merkle tree and signs a head after every
 * append, plus a heartbeat head per tenant at least every SEAL_HEARTBEAT. It looks every half interval, so
 * an event waits at most about one interval while the sealer keeps up. Replicas may run side by side:
 * each tenant's tree is appended to under its row lock, taken with SKIP LOCKED, so they share the tenants
 * and never append to one tree at once.
 */
export class Sealer {
  private readonly options: SealerOptions;
  private running: Promise<void> | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  /** Set once a newer key retired this sealer's: it signs nothing more. */
  retired: RetiredSigningKeyError | undefined;

  constructor(options: SealerOptions) {
    this.options = options;
  }

  /** Registers the signing key (retiring the previous one) and starts sealing. */
  async start(): Promise<void> {
    await this.registerKey();
    this.options.log.info({ key_id: this.options.signer.keyId, interval_ms: this.options.intervalMs }, 'sealer started');
    this.running = this.loop();
  }

  /** Makes the signing key current; what start() does before its loop (and tests before sealPass). */
  async registerKey(): Promise<void> {
    const { signer } = this.options;
    const { retiredAt } = await this.options.db.transaction((client) => registerSealKey(client, signer.keyId, signer.publicKeyPem));
    if (retiredAt) {
      throw new RetiredSigningKeyError(`SEAL_SIGNING_KEY (key id ${signer.keyId}) was retired at ${retiredAt} by a newer key; a retired key never signs again`);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }

  private async loop(): Promise<void> {
    const cadenceMs = Math.max(50, Math.floor(this.options.intervalMs / 2));
    while (!this.stopped) {
      const started = Date.now();
      let pauseMs = cadenceMs;
      try {
        await this.sealPass();
      } catch (thrown) {
        const error = coerceError(thrown);
        if (error instanceof RetiredSigningKeyError) {
          // Another replica runs with a newer key now: this one must not sign again.
          this.retired = error;
          this.options.log.error({ err: error }, 'signing key retired; the sealer stops signing');
          return;
        }
        this.options.log.warn({ err: error }, 'sealing pass failed; will retry');
        pauseMs = ERROR_BACKOFF_MS;
      }
      await this.sleep(Math.max(0, pauseMs - (Date.now() - started)));
    }
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped || ms === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** One pass over every tenant with work: what the loop runs, and what tests call to seal at once. */
  async sealPass(): Promise<PassResult> {
    const tenants = await tenantsToSeal(this.options.db, this.options.heartbeatMs);
    let sealed = 0;
    let heads = 0;
    let busy = 0;
    let failed: Error | undefined;
    for (const tenantId of tenants) {
      for (;;) {
        if (this.stopped) return { sealed, heads, busy };
        let outcome: TenantOutcome;
        try {
          outcome = await this.options.db.transaction((client) => this.sealTenant(client, tenantId));
        } catch (thrown) {
          const error = coerceError(thrown);
          if (error instanceof RetiredSigningKeyError) throw error;
          // One tenant's trouble must not hold up the others' sealing: they go on, the pass reports it.
          this.options.log.warn({ err: error, tenant_id: tenantId }, 'sealing a tenant failed; will retry');
          failed ??= error;
          break;
        }
        if (outcome.kind === 'busy') busy += 1;
        if (outcome.kind === 'appended' || outcome.kind === 'heartbeat') heads += 1;
        sealed += outcome.sealed;
        this.options.metrics?.eventsSealed.inc(outcome.sealed);
        if (!outcome.more) break;
      }
    }
    if (failed) throw failed;
    return { sealed, heads, busy };
  }

  /**
   * One transaction for one tenant: lock its tree, take the oldest queued events, append their leaves and
   * sign the new head; or sign a heartbeat when nothing waits and the latest head is old enough.
   */
  private async sealTenant(client: pg.PoolClient, tenantId: string): Promise<TenantOutcome> {
    const { signer, log } = this.options;
    const tree = await lockTree(client, tenantId, signer.keyId);
    if (!tree) return { kind: 'busy', sealed: 0, more: false };
    if (!tree.keyCurrent) throw new RetiredSigningKeyError(`key ${signer.keyId} is no longer the current signing key`);
    const queued = await takeQueuedEvents(client, tenantId, EVENTS_PER_APPEND);
    const queueIds = [...new Set(queued.map((event) => event.queueId))];
    const present = queued.filter((event) => event.document !== undefined);
    if (present.length < queued.length) {
      // Only possible in a store altered behind the service's back: there is no event to seal.
      log.error({ tenant_id: tenantId, event_ids: queued.flatMap((event) => (event.missingKey ? [event.missingKey.eventId] : [])) }, 'queued events are missing from the store');
    }
    if (present.length === 0) {
      if (queueIds.length > 0) await dropQueueRows(client, tenantId, queueIds);
      if (tree.size === 0 || !this.heartbeatDue(tree)) return { kind: 'idle', sealed: 0, more: queued.length >= EVENTS_PER_APPEND };
      await recordHeartbeat(client, signer.sign({ tenant_id: tenantId, tree_size: tree.size, root_hash: tree.root!.toString('hex'), timestamp: headTimestamp(tree) }));
      return { kind: 'heartbeat', sealed: 0, more: false };
    }
    const leafHashes = present.map((event) => documentLeaf(event.document!));
    const edge = new TileSet(await loadTiles(client, tenantId, rightEdgeTiles(tree.size)));
    const appended = appendLeaves(tree.size, edge, leafHashes);
    const head = signer.sign({ tenant_id: tenantId, tree_size: appended.size, root_hash: appended.root.toString('hex'), timestamp: headTimestamp(tree) });
    await recordAppend(client, { tenantId, ranges: leafRanges(queued, tree.size), tiles: appended.tiles, queueIds, head });
    // Only a full take can leave more waiting for this tenant.
    return { kind: 'appended', sealed: present.length, more: queued.length >= EVENTS_PER_APPEND };
  }

  private heartbeatDue(tree: TreeState): boolean {
    return tree.lastHeadAtMs === undefined || tree.nowMs - tree.lastHeadAtMs >= this.options.heartbeatMs;
  }
}

/** The leaf ranges of the queue rows taken, in order, leaving out events that are gone. */
function leafRanges(queued: readonly QueuedEvent[], firstLeaf: number): LeafRange[] {
  const ranges: LeafRange[] = [];
  let next = firstLeaf;
  for (let start = 0; start < queued.length; ) {
    const queueId = queued[start]!.queueId;
    let end = start;
    while (end < queued.length && queued[end]!.queueId === queueId) end += 1;
    const row = queued.slice(start, end);
    const present = row.filter((event) => event.document !== undefined).length;
    if (present > 0) ranges.push({ queueId, firstLeaf: next, partial: present < row.length });
    next += present;
    start = end;
  }
  return ranges;
}

interface TenantOutcome {
  readonly kind: 'busy' | 'idle' | 'heartbeat' | 'appended';
  readonly sealed: number;
  readonly more: boolean;
}

/** Heads of one tenant are dated strictly increasingly: the timestamp orders the history and keys it. */
function headTimestamp(tree: TreeState): string {
  const at = tree.lastHeadAtMs === undefined ? tree.nowMs : Math.max(tree.nowMs, tree.lastHeadAtMs + 1);
  return new Date(at).toISOString();
}
