/** Load generation for the HTTP benchmarks: autocannon with a randomised request per call. */
import autocannon from 'autocannon';

export interface LoadResult {
  readonly requestsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly non2xx: number;
  readonly errors: number;
}

export async function runLoad(options: {
  url: string;
  nextRequest: () => { path: string; headers?: Record<string, string> };
  connections: number;
  durationS: number;
  /** Fixed overall rate (requests/s); unset means as fast as the server answers. */
  rate?: number;
}): Promise<LoadResult> {
  const result = await autocannon({
    url: options.url,
    connections: options.connections,
    duration: options.durationS,
    ...(options.rate ? { overallRate: options.rate } : {}),
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
export async function sequentialLatency(url: string, headers: Record<string, string>, count: number): Promise<{ p50: number; p99: number }> {
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
