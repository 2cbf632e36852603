import { parseArgs } from 'node:util';
import type { Config } from '../config/config.ts';
import { Database } from '../db/database.ts';
import { EventWriter } from '../events/eventWriter.ts';
import { checkImportFile, importEvents } from '../ingestion/eventImport.ts';
import type { Logger } from '../platform/logger.ts';
import { UsageError } from './usage.ts';
import { WEBHOOK_FAN_OUT } from '../delivery/fanOut.ts';

/**
 * Backfills history: the whole file is checked first (nothing is stored when a line is invalid), then
 * written in batches with progress on stderr. --allow-old lifts INGEST_MAX_EVENT_AGE for this import only.
 */
export async function runImport(args: string[], config: Config, log: Logger): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { 'allow-old': { type: 'boolean', default: false } },
  });
  if (positionals.length !== 1) throw new UsageError('import takes one NDJSON file of events (one JSON event per line)');
  const path = positionals[0]!;
  const window = values['allow-old'] ? { ...config.ingestWindow, maxAgeMs: Number.POSITIVE_INFINITY } : config.ingestWindow;
  const checked = await checkImportFile(path, window);
  if (checked.problems.length > 0) {
    for (const problem of checked.problems) process.stderr.write(`${path}:${problem.line}: ${problem.field} ${problem.message}\n`);
    process.stderr.write(
      `audit-trail: ${path} has invalid events (the first ${checked.problems.length} problems above); nothing was imported\n`,
    );
    return 1;
  }
  const db = new Database({
    url: config.databaseUrl,
    pooler: config.databasePooler,
    poolSize: 2,
    applicationName: 'audit-trail import',
    log,
  });
  try {
    const done = await importEvents(
      path,
      window,
      new EventWriter(db, WEBHOOK_FAN_OUT),
      (progress) => {
        process.stderr.write(`imported ${progress.written} of ${progress.total} events (${progress.duplicates} already stored)\n`);
      },
      checked.total,
    );
    process.stdout.write(`${JSON.stringify({ events: done.total, stored: done.stored, duplicates: done.duplicates })}\n`);
    return 0;
  } finally {
    await db.close();
  }
}
