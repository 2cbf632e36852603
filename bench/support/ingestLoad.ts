/**
 * Ingest as a load beside something else being measured (bench/expiry.ts): its peak through the HTTP batch
 * endpoint, measured in the same run, and an open loop of batches at a set rate. Both post the same batches
 * (BENCH_INGEST_TOKEN, `/internal/v1/events`, producerEvent) so that the paced rate is a fraction of the peak
 * of exactly that request. As pacedLoad (load.ts) does for GETs, a paced batch's latency runs from the moment
 * it was due, so a server or a driver falling behind shows in the figures rather than slowing the load.
 */
import { Pool } from 'undici';
import { BENCH_INGEST_TOKEN } from './processes.ts';
import { producerEvent } from './producers.ts';

export interface IngestTarget {
  /** The ingest role's internal port, e.g. http://127.0.0.1:9090. */
  readonly url: string;
  /** Events per posted batch. */
  readonly batch: number;
  /** Batches go to these tenants in turn. */
  readonly tenants: readonly string[];
}

/** Latencies of one phase, ascending, and what went wrong. */
export interface PhaseSamples {
  readonly latencies: readonly number[];
  readonly failed: number;
  readonly seconds: number;
}

const HEADERS = { authorization: `Bearer ${BENCH_INGEST_TOKEN}`, 'content-type': 'application/json' };

// Event indexes keep growing across phases: each event is new (a repeated event_id would take the cheaper
// idempotent path), and user and resource ids cycle as producers' do.
let posted = 0;

async function postBatch(pool: Pool, target: IngestTarget): Promise<boolean> {
  const index = posted++;
  const tenant = target.tenants[index % target.tenants.length]!;
  const body = JSON.stringify({ events: Array.from({ length: target.batch }, (_, i) => producerEvent(tenant, index * target.batch + i)) });
  const response = await pool.request({ method: 'POST', path: '/internal/v1/events', headers: HEADERS, body });
  await response.body.arrayBuffer();
  return response.statusCode < 300;
}

/** Events/s with `producers` posting back to back for `seconds` (a closed loop: the peak). Any failure throws. */
export async function ingestPeak(target: IngestTarget, producers: number, seconds: number): Promise<number> {
  const pool = new Pool(target.url, { connections: producers });
  let batches = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: producers }, async () => {
      while (performance.now() < deadline) {
        if (!(await postBatch(pool, target))) throw new Error('ingest refused a batch while its peak was measured');
        batches += 1;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  await pool.close();
  return (batches * target.batch) / elapsed;
}

/** Batches at `rate` a second, evenly spaced, until `until` settles; each timed from when it was due. */
export async function pacedIngest(target: IngestTarget, rate: number, until: Promise<unknown>): Promise<PhaseSamples> {
  // Enough connections that a slow answer never holds back the next batch's start (the loop stays open).
  const pool = new Pool(target.url, { connections: 64 });
  const latencies: number[] = [];
  let failed = 0;
  let done = false;
  const stop = () => {
    done = true;
  };
  until.then(stop, stop);
  const inFlight = new Set<Promise<void>>();
  const intervalMs = 1000 / rate;
  const started = performance.now();
  for (let sent = 0; !done; ) {
    const due = Math.floor((performance.now() - started) / intervalMs) + 1;
    for (; sent < due; sent += 1) {
      const dueAt = started + sent * intervalMs;
      const request: Promise<void> = postBatch(pool, target)
        .then((ok) => {
          if (ok) latencies.push(performance.now() - dueAt);
          else failed += 1;
        })
        .catch(() => {
          failed += 1;
        })
        .finally(() => inFlight.delete(request));
      inFlight.add(request);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + sent * intervalMs - performance.now())));
  }
  await Promise.all(inFlight);
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  return { latencies, failed, seconds };
}
