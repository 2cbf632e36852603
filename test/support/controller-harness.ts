import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { ApiKeyService } from '../../src/auth/apiKeyService.ts';
import type { BackoffPolicy } from '../../src/controller/backoff.ts';
import { KubernetesController } from '../../src/controller/controller.ts';
import { Database } from '../../src/db/database.ts';
import { readDeploymentId } from '../../src/db/deploymentIdentity.ts';
import { CONTROLLED_RESOURCE_LOCKS, SessionLocks } from '../../src/db/sessionLocks.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { LegalHolds } from '../../src/lifecycle/legalHolds.ts';
import { RetentionPolicies } from '../../src/lifecycle/retentionPolicies.ts';
import type { Logger } from '../../src/platform/logger.ts';
import type { ServiceMetrics } from '../../src/platform/metrics.ts';
import { ManagedStreams } from '../../src/streams/managedStreams.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import type { WebhookRegistry } from '../../src/webhooks/webhookRegistry.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { startKubeApiServer, type KubeApiServer } from './kube-apiserver/server.ts';
import { TEST_ENCRYPTION_KEY, TEST_PEPPER, startTestService, testLogger, type TestService } from './service.ts';
import { waitFor } from './wait.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { testWebhookRegistry } from './webhookRegistry.ts';

export const GROUP = 'audittrail.dev';
export const VERSION = 'v1alpha1';
export const LEASE_TIMING = { leaseDurationMs: 600, renewDeadlineMs: 400, retryPeriodMs: 100 };
const LEASE_NAME = 'audit-trail-controller';
export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The address of a custom resource (or of its collection) for CustomObjectsApi calls. */
export function resourceAddress(namespace: string, plural: string, name?: string) {
  return { group: GROUP, version: VERSION, namespace, plural, ...(name ? { name } : {}) };
}

/** What one release of the service owns: its database (with its deployment id) and the controller's domain services on it. */
export interface Deployment {
  readonly db: TestDatabase;
  readonly deploymentId: string;
  readonly keys: ApiKeyService;
  readonly registry: WebhookRegistry;
  readonly retention: RetentionPolicies;
  readonly holds: LegalHolds;
  readonly streams: ManagedStreams;
  /** What the controller role locks resources with, on this database. */
  readonly locks: SessionLocks;
}

interface ControllerOptions {
  /** The release whose controller this is; the harness's own by default. */
  readonly deployment?: Deployment;
  readonly controllerClass?: string;
  readonly leaseName?: string;
  /** Labels the controller's requests in the stand-in's requestLog ('controller' by default). */
  readonly token?: string;
  readonly resyncMs?: number;
  readonly watchBackoff?: BackoffPolicy;
  readonly metrics?: ServiceMetrics;
  /** Where the controller logs (silent unless TEST_LOG_LEVEL asks, by default). */
  readonly log?: Logger;
  readonly requireTenantBinding?: boolean;
}

export interface ControllerHarness extends Deployment {
  readonly kube: KubeApiServer;
  readonly api: TestService;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  readonly controllers: KubernetesController[];
  startController(identity: string, options?: ControllerOptions): KubernetesController;
  /** Another release's database and services, against the same Kubernetes API. */
  startDeployment(): Promise<Deployment>;
  /** Another process of a release (the harness's own by default): its own connections to the same database. */
  connectAgain(deployment?: Deployment): Promise<Deployment>;
  /**
   * Waits until the harness's controllers have processed the resource `times` more times (from now): the
   * sentinel for "resyncs changed nothing", instead of sleeping through a few resync periods.
   */
  reconciledAgain(plural: string, namespace: string, name: string, times?: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Everything a controller test needs: the Kubernetes API stand-in loaded with crds/ (or the CRDs of an
 * earlier release), a fresh database, the api role (to try keys), the controller's domain services and the
 * real client-node APIs.
 */
export async function startControllerHarness(
  apiEnv: Record<string, string> = {},
  options: { crdDirectories?: readonly string[] } = {},
): Promise<ControllerHarness> {
  const kube = await startKubeApiServer({ crdDirectories: options.crdDirectories ?? ['crds'] });
  const closers: Array<() => Promise<void>> = [];
  async function startDeployment(): Promise<Deployment> {
    const db = await createTestDatabase();
    closers.push(() => db.drop());
    return servicesOn(db);
  }
  async function servicesOn(db: TestDatabase): Promise<Deployment> {
    const controllerDb = new Database({ url: db.url, poolSize: 4, applicationName: 'test controller', log: testLogger() });
    closers.push(() => controllerDb.close());
    const writer = new EventWriter(controllerDb, WEBHOOK_FAN_OUT);
    return {
      db,
      deploymentId: await readDeploymentId(controllerDb),
      locks: new SessionLocks(controllerDb, CONTROLLED_RESOURCE_LOCKS),
      keys: new ApiKeyService({ db: controllerDb, writer, pepper: TEST_PEPPER, environment: 'live' }),
      registry: testWebhookRegistry(controllerDb, writer),
      retention: new RetentionPolicies({ db: controllerDb, writer, defaultPeriod: undefined }),
      holds: new LegalHolds({ db: controllerDb, writer }),
      streams: new ManagedStreams({
        db: controllerDb,
        secrets: new SecretBox(TEST_ENCRYPTION_KEY),
        policy: { allowHttp: true, allowPrivateTargets: true },
      }),
    };
  }
  const home = await startDeployment();
  const api = await startTestService({ databaseUrl: home.db.url, roles: ['api'], env: apiEnv });
  const controllers: KubernetesController[] = [];
  /** Work-queue keys processed so far, by key. */
  const processed = new Map<string, number>();
  return {
    ...home,
    kube,
    api,
    custom: kube.kubeConfig('tester').makeApiClient(CustomObjectsApi),
    core: kube.kubeConfig('tester').makeApiClient(CoreV1Api),
    controllers,
    startDeployment,
    connectAgain: (deployment = home) => servicesOn(deployment.db),
    startController(identity, options = {}) {
      const deployment = options.deployment ?? home;
      const controller = new KubernetesController({
        kubeConfig: kube.kubeConfig(options.token),
        keys: deployment.keys,
        registry: deployment.registry,
        retention: deployment.retention,
        holds: deployment.holds,
        streams: deployment.streams,
        locks: deployment.locks,
        deploymentId: deployment.deploymentId,
        controllerClass: options.controllerClass ?? 'default',
        namespaces: [],
        requireTenantBinding: options.requireTenantBinding ?? false,
        leaseNamespace: 'audit-system',
        leaseName: options.leaseName ?? LEASE_NAME,
        identity,
        log: options.log ?? testLogger(),
        resyncMs: options.resyncMs ?? 1_000,
        leaseTiming: LEASE_TIMING,
        ...(options.watchBackoff ? { watchBackoff: options.watchBackoff } : {}),
        ...(options.metrics ? { metrics: options.metrics } : {}),
        onReconciled: (key) => processed.set(key, (processed.get(key) ?? 0) + 1),
      });
      controller.start();
      controllers.push(controller);
      return controller;
    },
    async reconciledAgain(plural, namespace, name, times = 2) {
      const key = `${plural}/${namespace}/${name}`;
      const before = processed.get(key) ?? 0;
      await waitFor(() => (processed.get(key) ?? 0) >= before + times, `${times} more reconciles of ${key}`, 20_000);
    },
    async stop() {
      await Promise.all(controllers.map((controller) => controller.stop()));
      await api.stop();
      await kube.stop();
      for (const close of closers.reverse()) await close();
    },
  };
}
