import {
  jetstream,
  jetstreamManager,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { LedgerConflictError, type LedgerEntry, type LedgerHead, type SignedHeadLedger } from './forkGuard.ts';
import type { BusConnection } from '../bus/natsConnection.ts';
import type { BusNames } from '../bus/jetStreamDefinitions.ts';

/**
 * The fork guard's ledger on JetStream: one stream, one subject per tenant, one message per subject (the
 * latest signed head), as a KV bucket is built; replicated like the deployment's other streams
 * (NATS_STREAM_REPLICAS). Writes are conditional on the subject's last sequence, so two sealers that both
 * believe they hold a tenant (split brain across two databases) cannot both record a head: the second
 * sees the first's and stops.
 */
export class SignedHeadStream implements SignedHeadLedger {
  private readonly names: BusNames;
  private readonly js: JetStreamClient;
  private readonly jsm: Promise<JetStreamManager>;
  private ensured: Promise<void> | undefined;
  private readonly replicas: number;

  constructor(connection: BusConnection, names: BusNames, replicas = 1) {
    this.names = names;
    this.js = jetstream(connection.nc);
    this.jsm = jetstreamManager(connection.nc);
    this.replicas = replicas;
  }

  private ensureStream(): Promise<void> {
    this.ensured ??= (async () => {
      const jsm = await this.jsm;
      const config = {
        name: this.names.signedHeadStream(),
        subjects: [this.names.signedHeadSubject('*')],
        description: `audit-trail deployment ${this.names.deploymentId}: latest signed tree head per tenant (the fork guard)`,
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        num_replicas: this.replicas,
        max_msgs_per_subject: 1,
        // Never let go of a head: the guard's whole point is remembering what the database forgot.
        max_age: 0,
        allow_direct: true,
      };
      try {
        await jsm.streams.info(config.name);
      } catch (error) {
        if (!(error instanceof JetStreamApiError && error.status === 404)) throw error;
        await jsm.streams.add(config);
      }
    })().catch((error: unknown) => {
      this.ensured = undefined;
      throw error;
    });
    return this.ensured;
  }

  async latest(tenantId: string): Promise<LedgerEntry | undefined> {
    await this.ensureStream();
    const jsm = await this.jsm;
    try {
      const message = await jsm.streams.getMessage(this.names.signedHeadStream(), { last_by_subj: this.names.signedHeadSubject(tenantId) });
      if (!message) return undefined;
      const head = message.json<{ tree_size: number; root_hash: string }>();
      return { head: { treeSize: head.tree_size, rootHash: head.root_hash }, revision: message.seq };
    } catch (error) {
      if (error instanceof JetStreamApiError && error.status === 404) return undefined;
      throw error;
    }
  }

  async record(tenantId: string, head: LedgerHead, revision: number): Promise<void> {
    await this.ensureStream();
    try {
      await this.js.publish(
        this.names.signedHeadSubject(tenantId),
        JSON.stringify({ tree_size: head.treeSize, root_hash: head.rootHash }),
        {
          expect: { lastSubjectSequence: revision },
        },
      );
    } catch (error) {
      // 400 "wrong last sequence": another sealer recorded a head since this one read the ledger.
      if (error instanceof JetStreamApiError && error.code === 10071) {
        throw new LedgerConflictError(`another sealer recorded a head of tenant ${tenantId} since this one read it`, { cause: error });
      }
      throw error;
    }
  }
}
