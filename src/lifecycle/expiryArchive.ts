import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { Database } from '../db/database.ts';
import { EventExporter } from '../events/eventExport.ts';
import { positionOf } from '../events/eventStore.ts';
import { ExportProofs } from '../integrity/exportProofs.ts';
import { ArchiveError, type ArchiveStore } from './archiveStore.ts';
import { heldEventIds, recordArchivedEvents } from './expiryStore.ts';

const gzipped = promisify(gzip);

/** A policy's spec.archive, as stored. */
export interface ArchiveTarget {
  readonly bucket: string;
  readonly prefix?: string;
}

export interface WrittenArchive {
  readonly bucket: string;
  readonly key: string;
  readonly count: number;
}

/**
 * One archive object: the tenant's unheld events before `until`, as the export with proofs serves them
 * (NDJSON, each line the event with its inclusion proof and the signed tree head it verifies against), so that
 * `audit-trail verify` checks the object offline like any export. Read in one snapshot; written, read back
 * and compared, then its events recorded under its key, before the caller may expire them. An event not yet sealed (no proof) fails the
 * object: nothing is archived, or expired, without its proof.
 */
export async function writeArchive(
  db: Database,
  store: ArchiveStore,
  tenantId: string,
  until: Date,
  target: ArchiveTarget,
): Promise<WrittenArchive> {
  const held = await heldEventIds(db, tenantId, until);
  // No row cap: the caller bounds the range (archiveChunkBound), so the object's size is known to be bounded.
  const session = await new EventExporter(db, Number.MAX_SAFE_INTEGER).open(
    tenantId,
    { untilMs: until.getTime() },
    { shareSnapshot: true },
  );
  const lines: string[] = [];
  const archived: Array<{ eventId: string; occurredAtMs: number }> = [];
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  try {
    const proofs = await ExportProofs.open(db, tenantId, session.snapshotId!);
    try {
      for await (const line of proofs.decorate(session.rows(), 'ndjson')) {
        const position = positionOf(line);
        if (held.has(position.eventId)) continue;
        if (line.includes(',"proof":null,'))
          throw new ArchiveError(`event ${position.eventId} is not sealed yet: archived (and expired) once it is`);
        first = Math.min(first, position.occurredAtMs);
        last = Math.max(last, position.occurredAtMs);
        lines.push(line);
        archived.push(position);
      }
    } finally {
      await proofs.close();
    }
  } finally {
    await session.close();
  }
  if (lines.length === 0) throw new ArchiveError('nothing to archive');
  const key = archiveKey(target.prefix, tenantId, new Date(first), new Date(last));
  const body = await gzipped(Buffer.from(`${lines.join('\n')}\n`));
  await store.writeAndCheck(target.bucket, key, body, {
    'tenant-id': tenantId,
    'event-count': String(lines.length),
    first: new Date(first).toISOString(),
    last: new Date(last).toISOString(),
  });
  // Only what is in the object, read back intact, may expire under its name.
  await recordArchivedEvents(db, tenantId, key, archived);
  return { bucket: target.bucket, key, count: lines.length };
}

/**
 * `<prefix>/<tenant>/<yyyy>/<mm>/<first>_<last>_<random>.ndjson.gz`, dated by the object's oldest event, the
 * timestamps compact ISO 8601 (UTC, milliseconds): a listing in key order is the trail's order, and the random
 * part keeps two objects of the same range (a pass retried after a failed read-back) apart.
 */
function archiveKey(prefix: string | undefined, tenantId: string, first: Date, last: Date): string {
  const compact = (date: Date) => date.toISOString().replaceAll('-', '').replaceAll(':', '');
  const month = first.toISOString().slice(0, 7).replace('-', '/');
  const path = `${tenantId}/${month}/${compact(first)}_${compact(last)}_${randomBytes(4).toString('hex')}.ndjson.gz`;
  const trimmed = prefix?.replace(/^\/+|\/+$/g, '');
  return trimmed ? `${trimmed}/${path}` : path;
}
