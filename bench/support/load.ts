/**
 * Load generation for the HTTP benchmarks: autocannon with a randomised request per call (throughput), and
 * evenly paced requests (latency at a set rate).
 */
import autocannon from 'autocannon';
import { Pool } from 'undici';

export interface LoadResult {
  readonly requestsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  /** pacedLoad only: steadier than p99 when a phase has a few hundred requests. */
  readonly p90?: number;
  readonly non2xx: number;
  readonly errors: number;
  /** Answers by status code (pacedLoad only). */
  readonly statuses?: Readonly<Record<number, number>>;
}

export async function runLoad(options: {
  url: string;
  nextRequest: () => { path: string; headers?: Record<string, string> };
  connections: number;
  durationS: number;
}): Promise<LoadResult> {
  const result = await autocannon({
    url: options.url,
    connections: options.connections,
    duration: options.durationS,
    requests: [
      {
        setupRequest: (request) => {
          const next = options.nextRequest();
          return { ...request, path: next.path, headers: { ...request.headers, ...next.headers } };
        },
      },
    ],
  });
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

/** Sequential requests on one connection: the latency of a single request, without queueing. */
export async function sequentialLatency(
  url: string,
  headers: Record<string, string>,
  count: number,
): Promise<{ p50: number; p99: number }> {
  const samples: number[] = [];
  for (let index = 0; index < count; index += 1) {
    const started = performance.now();
    const response = await fetch(url, { headers });
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`${url} answered ${response.status}`);
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return { p50: samples[Math.floor(count / 2)]!, p99: samples[Math.min(count - 1, Math.floor(count * 0.99))]! };
}

/**
 * Requests at a fixed rate, evenly spaced, whatever the server's pace (an open loop), for latency at a
 * given load. Not autocannon's overallRate: that gives each connection a quota per second, reset by a
 * one-second timer, so a second's requests all go out at full concurrency at its start, and it corrects
 * for coordinated omission with an expected interval of 1 ms at any rate. Here a request's latency runs
 * from the moment it was due, so a generator or server falling behind shows in the figures.
 */
export async function pacedLoad(options: {
  url: string;
  nextRequest: () => { path: string; headers?: Record<string, string> };
  connections: number;
  durationS: number;
  rate: number;
}): Promise<LoadResult> {
  const pool = new Pool(options.url, { connections: options.connections });
  const latencies: number[] = [];
  let non2xx = 0;
  let errors = 0;
  const statuses: Record<number, number> = {};
  const inFlight = new Set<Promise<void>>();
  const send = (dueAt: number) => {
    const next = options.nextRequest();
    const request: Promise<void> = pool
      .request({ method: 'GET', path: next.path, headers: next.headers ?? {} })
      .then(async (response) => {
        await response.body.arrayBuffer();
        latencies.push(performance.now() - dueAt);
        statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1;
        if (response.statusCode < 200 || response.statusCode > 299) non2xx += 1;
      })
      .catch(() => {
        errors += 1;
      })
      .finally(() => inFlight.delete(request));
    inFlight.add(request);
  };
  const intervalMs = 1000 / options.rate;
  const total = Math.round(options.rate * options.durationS);
  const started = performance.now();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor((performance.now() - started) / intervalMs) + 1);
    for (; sent < due; sent += 1) send(started + sent * intervalMs);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + sent * intervalMs - performance.now())));
  }
  await Promise.all(inFlight);
  const elapsedS = (performance.now() - started) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  const percentile = (fraction: number) =>
    Number(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * fraction))]!.toFixed(1));
  return {
    requestsPerSecond: latencies.length / elapsedS,
    p50: percentile(0.5),
    p90: percentile(0.9),
    p99: percentile(0.99),
    non2xx,
    errors,
    statuses,
  };
}
