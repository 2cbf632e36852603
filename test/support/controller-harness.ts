import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { ApiKeyService } from '../../src/auth/apiKeyService.ts';
import { KubernetesController } from '../../src/controller/controller.ts';
import { Database } from '../../src/db/database.ts';
import { EventWriter } from '../../src/ingestion/eventWriter.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import { WebhookRegistry } from '../../src/webhooks/webhookRegistry.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { startKubeApiServer, type KubeApiServer } from './kube-apiserver/server.ts';
import { TEST_ENCRYPTION_KEY, TEST_PEPPER, startTestService, testLogger, type TestService } from './service.ts';

export const GROUP = 'audittrail.dev';
export const VERSION = 'v1alpha1';
export const LEASE_TIMING = { leaseDurationMs: 600, renewDeadlineMs: 400, retryPeriodMs: 100 };
export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export interface ControllerHarness {
  readonly db: TestDatabase;
  readonly kube: KubeApiServer;
  readonly api: TestService;
  readonly keys: ApiKeyService;
  readonly registry: WebhookRegistry;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  readonly controllers: KubernetesController[];
  startController(identity: string): KubernetesController;
  stop(): Promise<void>;
}

/**
 * Everything a controller test needs: the Kubernetes API stand-in loaded with crds/, a fresh database,
 * the api role (to try keys), the controller's domain services and the real client-node APIs.
 */
export async function startControllerHarness(apiEnv: Record<string, string> = {}): Promise<ControllerHarness> {
  const db = await createTestDatabase();
  const kube = await startKubeApiServer({ crdDirectories: ['crds'] });
  const api = await startTestService({ databaseUrl: db.url, roles: ['api'], env: apiEnv });
  const controllerDb = new Database({ url: db.url, poolSize: 4, applicationName: 'test controller', log: testLogger() });
  const writer = new EventWriter(controllerDb);
  const keys = new ApiKeyService(writer, TEST_PEPPER, 'live');
  const registry = new WebhookRegistry({ writer, secrets: new SecretBox(TEST_ENCRYPTION_KEY), policy: { allowHttp: true, allowPrivateTargets: true } });
  const controllers: KubernetesController[] = [];
  return {
    db,
    kube,
    api,
    keys,
    registry,
    custom: kube.kubeConfig('tester').makeApiClient(CustomObjectsApi),
    core: kube.kubeConfig('tester').makeApiClient(CoreV1Api),
    controllers,
    startController(identity) {
      const controller = new KubernetesController({
        kubeConfig: kube.kubeConfig(),
        keys,
        registry,
        namespaces: [],
        leaseNamespace: 'audit-system',
        identity,
        log: testLogger(),
        resyncMs: 1_000,
        leaseTiming: LEASE_TIMING,
      });
      controller.start();
      controllers.push(controller);
      return controller;
    },
    async stop() {
      await Promise.all(controllers.map((controller) => controller.stop()));
      await api.stop();
      await controllerDb.close();
      await kube.stop();
      await db.drop();
    },
  };
}
