import { parseArgs } from 'node:util';
import type { Config } from '../config/config.ts';
import { Database } from '../db/database.ts';
import type { Logger } from '../platform/logger.ts';
import { streamState } from '../streams/streamRegistry.ts';
import { listAllStreams } from '../streams/streamStore.ts';
import { STREAMS_USAGE } from './usage.ts';

/**
 * `audit-trail streams status`: every log stream of the deployment, the tenants' and the deployment-wide
 * ones, with where it stands (active, paused, failing), its lag and its last error. Exits 0 when no stream
 * is failing, 1 when one is, 2 for usage. Shows no secret: there is none outside the sealed column.
 */
export async function runStreams(
  args: string[],
  config: Config,
  log: Logger,
  out: NodeJS.WritableStream = process.stdout,
): Promise<number> {
  const [subcommand, ...rest] = args;
  if (subcommand !== 'status') {
    process.stderr.write(`audit-trail streams takes status\nusage: ${STREAMS_USAGE}\n`);
    return 2;
  }
  const { values } = parseArgs({ args: rest, options: { tenant: { type: 'string' }, json: { type: 'boolean', default: false } } });
  const db = new Database({
    url: config.databaseUrl,
    pooler: config.databasePooler,
    poolSize: 2,
    applicationName: 'audit-trail streams',
    log,
  });
  try {
    const tenant = values.tenant;
    // A tenant's streams are its own and the deployment-wide ones that cover it (all tenants, or a list naming it).
    const streams = (await listAllStreams(db)).filter(
      (stream) => tenant === undefined || stream.tenantIds === null || stream.tenantIds.includes(tenant),
    );
    const states = [];
    for (const stream of streams) states.push(await streamState(db, stream));
    const rows = states.map((state) => ({
      id: state.stream.id,
      status: state.status,
      owner: state.stream.ownerTenantId ?? state.stream.managedBy,
      tenants: state.stream.tenantIds ?? '*',
      destination: state.stream.destinationType,
      format: state.stream.format,
      lag_events: state.lagEvents,
      lag_seconds: state.lagSeconds,
      last_delivered_at: state.stream.lastDeliveredAt?.toISOString() ?? null,
      last_error: state.stream.lastError,
    }));
    if (values.json) {
      out.write(`${JSON.stringify({ streams: rows })}\n`);
    } else {
      for (const row of rows) {
        const error = row.last_error ? `; last error: ${row.last_error}` : '';
        out.write(
          `${row.id} ${row.status} ${row.destination}/${row.format} of ${row.owner}: lag ${row.lag_events} events, ${row.lag_seconds} s; last delivered ${row.last_delivered_at ?? 'never'}${error}\n`,
        );
      }
      if (rows.length === 0) out.write('no log streams\n');
    }
    return rows.some((row) => row.status === 'failing') ? 1 : 0;
  } finally {
    await db.close();
  }
}
