import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { GROUP, VERSION, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { freePort } from '../support/ports.ts';
import { TEST_ENCRYPTION_KEY, TEST_PEPPER } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const LEASE = { CONTROLLER_LEASE_DURATION_MS: '1500', CONTROLLER_RENEW_DEADLINE_MS: '1000', CONTROLLER_RETRY_PERIOD_MS: '200' };

/** Two `audit-trail serve --roles controller` processes against the API stand-in: one leads, the other takes over. */
describe('controller processes', function () {
  this.timeout(120_000);
  let harness: ControllerHarness;
  const processes = new Map<string, ChildProcess>();

  before(async () => {
    harness = await startControllerHarness();
  });

  after(async () => {
    for (const child of processes.values()) child.kill('SIGKILL');
    await harness?.stop();
  });

  async function startProcess(name: string): Promise<void> {
    const child = spawn(process.execPath, ['src/cli.ts', 'serve', '--roles', 'controller'], {
      env: {
        ...process.env,
        ...LEASE,
        KUBECONFIG: harness.kube.kubeconfigPath,
        DATABASE_URL: harness.db.url,
        KEY_PEPPER: TEST_PEPPER,
        SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
        HOST: '127.0.0.1',
        INTERNAL_PORT: String(await freePort()),
        POD_NAME: name,
        POD_NAMESPACE: 'audit-system',
        CONTROLLER_RESYNC_MS: '1000',
        LOG_LEVEL: 'error',
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    processes.set(name, child);
  }

  const lease = () => {
    try {
      return harness.kube.store.get('coordination.k8s.io/v1/leases', 'audit-system', 'audit-trail-controller').spec as {
        holderIdentity?: string;
        acquireTime?: string;
        renewTime?: string;
      };
    } catch {
      return undefined;
    }
  };
  const holder = () => lease()?.holderIdentity;
  const reconciled = async (name: string) => {
    await harness.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: 'team-c',
      plural: 'apikeys',
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name },
        spec: { tenantId: 'acme', scopes: ['audit:read'], secretName: `${name}-key` },
      },
    });
    await waitFor(
      async () =>
        (await harness.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: 'team-c', plural: 'apikeys', name }))
          .status?.state === 'Active',
      `${name} to be reconciled`,
      15_000,
    );
  };

  it('elects one leader, and the other process takes over when the leader is killed', async () => {
    await startProcess('proc-1');
    await startProcess('proc-2');
    // Two processes loading the whole service from source: on a loaded two-core machine start-up alone has
    // taken 40 s (measured at a load average of 27).
    await waitFor(() => holder() === 'proc-1' || holder() === 'proc-2', 'a leader', 60_000);
    const leader = holder()!;
    const standby = leader === 'proc-1' ? 'proc-2' : 'proc-1';
    await reconciled('first');

    const leaderProcess = processes.get(leader)!;
    leaderProcess.kill('SIGKILL'); // no release: the lease must expire
    await once(leaderProcess, 'exit');
    const abandoned = lease()!;
    expect(abandoned.holderIdentity, 'the lease still names the killed leader').to.equal(leader);
    await waitFor(() => holder() === standby, 'the stand-by to take over', 15_000);
    // Measured with the times the two processes wrote into the lease, not with this busy test process's
    // clock: the take-over began at least a lease duration after the last renewal (less the one request
    // that lies between the start of the stand-by's attempt, when it takes its time, and its expiry check).
    const takenOver = lease()!;
    expect(Date.parse(takenOver.acquireTime!) - Date.parse(abandoned.renewTime!)).to.be.at.least(
      Number(LEASE.CONTROLLER_LEASE_DURATION_MS) - Number(LEASE.CONTROLLER_RETRY_PERIOD_MS),
    );
    await reconciled('second');
    // Only one key per resource, whoever reconciled it.
    const managed = await harness.db.pool.query(`SELECT count(*)::int AS n FROM api_keys WHERE managed_by LIKE 'kubernetes:team-c/%'`);
    expect(managed.rows[0].n).to.equal(2);
  });
});
