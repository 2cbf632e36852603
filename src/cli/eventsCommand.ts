import { parseArgs } from 'node:util';
import type { Config } from '../config/config.ts';
import { Database } from '../db/database.ts';
import { type CompactionBatch, compactEvents } from '../events/eventCompaction.ts';
import type { Logger } from '../platform/logger.ts';
import { UsageError } from './usage.ts';
import { systemClock } from '../platform/clock.ts';

const DEFAULT_BATCH_SIZE = 2_000;
const MAX_BATCH_SIZE = 50_000;
/** A progress line at most this often per partition (and when one is done). */
const PROGRESS_EVERY_MS = 5_000;

/**
 * `audit-trail events compact [--batch-size N]`: after an upgrade to a release with migration 026, once no
 * pod of the previous release runs, switches writers to storing each event once and rewrites the events
 * stored before (docs/operations.md "How events are stored"). Online and resumable: run it again after an
 * interruption and it goes on where it stopped. Progress on stderr, the summary on stdout.
 */
export async function runEvents(args: string[], config: Config, log: Logger): Promise<number> {
  const [subcommand, ...rest] = args;
  if (subcommand !== 'compact') throw new UsageError('events takes compact; see audit-trail events --help');
  const { values } = parseArgs({ args: rest, options: { 'batch-size': { type: 'string' }, json: { type: 'boolean', default: false } } });
  const batchSize = Number(values['batch-size'] ?? DEFAULT_BATCH_SIZE);
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH_SIZE)
    throw new UsageError(`--batch-size must be a whole number from 1 to ${MAX_BATCH_SIZE}`);
  const db = new Database({
    url: config.databaseUrl,
    pooler: config.databasePooler,
    poolSize: 1,
    applicationName: 'audit-trail events compact',
    log,
  });
  const lastLine = new Map<string, number>();
  const progress = (batch: CompactionBatch) => {
    const now = systemClock.now();
    if (!batch.finished && now - (lastLine.get(batch.partition) ?? 0) < PROGRESS_EVERY_MS) return;
    lastLine.set(batch.partition, now);
    const done = batch.compacted + batch.kept;
    const share =
      batch.estimatedRows > 0
        ? ` of about ${batch.estimatedRows} (${Math.min(100, Math.round((100 * done) / batch.estimatedRows))} %)`
        : '';
    const state = batch.finished ? 'done: ' : '';
    process.stderr.write(
      `${batch.partition}: ${state}${done} rows${share}, ${batch.compacted} compact, ${batch.kept} keep their document\n`,
    );
  };
  try {
    const summary = await compactEvents(db, {
      batchSize,
      onBatch: progress,
      onSwitch: (waitMs) =>
        process.stderr.write(`writers now store each event once; waiting ${waitMs / 1000} s for every writer to follow\n`),
    });
    if (values.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
    else
      process.stdout.write(
        `compacted ${summary.compacted} events in ${summary.partitions} partitions (${summary.kept} keep their document)\n`,
      );
    return 0;
  } finally {
    await db.close();
  }
}
