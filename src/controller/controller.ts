import { hostname } from 'node:os';
import type { CoreV1Api, CustomObjectsApi, KubernetesObject, ListWatch } from '@kubernetes/client-node';
import { WATCH_BACKOFF } from './backoff.ts';
import type { ControllerOptions } from './controllerOptions.ts';
import { controllerKinds, type Kind } from './controllerKinds.ts';
import { CrdGuard } from './crdGuard.ts';
import { DeploymentGuard } from './deploymentGuard.ts';
import { describeError, reportRetry, reportStalled } from './healthReport.ts';
import { kubeClients } from './kubeClients.ts';
import { kubeLeaseStore } from './kubeLeaseStore.ts';
import { EventRecorder } from './kubeEvents.ts';
import { KubeResources, managedByOf, type AnyResource } from './kubeResources.ts';
import { DEFAULT_LEASE_TIMING, type LeaderElector } from './leaderElection.ts';
import { leadership } from './leadership.ts';
import { RefusedWrites } from './refusedWrites.ts';
import { DEFAULT_CONTROLLER_CLASS } from './resources.ts';
import { bindingOf, tenancyProblem, tenantsOf, type TenancyProblem } from './tenancy.ts';
import { NAMESPACES, cachedNamespace, cachedObject, makeInformers, ownerKey, queueKey, type Informers } from './watchedSources.ts';
import { restartOnError } from './watchRestart.ts';
import { WorkQueue } from './workQueue.ts';
import { controllerMetrics } from './controllerMetrics.ts';

const COMPONENT = 'audit-trail-controller';
/** A resource another process is reconciling right now is tried again after this long. */
const BUSY_RETRY_MS = 1_000;
/** A resource in a namespace the Namespace watch has not shown yet (created a moment ago) waits this long. */
const NAMESPACE_WAIT_MS = 500;

interface Running {
  readonly queue: WorkQueue;
  /** Per kind (plural), `secrets` for the Secrets the controller owns, `namespaces` for the Namespaces. */
  readonly informers: Informers;
  /** Whether the Namespaces were listed: a namespace missing from them then is one too new to be seen yet. */
  readonly namespaces: { listed: boolean };
  readonly workers: Promise<void>[];
  readonly resync: NodeJS.Timeout;
}

/**
 * The controller role: leader election on a Lease, then per kind informers (list + watch with the
 * library's ListWatch, which resumes from the last resourceVersion and re-lists on 410 Gone; restarted
 * here with capped exponential backoff after any other watch failure) and an informer on the Secrets it
 * owns (by label), feeding one work queue that serialises work per object, with capped exponential backoff
 * on failure and a periodic resync. Only resources of the controller's class are reconciled, only of
 * kinds whose installed CRD is current (crdGuard.ts: checked by every replica, leader or not), and only
 * those their namespace admits (tenancy.ts: a namespace bound to a tenant, an informer on the Namespaces).
 * A replica that loses the lease stops its informers and workers until it wins it again; one that cannot
 * reach it says so (leadership.ts). Every write goes through kubeClients.ts, which names a refused one.
 */
export class KubernetesController {
  private readonly options: ControllerOptions;
  private readonly elector: LeaderElector;
  private readonly leaseReadiness: { readonly name: string; readonly check: () => Promise<void> };
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  private readonly controllerClass: string;
  private readonly kinds: Kind[];
  private readonly reportRetry: (plural: string, object: KubernetesObject, message: string) => Promise<void>;
  /** Stalled, with a Warning Event, and nothing else done: a CRD problem, a resource its namespace refuses. */
  private readonly reportStalled: (plural: string, object: KubernetesObject, problem: { reason: string; message: string }) => Promise<void>;
  private readonly crds: CrdGuard;
  /** Settles once every CRD has been read (or has failed to be): nothing is reconciled before. */
  private crdsRead: Promise<void> = Promise.resolve();
  private running: Running | undefined;
  /** Set by stop(): giving the Lease up at shutdown is no loss to warn about. */
  private stopping = false;

  constructor(options: ControllerOptions) {
    this.options = options;
    this.controllerClass = options.controllerClass;
    const config = options.kubeConfig;
    // Every write goes through these clients: a write the API server refuses is logged once, at error level.
    const clients = kubeClients(config, new RefusedWrites(options.log));
    this.custom = clients.custom;
    this.core = clients.core;
    // Reconciles read the Secrets they own from the Secret informers of the run in progress, when they hold them.
    const resources = new KubeResources(this.custom, this.core, (namespace, name) =>
      cachedObject(this.running?.informers.get('secrets'), namespace, name),
    );
    const events = new EventRecorder(this.core, options.log, { component: COMPONENT });
    const guard = new DeploymentGuard(resources, events, options.deploymentId);
    const { keys, registry, retention, holds, streams, log } = options;
    this.kinds = controllerKinds({ resources, events, guard, keys, registry, retention, holds, streams, log });
    this.reportRetry = (plural, object, message) =>
      reportRetry(resources, events, guard, plural, object as unknown as AnyResource, message);
    this.reportStalled = (plural, object, problem) =>
      reportStalled(resources, events, guard, plural, object as unknown as AnyResource, problem.reason, problem.message);
    this.crds = new CrdGuard({
      kubeConfig: config,
      kinds: this.kinds.map((kind) => kind.resource),
      log: options.log,
      metrics: options.metrics,
      watchBackoff: options.watchBackoff,
      // Upgraded (or downgraded) CRDs: their resources are reconciled now, not at the next resync.
      onChange: (resource) => this.enqueueAll(this.kinds.filter((kind) => kind.resource === resource)),
    });
    if (options.metrics)
      for (const kind of this.kinds) controllerMetrics(options.metrics).reconcileErrors.inc({ kind: kind.resource.plural }, 0);
    const { elector, readiness } = leadership({
      identity: options.identity ?? `${hostname()}-${process.pid}`,
      store: kubeLeaseStore(clients.coordination, options.leaseNamespace, options.leaseName),
      leaseNamespace: options.leaseNamespace,
      leaseName: options.leaseName,
      timing: options.leaseTiming ?? DEFAULT_LEASE_TIMING,
      metrics: options.metrics,
      log: options.log,
      onStartedLeading: () => {
        options.log.info(
          { controller_class: this.controllerClass },
          `leading: reconciling ${this.kinds.map((kind) => kind.resource.kind).join(', ')} resources`,
        );
        void this.startReconciling();
      },
      onStoppedLeading: () => {
        if (this.stopping) options.log.info('shutting down: the lease is released');
        else options.log.warn('lost the lease: reconciling stops');
        void this.stopReconciling();
      },
    });
    this.elector = elector;
    this.leaseReadiness = readiness;
  }

  get isLeader(): boolean {
    return this.elector.isLeader;
  }

  /**
   * /readyz: not ready while a CRD is older than this controller needs (or missing, or unreadable), and while
   * the replica cannot reach its Lease (never yet, or not for a lease duration): a replica that can neither
   * lead nor stand by shows as not Ready instead of looking healthy while nothing is reconciled.
   */
  get readiness(): ReadonlyArray<{ readonly name: string; readonly check: () => Promise<void> }> {
    return [this.crds.readiness, this.leaseReadiness];
  }

  start(): void {
    // Every replica reads the CRDs, leader or not, so that each one's readiness tells the truth.
    this.crdsRead = this.crds.start();
    this.elector.start();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.stopReconciling();
    await this.elector.stop();
    await this.crds.stop();
  }

  private async startReconciling(): Promise<void> {
    await this.crdsRead;
    // Leadership may have been lost (or started twice) while the CRDs were being read.
    if (this.running || !this.elector.isLeader) return;
    const queue = new WorkQueue();
    const informers = makeInformers(this.options.kubeConfig, this.custom, this.core, this.options.namespaces, {
      kinds: this.kinds.map((kind) => kind.resource),
      onResource: (plural, object) => {
        if (this.isOurClass(object)) queue.add(queueKey(plural, object.metadata?.namespace, object.metadata?.name));
      },
      // A change to a Secret the controller owns (deleted, edited) reaches its resource within seconds.
      onOwnedSecret: (secret) => {
        const owner = ownerKey(secret.metadata?.ownerReferences, secret.metadata?.namespace);
        if (owner) queue.add(owner);
      },
      // A namespace bound, unbound or rebound: what is in it is decided again now.
      onNamespace: (namespace) => this.enqueueAll(this.kinds, namespace.metadata?.name),
    });
    for (const [what, list] of informers) for (const informer of list) this.restartOnError(informer, what, informers);
    const resync = setInterval(() => this.enqueueAll(this.kinds), this.options.resyncMs ?? 30_000);
    resync.unref();
    const workers = Array.from({ length: this.options.workers ?? 2 }, () => this.work(queue, informers));
    const namespacesState = { listed: false };
    this.running = { queue, informers, namespaces: namespacesState, workers, resync };
    // The Namespaces first: no resource is looked at before its namespace's binding is known. One that cannot
    // be listed leaves every binding unknown, and the resources refused (fail closed) until it can.
    const namespaces = informers.get(NAMESPACES) ?? [];
    const listed = await Promise.all(
      namespaces.map((informer) =>
        informer.start().then(
          () => true,
          () => false,
        ),
      ),
    );
    namespacesState.listed = listed.every(Boolean);
    const rest = [...informers].filter(([what]) => what !== NAMESPACES).flatMap(([, list]) => list);
    await Promise.all(rest.map((informer) => informer.start()));
  }

  /** Restarted with capped exponential backoff after a failure, as long as this reconciling run lasts. */
  private restartOnError(informer: ListWatch<KubernetesObject>, what: string, informers: Informers): void {
    restartOnError(informer, {
      what,
      policy: this.options.watchBackoff ?? WATCH_BACKOFF,
      log: this.options.log,
      active: () => this.running?.informers === informers,
    });
  }

  /** Queues every object of these kinds (of this controller's class, in `namespace` if given) that the informers hold. */
  private enqueueAll(kinds: readonly Kind[], namespace?: string): void {
    const running = this.running;
    if (!running) return;
    for (const kind of kinds) {
      for (const informer of running.informers.get(kind.resource.plural) ?? []) {
        for (const object of informer.list(namespace))
          if (this.isOurClass(object)) running.queue.add(queueKey(kind.resource.plural, object.metadata?.namespace, object.metadata?.name));
      }
    }
  }

  private async stopReconciling(): Promise<void> {
    const running = this.running;
    if (!running) return;
    this.running = undefined;
    clearInterval(running.resync);
    running.queue.shutDown();
    await Promise.all([...running.informers.values()].flat().map((informer) => informer.stop()));
    await Promise.all(running.workers);
  }

  private async work(queue: WorkQueue, informers: Informers): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      const [plural, namespace, name] = key.split('/') as [string, string, string];
      const kind = this.kinds.find((candidate) => candidate.resource.plural === plural)!;
      const object = cachedObject(informers.get(plural), namespace, name);
      try {
        // A key may come from an owned Secret: the resource itself decides whether it is ours.
        if (object && this.isOurClass(object)) {
          // Its CRD is older than this controller: say so on the resource and touch nothing else. The guard
          // queues every resource of the kind again once the CRD is upgraded. Likewise a resource its namespace
          // refuses (another tenant's in a bound namespace): its deletion still goes through its finalizer.
          const problem = this.crds.problem(kind.resource) ?? this.tenancyProblem(kind, namespace, object, informers);
          if (problem === 'wait') queue.addAfter(key, NAMESPACE_WAIT_MS);
          else if (problem) await this.reportStalled(plural, object, problem);
          else await this.reconcileLocked(kind, key, object, queue);
        }
        queue.forget(key);
      } catch (error) {
        const delay = queue.addRateLimited(key);
        if ((error as { code?: number }).code !== 409 && this.options.metrics)
          controllerMetrics(this.options.metrics).reconcileErrors.inc({ kind: plural });
        this.options.log.warn({ err: error, object: key, retry_in_ms: delay }, 'reconcile failed; will retry');
        if (object && (error as { code?: number }).code !== 409) {
          // kstatus: Reconciling=True while retrying. A 409 is optimistic concurrency at work, retried at once.
          await this.reportRetry(plural, object, `Reconcile failed (${describeError(error)}); retrying with backoff.`).catch(
            () => undefined,
          );
        }
      } finally {
        queue.done(key);
        this.options.onReconciled?.(key);
      }
    }
  }

  /**
   * Reconciles holding the resource's lock, for the whole sequence of reads and writes in the database, its
   * Secret and its status: another process reconciling it now (a second leader for a moment) is waited out,
   * and the work is done again from what that one left. The lock is per deployment database and per uid.
   */
  private async reconcileLocked(kind: Kind, key: string, object: KubernetesObject, queue: WorkQueue): Promise<void> {
    const outcome = await this.options.locks.withLock(managedByOf(object as unknown as AnyResource), () => kind.reconcile(object));
    if (outcome.held) return;
    this.options.log.info({ object: key, retry_in_ms: BUSY_RETRY_MS }, 'another process is reconciling this resource; trying again later');
    queue.addAfter(key, BUSY_RETRY_MS);
  }

  /** Why the namespace refuses the resource; 'wait' while its Namespace, listed fine, has not been seen yet. */
  private tenancyProblem(
    kind: Kind,
    namespace: string,
    object: KubernetesObject,
    informers: Informers,
  ): TenancyProblem | 'wait' | undefined {
    if (object.metadata?.deletionTimestamp) return undefined;
    const cached = cachedNamespace(informers, namespace);
    if (!cached && this.running?.namespaces.listed) return 'wait';
    return tenancyProblem(kind.resource.kind, namespace, bindingOf(cached), tenantsOf(object), this.options.requireTenantBinding ?? false);
  }

  private isOurClass(object: KubernetesObject): boolean {
    return ((object as { spec?: { controllerClass?: string } }).spec?.controllerClass ?? DEFAULT_CONTROLLER_CLASS) === this.controllerClass;
  }
}
