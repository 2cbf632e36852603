import { sleep } from './platform/sleep.ts';
import type Router from '@koa/router';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Config } from './config/config.ts';
import { HttpPort } from './http/httpServer.ts';
import { buildInternalApp, type ReadinessCheck } from './http/internalApp.ts';
import { buildStartingPublicApp } from './http/startingApp.ts';
import type { RequestState } from './http/state.ts';
import { Releasers } from './platform/shutdown.ts';
import type { Logger } from './platform/logger.ts';
import { ServiceMetrics } from './platform/metrics.ts';
import { declareMetricFamilies } from './roles/metricFamilies.ts';
import { SERVICE_VERSION } from './platform/version.ts';
import type { PublicHandler, Role as RoleModule, RoleParts } from './roles/role.ts';
import { SharedParts } from './roles/sharedParts.ts';

/**
 * The roles a process can run (docs/operations.md "What runs"), in the order they start; they stop in reverse, so the public
 * API closes first and ingestion last. Each is loaded only when it runs: a worker pod never loads Koa's
 * routes, and only the controller loads the Kubernetes client. A new role is a module and a line here.
 */
const ROLE_MODULES = {
  ingest: () => import('./roles/ingestRole.ts'),
  relay: () => import('./roles/relayRole.ts'),
  worker: () => import('./roles/workerRole.ts'),
  sealer: () => import('./roles/sealerRole.ts'),
  streams: () => import('./roles/streamsRole.ts'),
  retention: () => import('./roles/retentionRole.ts'),
  controller: () => import('./roles/controllerRole.ts'),
  api: () => import('./roles/apiRole.ts'),
} satisfies Record<string, () => Promise<{ role: RoleModule }>>;

export type Role = keyof typeof ROLE_MODULES;
export const ROLES = Object.keys(ROLE_MODULES) as Role[];

/**
 * The roles of a `serve` without --roles: every one, but the controller only where a Kubernetes cluster is
 * configured (in a pod, KUBERNETES_SERVICE_HOST; elsewhere KUBECONFIG). Outside a cluster it could never read
 * its CRDs or its Lease, and the process would never be ready; named in --roles, it runs anyway.
 */
export function defaultRoles(environment: Readonly<Record<string, string | undefined>>): Role[] {
  const cluster = Boolean(environment.KUBERNETES_SERVICE_HOST) || Boolean(environment.KUBECONFIG);
  return cluster ? [...ROLES] : ROLES.filter((role) => role !== 'controller');
}

export interface RunningService {
  /** The public API's port, when the api role runs. */
  readonly publicPort: number | undefined;
  readonly internalPort: number;
  readonly metrics: ServiceMetrics;
  /** Graceful stop: refuse new work, drain in-flight requests and messages, close clients in reverse order. */
  stop(): Promise<void>;
}

export interface ServiceOptions {
  readonly config: Config;
  readonly roles: readonly Role[];
  readonly log: Logger;
  /** JetStream namespace instead of NATS_NAMESPACE (tests isolate themselves with a unique one). */
  readonly busNamespace?: string;
  /**
   * Per-key rate limiting on the public API; on unless a benchmark measures its cost by turning it off.
   * Deliberately not configuration: the documented limits are part of the contract.
   */
  readonly rateLimiting?: boolean;
  /** The Kubernetes API the controller role talks to; by default in-cluster credentials or KUBECONFIG. */
  readonly kubeConfig?: KubeConfig;
  /** Aborted when the process is asked to stop during start-up (a role waiting for Postgres gives up). */
  readonly startSignal?: AbortSignal;
}

/**
 * The composition root: starts the selected roles on the parts they share, serves the public and internal
 * ports, and returns a stop() that undoes it all in reverse order (platform/shutdown.ts).
 */
export async function startService(options: ServiceOptions): Promise<RunningService> {
  const { config, log } = options;
  const selected = ROLES.filter((name) => options.roles.includes(name));
  const modules = await Promise.all(selected.map(async (name) => (await ROLE_MODULES[name]()).role));
  const releasers = new Releasers();
  // Kubernetes takes a terminating pod out of its Services' endpoints a moment after it is signalled, and
  // load balancers follow later still: until then new requests keep arriving, and refusing them would be
  // errors for clients. Only roles behind a Service wait.
  const drainDelayMs = modules.some((role) => role.behindService) ? config.shutdownDrainDelayMs : 0;
  const metrics = new ServiceMetrics();
  declareMetricFamilies(metrics);
  let accepting = true;
  const ports = { closing: () => !accepting, accepting: () => accepting };
  let served: { publicPort: number | undefined; internalPort: number };
  let parts: SharedParts | undefined;
  let internal: InternalPort | undefined;
  let publicPort: PortDuringStart | undefined;
  try {
    parts = new SharedParts({
      config,
      roleNames: options.roles,
      log,
      metrics,
      releasers,
      publishesDeliveries: modules.some((role) => role.publishesDeliveries),
      busNamespace: options.busNamespace,
      rateLimiting: options.rateLimiting !== false,
      kubeConfig: options.kubeConfig,
      startSignal: options.startSignal,
    });
    // Health and readiness answer while the roles start, which may mean waiting for Postgres: live, not ready.
    // Every other route, on both ports, answers 503 until its role has started (http/startingApp.ts). The
    // public port opens first, so that once /healthz answers, both ports do.
    if (modules.some((role) => role.servesPublicPort)) {
      const starting = buildStartingPublicApp({ log, metrics, trustedProxies: config.trustedProxies }).callback();
      publicPort = await PortDuringStart.open(starting, config.host, config.port, ports.closing);
    }
    internal = await InternalPort.open(parts, ports);
    // Every role but the api needs Postgres to start (the deployment id names its streams, the sealer
    // registers its key): waiting here, with backoff and a log line per attempt, instead of exiting.
    if (!modules.every((role) => role.startsWithoutPostgres)) await parts.deploymentId();
    const started: RoleParts[] = [];
    for (const role of modules) started.push(await role.start(parts));
    served = { publicPort: servePublic(parts, started, publicPort, drainDelayMs), internalPort: internal.serve(started, drainDelayMs) };
  } catch (error) {
    await releasers.releaseAll(log);
    await publicPort?.closeUnlessServing(config.shutdownGraceMs);
    await internal?.closeUnlessServing(config.shutdownGraceMs);
    throw error;
  }

  log.info(
    { roles: options.roles, ...portsLogged(served), version: SERVICE_VERSION, deployment_id: parts.deploymentIdRead },
    'audit-trail started',
  );
  return {
    ...served,
    metrics,
    async stop() {
      if (!accepting) return;
      // Readiness fails from now on; requests are still served, each answered with Connection: close.
      accepting = false;
      // Live streams end now, so their clients reconnect to a pod that stays while this one drains.
      parts.beginStopping();
      if (drainDelayMs > 0) {
        log.info({ drain_delay_ms: drainDelayMs }, 'not ready; serving while endpoints drain');
        await sleep(drainDelayMs);
      }
      await releasers.releaseAll(log);
      log.info('audit-trail stopped');
    },
  };
}

/** The public port, when a role serves the API: from now on it answers with the api role's handler. */
function servePublic(
  parts: SharedParts,
  started: readonly RoleParts[],
  port: PortDuringStart | undefined,
  drainDelayMs: number,
): number | undefined {
  if (!port) return undefined;
  const publicHandler = started.find((role) => role.publicHandler)?.publicHandler;
  if (!publicHandler) throw new Error('a role that serves the public port started without a public handler');
  return port.serve(publicHandler, parts, 'public server', drainDelayMs);
}

/**
 * A port that listens before the roles start and answers with its `starting` handler (503 for any route it
 * has no answer for yet) until serve() hands it the started roles' handler.
 */
class PortDuringStart {
  private handler: PublicHandler;
  private serving = false;
  private readonly server: HttpPort;

  private constructor(server: HttpPort, handler: PublicHandler) {
    this.server = server;
    this.handler = handler;
  }

  static async open(starting: PublicHandler, host: string, portNumber: number, closing: () => boolean): Promise<PortDuringStart> {
    let port: PortDuringStart | undefined;
    const server = await HttpPort.listen((request, response) => port!.handler(request, response), host, portNumber, closing);
    port = new PortDuringStart(server, starting);
    return port;
  }

  /** Answers with `handler` from now on, and closes with the process; returns the port number. */
  serve(handler: PublicHandler, parts: SharedParts, name: string, drainDelayMs: number): number {
    this.handler = handler;
    // Released after the roles' releasers were added, so closed before them: no request arrives at a role
    // that has stopped.
    parts.releasers.add(name, () => this.server.close(parts.config.shutdownGraceMs, drainDelayMs));
    this.serving = true;
    return this.server.port;
  }

  /** When start-up failed before serve(): its releaser was never registered. */
  async closeUnlessServing(graceMs: number): Promise<void> {
    if (!this.serving) await this.server.close(graceMs, 0);
  }
}

/**
 * The internal port (health, readiness, metrics, the roles' internal routes), listening before the roles
 * start: until they have, /readyz answers 503 with a `start` check saying so, /healthz 200 (an orchestrator
 * keeps a process that waits for Postgres instead of restarting it), and every other route 503.
 */
class InternalPort {
  private readonly parts: SharedParts;
  private readonly ports: { closing: () => boolean; accepting: () => boolean };
  private readonly port: PortDuringStart;

  private constructor(parts: SharedParts, ports: InternalPort['ports'], port: PortDuringStart) {
    this.parts = parts;
    this.ports = ports;
    this.port = port;
  }

  static async open(parts: SharedParts, ports: { closing: () => boolean; accepting: () => boolean }): Promise<InternalPort> {
    const starting: ReadinessCheck = {
      name: 'start',
      check: () => Promise.reject(new Error('the roles are starting (waiting for Postgres while it is away)')),
    };
    const handler = internalHandler(parts, ports, [...parts.readiness, starting], [], true);
    const port = await PortDuringStart.open(handler, parts.config.host, parts.config.internalPort, ports.closing);
    return new InternalPort(parts, ports, port);
  }

  /** Serves the started roles' readiness and routes from now on; returns the port. */
  serve(started: readonly RoleParts[], drainDelayMs: number): number {
    const readiness: ReadinessCheck[] = [...this.parts.readiness, ...started.flatMap((role) => role.readiness ?? [])];
    const features: Router<RequestState>[] = started.flatMap((role) => role.internalRoutes ?? []);
    return this.port.serve(
      internalHandler(this.parts, this.ports, readiness, features, false),
      this.parts,
      'internal server',
      drainDelayMs,
    );
  }

  /** When start-up failed before serve(): its releaser was never registered. */
  closeUnlessServing(graceMs: number): Promise<void> {
    return this.port.closeUnlessServing(graceMs);
  }
}

function internalHandler(
  parts: SharedParts,
  ports: { accepting: () => boolean },
  readiness: readonly ReadinessCheck[],
  features: readonly Router<RequestState>[],
  starting: boolean,
): PublicHandler {
  const { config, log, metrics } = parts;
  const app = buildInternalApp({
    log,
    metrics,
    trustedProxies: config.trustedProxies,
    readiness,
    features,
    accepting: ports.accepting,
    starting,
  });
  return app.callback();
}

function portsLogged(served: { publicPort: number | undefined; internalPort: number }) {
  return { public_port: served.publicPort, internal_port: served.internalPort };
}
