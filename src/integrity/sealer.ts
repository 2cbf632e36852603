import type pg from 'pg';
import type { Database } from '../db/database.ts';
import { coerceError } from '../platform/errors.ts';
import { PollLoop } from '../platform/pollLoop.ts';
import { systemClock, type Clock } from '../platform/clock.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceMetrics } from '../platform/metrics.ts';
import { lockTree, recordAppend, recordHeartbeat, registerSealKey, tenantsToSeal, type LeafRange, type TreeState } from './sealStore.ts';
import { dropQueueRows, queuedDocuments, takeQueueRows, type QueueRow } from './sealQueueStore.ts';
import { queuedLeaves, rowsWithoutHashes } from './queuedLeaves.ts';
import { HASH_BYTES, TileSet, appendLeaves, rightEdgeTiles } from './tiles.ts';
import type { ForkVerdict, SignedHeadLedger } from './forkGuard.ts';
import { ForkGuard } from './sealerForkGuard.ts';
import { loadTiles } from './treeStore.ts';
import { readDeploymentId } from '../db/deploymentIdentity.ts';
import type { SignedTreeHead } from '../client/integrity.ts';
import type { TreeHeadSigner } from './treeHeadSigner.ts';
import { sealingMetrics } from './sealerMetrics.ts';

export interface SealerOptions {
  readonly db: Database;
  readonly signer: TreeHeadSigner;
  /** SEAL_INTERVAL: every committed event gets its leaf within it while the sealer keeps up. */
  readonly intervalMs: number;
  /** SEAL_HEARTBEAT: a tenant's latest head is never older than this (at most an hour). */
  readonly heartbeatMs: number;
  readonly log: Logger;
  readonly metrics?: ServiceMetrics;
  /**
   * CHECKPOINT_ORIGIN: the first part of each tenant's log origin, `<prefix>/<tenant>`; by default
   * `audit-trail/<deployment id>`. A tenant's origin is fixed by its first checkpoint.
   */
  readonly checkpointOrigin?: string;
  /**
   * Where the latest signed head of each tenant is kept outside the database (the fork guard); without
   * one (tests, benchmarks) nothing but the database is consulted.
   */
  readonly ledger?: SignedHeadLedger;
  /** Times the passes' cadence. */
  readonly clock?: Clock;
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
  private readonly loop: PollLoop;
  private readonly clock: Clock;
  private passStartedAt = 0;
  private originPrefix: string | undefined;
  private readonly forkGuard: ForkGuard | undefined;
  /** Set once a newer key retired this sealer's: it signs nothing more. */
  retired: RetiredSigningKeyError | undefined;

  constructor(options: SealerOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.forkGuard = options.ledger && new ForkGuard({ db: options.db, ledger: options.ledger, log: options.log });
    const cadenceMs = Math.max(50, Math.floor(options.intervalMs / 2));
    this.loop = new PollLoop({
      clock: this.clock,
      pass: async () => {
        this.passStartedAt = this.clock.now();
        await this.sealPass();
        return this.pauseAfterPass(cadenceMs);
      },
      onError: (error) => {
        if (error instanceof RetiredSigningKeyError) {
          // Another replica runs with a newer key now: this one must not sign again.
          this.retired = error;
          this.options.log.error({ err: error }, 'signing key retired; the sealer stops signing');
          return 'stop';
        }
        this.options.log.warn({ err: error }, 'sealing pass failed; will retry');
        return this.pauseAfterPass(ERROR_BACKOFF_MS);
      },
    });
  }

  /** Registers the signing key (retiring the previous one) and starts sealing. */
  async start(): Promise<void> {
    await this.registerKey();
    // The check at start is an early warning: every signature is checked anyway, so a ledger that cannot be
    // read now (NATS restarting) delays signing, not the start.
    await this.checkForks().catch((error: unknown) =>
      this.options.log.warn({ err: error }, 'fork guard: the signed heads could not be checked at start; each signature checks them'),
    );
    this.options.log.info({ key_id: this.options.signer.keyId, interval_ms: this.options.intervalMs }, 'sealer started');
    this.loop.start();
  }

  /** Makes the signing key current; what start() does before its loop (and tests before sealPass). */
  async registerKey(): Promise<void> {
    const { signer } = this.options;
    const { retiredAt } = await this.options.db.transaction((client) => registerSealKey(client, signer.keyId, signer.publicKeyPem));
    if (retiredAt) {
      throw new RetiredSigningKeyError(
        `SEAL_SIGNING_KEY (key id ${signer.keyId}) was retired at ${retiredAt} by a newer key; a retired key never signs again`,
      );
    }
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** Passes start every `cadenceMs`, however long each took (at once when one took longer). */
  private pauseAfterPass(cadenceMs: number): number {
    return Math.max(0, cadenceMs - (this.clock.now() - this.passStartedAt));
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
        if (this.loop.stopped) return { sealed, heads, busy };
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
        if (this.options.metrics) sealingMetrics(this.options.metrics).eventsSealed.inc(outcome.sealed);
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
    const { signer } = this.options;
    if (this.forked.has(tenantId)) return { kind: 'forked', sealed: 0, more: false };
    const tree = await lockTree(client, tenantId, signer.keyId);
    if (!tree) return { kind: 'busy', sealed: 0, more: false };
    if (!tree.keyCurrent) throw new RetiredSigningKeyError(`key ${signer.keyId} is no longer the current signing key`);
    const origin = tree.checkpointOrigin ?? `${await this.checkpointOriginPrefix(client)}/${tenantId}`;
    const rows = await takeQueueRows(client, tenantId, EVENTS_PER_APPEND);
    // Only a full take can leave more waiting for this tenant.
    const more = rows.reduce((events, row) => events + row.eventCount, 0) >= EVENTS_PER_APPEND;
    const queueIds = rows.map((row) => row.queueId);
    const { ranges, leaves } = await this.rowLeaves(client, tenantId, rows, tree.size);
    const sealed = leaves.length / HASH_BYTES;
    if (sealed === 0) {
      if (queueIds.length > 0) await dropQueueRows(client, tenantId, queueIds);
      if (tree.size === 0 || !this.heartbeatDue(tree)) return { kind: 'idle', sealed: 0, more };
      const guarded = await this.guard(client, tenantId, { treeSize: tree.size, rootHash: tree.root!.toString('hex') }, tree, []);
      if (!guarded) return { kind: 'forked', sealed: 0, more: false };
      const head = signer.sign({
        tenant_id: tenantId,
        tree_size: tree.size,
        root_hash: tree.root!.toString('hex'),
        timestamp: headTimestamp(tree),
      });
      await recordHeartbeat(client, head, this.checkpointOf(origin, head));
      return { kind: 'heartbeat', sealed: 0, more: false };
    }
    const edge = new TileSet(await loadTiles(client, tenantId, rightEdgeTiles(tree.size)));
    const appended = appendLeaves(tree.size, edge, leaves);
    const proposed = { treeSize: appended.size, rootHash: appended.root.toString('hex') };
    if (!(await this.guard(client, tenantId, proposed, tree, appended.tiles))) return { kind: 'forked', sealed: 0, more: false };
    const head = signer.sign({
      tenant_id: tenantId,
      tree_size: appended.size,
      root_hash: appended.root.toString('hex'),
      timestamp: headTimestamp(tree),
    });
    await recordAppend(client, { tenantId, ranges, tiles: appended.tiles, queueIds, head, checkpoint: this.checkpointOf(origin, head) });
    return { kind: 'appended', sealed, more };
  }

  /** The leaves of the queue rows taken (queuedLeaves.ts), the events of rows without hashes read back. */
  private async rowLeaves(
    client: pg.PoolClient,
    tenantId: string,
    rows: readonly QueueRow[],
    firstLeaf: number,
  ): Promise<{ ranges: LeafRange[]; leaves: Buffer }> {
    const unhashed = rowsWithoutHashes(rows);
    const documents = unhashed.length > 0 ? await queuedDocuments(client, tenantId, unhashed) : [];
    const { ranges, leaves, missing } = queuedLeaves(rows, documents, firstLeaf);
    // Only possible in a store altered behind the service's back: there is no event to seal.
    if (missing.length > 0) this.options.log.error({ tenant_id: tenantId, event_ids: missing }, 'queued events are missing from the store');
    return { ranges, leaves };
  }

  /** The check at start (ForkGuard.checkAll): every tenant's tree against the ledger, before any signature. */
  async checkForks(): Promise<void> {
    await this.forkGuard?.checkAll(this.options.signer.keyId);
  }

  /** Tenants whose sealing the fork guard stopped, and why. */
  get forked(): ReadonlyMap<string, ForkVerdict & { consistent: false }> {
    return this.forkGuard?.forked ?? new Map();
  }

  private guard(...args: Parameters<ForkGuard['check']>): Promise<boolean> {
    return this.forkGuard ? this.forkGuard.check(...args) : Promise.resolve(true);
  }

  private heartbeatDue(tree: TreeState): boolean {
    // A tree whose heads all predate checkpoints (migration 030) gets one at once.
    if (tree.checkpointOrigin === undefined) return true;
    return tree.lastHeadAtMs === undefined || tree.nowMs - tree.lastHeadAtMs >= this.options.heartbeatMs;
  }

  private checkpointOf(origin: string, head: SignedTreeHead): { origin: string; signature: Buffer } {
    return { origin, signature: this.options.signer.signCheckpoint(origin, head) };
  }

  private async checkpointOriginPrefix(client: pg.PoolClient): Promise<string> {
    this.originPrefix ??= this.options.checkpointOrigin ?? `audit-trail/${await readDeploymentId(client)}`;
    return this.originPrefix;
  }
}

interface TenantOutcome {
  readonly kind: 'busy' | 'idle' | 'heartbeat' | 'appended' | 'forked';
  readonly sealed: number;
  readonly more: boolean;
}

/** Heads of one tenant are dated strictly increasingly: the timestamp orders the history and keys it. */
function headTimestamp(tree: TreeState): string {
  const at = tree.lastHeadAtMs === undefined ? tree.nowMs : Math.max(tree.nowMs, tree.lastHeadAtMs + 1);
  return new Date(at).toISOString();
}
