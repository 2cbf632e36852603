import { expect } from 'chai';
import type { KubernetesController } from '../../src/controller/controller.ts';
import { ServiceMetrics } from '../../src/platform/metrics.ts';
import {
  GROUP,
  LEASE_TIMING,
  VERSION,
  resourceAddress,
  startControllerHarness,
  type ControllerHarness,
} from '../support/controller-harness.ts';
import { captureLog } from '../support/log-capture.ts';
import { waitFor } from '../support/wait.ts';
import { controllerMetrics } from '../../src/controller/controllerMetrics.ts';

const NAMESPACE = 'team-lead';
const LEASE = 'audit-trail-controller';
const LEASE_PATH = `/apis/coordination.k8s.io/v1/namespaces/audit-system/leases`;

interface LogLine {
  level: string;
  msg: string;
  object?: string;
  code?: number;
  reason?: string;
}

/** A 403 as the API server words one for a ServiceAccount without the verb. */
const forbidden = (what: string) => ({
  code: 403,
  reason: 'Forbidden',
  message: `${what} is forbidden: User "system:serviceaccount:audit:audit-trail" cannot update resource`,
});

/**
 * A replica that cannot take or renew its Lease keeps saying so, where an operator looks: audit_controller_leader
 * stays 0 (AuditTrailControllerNoLeader fires on it), audit_controller_lease_errors_total counts the tries,
 * /readyz fails naming the Lease and the API server's reason, and the refusal is logged once at error level,
 * not at every try. A write the API server refuses during a reconcile is named the same way, once.
 */
describe('leadership that cannot fail silently', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;
  const { log, lines, clear } = captureLog<LogLine>('info');
  const sample = async (metric: { get(): Promise<{ values: Array<{ value: number; labels: Record<string, unknown> }> }> }) =>
    (await metric.get()).values.find((value) => value.labels.lease === LEASE)?.value;
  const leadershipReadiness = (controller: KubernetesController) =>
    controller.readiness
      .find((check) => check.name === 'leader-election')!
      .check()
      .then(
        () => 'ready',
        (error: Error) => error.message,
      );

  before(async () => {
    harness = await startControllerHarness();
  });

  after(async () => {
    await harness?.stop();
  });

  it('says so by metric, readiness and one error line while the API server refuses its Lease, and leads once it may', async () => {
    const metrics = new ServiceMetrics();
    harness.kube.refuse(
      (request) => request.token === 'lease-refused' && request.path.startsWith(LEASE_PATH) && request.method !== 'GET',
      forbidden(`leases.coordination.k8s.io "${LEASE}"`),
    );
    const controller = harness.startController('refused-1', { token: 'lease-refused', metrics, log });
    // Many tries (one per retry period), well past a lease duration.
    await waitFor(async () => ((await sample(controllerMetrics(metrics).leaseErrors)) ?? 0) >= 8, 'eight refused tries at the Lease');
    expect(controller.isLeader).to.equal(false);
    expect(await sample(controllerMetrics(metrics).leader)).to.equal(0);
    await waitFor(async () => (await leadershipReadiness(controller)) !== 'ready', 'readiness to fail');
    expect(await leadershipReadiness(controller)).to.match(
      new RegExp(`^the Lease audit-system/${LEASE} has not been reached (yet|for \\d+ s): the Kubernetes API answered 403 Forbidden: `),
    );
    const refusals = lines().filter((line) => line.level === 'error');
    expect(refusals.map((line) => [line.object, line.code, line.reason])).to.deep.equal([[`${LEASE_PATH} (${LEASE})`, 403, 'Forbidden']]);
    expect(refusals[0]!.msg).to.include('cannot update resource');
    expect(lines().filter((line) => line.level === 'warn' && line.msg.startsWith('cannot reach the Lease'))).to.have.length(1);

    harness.kube.refuse();
    await waitFor(() => controller.isLeader, 'the replica to lead once the API server lets it');
    expect(await sample(controllerMetrics(metrics).leader)).to.equal(1);
    await waitFor(async () => (await leadershipReadiness(controller)) === 'ready', 'readiness to pass');
    expect(lines().some((line) => line.msg === `the Lease audit-system/${LEASE} is reachable again`)).to.equal(true);
    await controller.stop();
    expect(await sample(controllerMetrics(metrics).leader)).to.equal(0);
    // A lease duration of the test's timing, not the default 15 s: readiness fails sooner than that here.
    expect(LEASE_TIMING.leaseDurationMs).to.be.lessThan(15_000);
  });

  it('names an object whose write the API server refuses during a reconcile, once, and counts the failed reconciles', async () => {
    clear();
    const metrics = new ServiceMetrics();
    const controller = harness.startController('status-refused-1', { token: 'status-refused', metrics, log });
    await waitFor(() => controller.isLeader, 'the replica to lead');
    harness.kube.refuse(
      (request) => request.token === 'status-refused' && request.method === 'PATCH' && request.path.endsWith('/refused/status'),
      forbidden('apikeys.audittrail.dev "refused"'),
    );
    await harness.custom.createNamespacedCustomObject({
      ...resourceAddress(NAMESPACE, 'apikeys'),
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name: 'refused' },
        spec: { tenantId: 'lead', scopes: ['audit:read'], secretName: 'refused-key' },
      },
    });
    const failures = async () =>
      (await controllerMetrics(metrics).reconcileErrors.get()).values.find((value) => value.labels.kind === 'apikeys')?.value ?? 0;
    await waitFor(async () => (await failures()) >= 3, 'three failed reconciles of the ApiKey');
    const refusals = lines().filter((line) => line.level === 'error');
    expect(refusals.map((line) => [line.object, line.code])).to.deep.equal([
      [`/apis/${GROUP}/${VERSION}/namespaces/${NAMESPACE}/apikeys/refused/status`, 403],
    ]);
    harness.kube.refuse();
    await controller.stop();
  });
});
