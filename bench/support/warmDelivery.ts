import { once } from 'node:events';
import { builtCli, waitReady, type ReportingChild } from './processes.ts';

export interface WarmDeliveryOptions {
  /** Starts a child (the benchmark keeps track of it). */
  readonly spawn: (args: string[], env: Record<string, string>) => ReportingChild;
  readonly env: Record<string, string>;
  /** Extra environment of the worker only (BENCH_WORKER_NODE_OPTIONS, for profiles). */
  readonly workerEnv?: Record<string, string>;
  /** Extra environment of the relays only (BENCH_RELAY_NODE_OPTIONS, for profiles). */
  readonly relayEnv?: Record<string, string>;
  readonly workerPort: number;
  readonly relayPort: number;
  /** Events delivered before the measurement: the worker's code compiled, its pools and caches filled. */
  readonly warmupEvents: number;
  /** Writes `count` events for the measured endpoint. */
  readonly fill: (count: number) => Promise<void>;
  /** Resolves once the receiver has counted `count` deliveries since its last reset. */
  readonly delivered: (count: number) => Promise<unknown>;
  readonly resetReceiver: () => Promise<void>;
}

/** A warm worker and the relay publishing for it. */
export interface WarmDelivery {
  readonly worker: ReportingChild;
  /** The relay of the current path; refill replaces it. */
  relay(): ReportingChild;
  /** Stops the relay, writes `pathEvents` more with the receiver reset, and starts a new relay: the next path. */
  refill(pathEvents: number): Promise<void>;
}

/**
 * A worker process and a relay process for a "delivery path" measurement, measured warm as a worker in
 * production is (it runs for days; a cold one spent about a seventh of its CPU compiling during a ten-second
 * path phase, and still a sixth after 10,000 deliveries): the worker delivers `warmupEvents` first, then the
 * relay stops while `pathEvents` are written, and a new relay starts with every delivery waiting. The receiver
 * is reset before the path's events.
 */
export async function startWarmDelivery(options: WarmDeliveryOptions, pathEvents: number): Promise<WarmDelivery> {
  const startRelay = async () => {
    const relay = options.spawn(builtCli('serve', '--roles', 'relay'), {
      ...options.env,
      ...options.relayEnv,
      INTERNAL_PORT: String(options.relayPort),
    });
    await waitReady(options.relayPort);
    return relay;
  };
  const worker = options.spawn(builtCli('serve', '--roles', 'worker'), {
    ...options.env,
    ...options.workerEnv,
    INTERNAL_PORT: String(options.workerPort),
  });
  await waitReady(options.workerPort);
  let relay = await startRelay();
  await options.resetReceiver();
  await options.fill(options.warmupEvents);
  await options.delivered(options.warmupEvents);
  const refill = async (events: number) => {
    relay.child.kill('SIGTERM');
    await once(relay.child, 'exit');
    await options.resetReceiver();
    await options.fill(events);
    relay = await startRelay();
  };
  await refill(pathEvents);
  return { worker, relay: () => relay, refill };
}
