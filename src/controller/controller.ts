import { hostname } from 'node:os';
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  ListWatch,
  Watch,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
} from '@kubernetes/client-node';
import type { ApiKeyService } from '../auth/apiKeyService.ts';
import type { Logger } from '../platform/logger.ts';
import type { WebhookRegistry } from '../webhooks/webhookRegistry.ts';
import { ApiKeyReconciler, type ApiKeyObject } from './apiKeyReconciler.ts';
import { kubeLeaseStore } from './kubeLeaseStore.ts';
import { EventRecorder } from './kubeEvents.ts';
import { KubeResources } from './kubeResources.ts';
import { DEFAULT_LEASE_TIMING, LeaderElector } from './leaderElection.ts';
import { API_KEY, GROUP, VERSION, WEBHOOK_ENDPOINT, type ResourceKind } from './resources.ts';
import { WebhookEndpointReconciler, type WebhookEndpointObject } from './webhookEndpointReconciler.ts';
import { WorkQueue } from './workQueue.ts';

export const LEASE_NAME = 'audit-trail-controller';
const WATCH_RESTART_DELAY_MS = 500;

export interface ControllerOptions {
  readonly kubeConfig: KubeConfig;
  readonly keys: ApiKeyService;
  readonly registry: WebhookRegistry;
  /** Namespaces to watch; empty means all. */
  readonly namespaces: readonly string[];
  /** Where the leader-election Lease lives (the controller's own namespace). */
  readonly leaseNamespace: string;
  readonly identity?: string;
  readonly log: Logger;
  /** Every object is reconciled again this often, whatever the watch said (webhook status refreshes with it). */
  readonly resyncMs?: number;
  readonly workers?: number;
  readonly leaseTiming?: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
}

interface Kind {
  readonly resource: ResourceKind;
  reconcile(object: KubernetesObject): Promise<void>;
}

interface Running {
  readonly queue: WorkQueue;
  readonly informers: Map<string, ListWatch<KubernetesObject>[]>;
  readonly workers: Promise<void>[];
  readonly resync: NodeJS.Timeout;
}

/**
 * The controller role: leader election on a Lease, then per kind informers (list + watch with the
 * library's ListWatch, which resumes from the last resourceVersion and re-lists on 410 Gone; restarted
 * here after any other watch failure) feeding one work queue that serialises work per object, with capped
 * exponential backoff on failure and a periodic resync. A replica that loses the lease stops its informers
 * and workers until it wins it again.
 */
export class KubernetesController {
  private readonly options: ControllerOptions;
  private readonly elector: LeaderElector;
  private readonly custom: CustomObjectsApi;
  private readonly kinds: Kind[];
  private running: Running | undefined;

  constructor(options: ControllerOptions) {
    this.options = options;
    const config = options.kubeConfig;
    this.custom = config.makeApiClient(CustomObjectsApi);
    const core = config.makeApiClient(CoreV1Api);
    const resources = new KubeResources(this.custom, core);
    const events = new EventRecorder(core, options.log);
    const apiKeys = new ApiKeyReconciler({ resources, keys: options.keys, events, log: options.log });
    const webhooks = new WebhookEndpointReconciler({ resources, registry: options.registry, events, log: options.log });
    this.kinds = [
      { resource: API_KEY, reconcile: (object) => apiKeys.reconcile(object as unknown as ApiKeyObject) },
      { resource: WEBHOOK_ENDPOINT, reconcile: (object) => webhooks.reconcile(object as unknown as WebhookEndpointObject) },
    ];
    this.elector = new LeaderElector({
      identity: options.identity ?? `${hostname()}-${process.pid}`,
      store: kubeLeaseStore(config.makeApiClient(CoordinationV1Api), options.leaseNamespace, LEASE_NAME),
      ...(options.leaseTiming ?? DEFAULT_LEASE_TIMING),
      onStartedLeading: () => {
        options.log.info('leading: reconciling ApiKey and WebhookEndpoint resources');
        void this.startReconciling();
      },
      onStoppedLeading: () => {
        options.log.warn('lost the lease: reconciling stops');
        void this.stopReconciling();
      },
      onError: (error) => options.log.warn({ err: error }, 'leader election'),
    });
  }

  get isLeader(): boolean {
    return this.elector.isLeader;
  }

  start(): void {
    this.elector.start();
  }

  async stop(): Promise<void> {
    await this.stopReconciling();
    await this.elector.stop();
  }

  private async startReconciling(): Promise<void> {
    if (this.running) return;
    const queue = new WorkQueue();
    const informers = new Map<string, ListWatch<KubernetesObject>[]>();
    for (const kind of this.kinds) {
      const enqueue = (object: KubernetesObject) => queue.add(`${kind.resource.plural}/${object.metadata?.namespace}/${object.metadata?.name}`);
      informers.set(
        kind.resource.plural,
        this.watchedPaths(kind.resource).map(({ path, list }) => {
          const informer = new ListWatch<KubernetesObject>(path, new Watch(this.options.kubeConfig), list, false);
          informer.on('add', enqueue);
          informer.on('update', enqueue);
          // ListWatch resumes by itself after a 410 or a client-side timeout, but stops on any other error
          // (a cut connection, an API server restart): restart it.
          informer.on('error', (error: unknown) => {
            this.options.log.warn({ err: error, kind: kind.resource.kind }, 'watch failed; restarting it');
            setTimeout(() => {
              if (this.running?.informers.get(kind.resource.plural)?.includes(informer)) informer.start().catch(() => undefined);
            }, WATCH_RESTART_DELAY_MS).unref();
          });
          return informer;
        }),
      );
    }
    const resync = setInterval(() => {
      for (const [plural, list] of informers) {
        for (const informer of list) for (const object of informer.list()) queue.add(`${plural}/${object.metadata?.namespace}/${object.metadata?.name}`);
      }
    }, this.options.resyncMs ?? 30_000);
    resync.unref();
    const workers = Array.from({ length: this.options.workers ?? 2 }, () => this.work(queue, informers));
    this.running = { queue, informers, workers, resync };
    await Promise.all([...informers.values()].flat().map((informer) => informer.start()));
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

  private async work(queue: WorkQueue, informers: Map<string, ListWatch<KubernetesObject>[]>): Promise<void> {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      const [plural, namespace, name] = key.split('/') as [string, string, string];
      const kind = this.kinds.find((candidate) => candidate.resource.plural === plural)!;
      try {
        const object = informers.get(plural)!.map((informer) => informer.get(name, namespace)).find(Boolean);
        if (object) await kind.reconcile(object);
        queue.forget(key);
      } catch (error) {
        const delay = queue.addRateLimited(key);
        this.options.log.warn({ err: error, object: key, retry_in_ms: delay }, 'reconcile failed; will retry');
      } finally {
        queue.done(key);
      }
    }
  }

  private watchedPaths(resource: ResourceKind): Array<{ path: string; list: () => Promise<KubernetesListObject<KubernetesObject>> }> {
    const base = `/apis/${GROUP}/${VERSION}`;
    if (this.options.namespaces.length === 0) {
      return [{ path: `${base}/${resource.plural}`, list: () => this.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: resource.plural }) }];
    }
    return this.options.namespaces.map((namespace) => ({
      path: `${base}/namespaces/${namespace}/${resource.plural}`,
      list: () => this.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: resource.plural }),
    }));
  }
}
