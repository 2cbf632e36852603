import { expect } from 'chai';
import { CoreV1Api } from '@kubernetes/client-node';
import { EventRecorder } from '../../src/controller/kubeEvents.ts';
import { GROUP, VERSION, resourceAddress, startControllerHarness, type ControllerHarness } from '../support/controller-harness.ts';
import { parseWithGo } from '../support/go-kube-time.ts';
import { testLogger } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

const NAMESPACE = 'team-wire';
/** metav1.MicroTime fields of the kinds the controller writes (Lease, Event). */
const MICRO_TIME_FIELDS = new Set(['acquireTime', 'renewTime', 'eventTime', 'lastObservedTime']);
/** metav1.Time fields (Event, metadata, metav1.Condition). */
const TIME_FIELDS = new Set(['firstTimestamp', 'lastTimestamp', 'lastTransitionTime', 'creationTimestamp', 'deletionTimestamp']);

interface Sent {
  readonly type: 'MicroTime' | 'Time';
  /** Where it was: `PUT /apis/coordination.k8s.io/.../leases/x spec.renewTime`. */
  readonly where: string;
  readonly value: string;
}

/** Every timestamp in a JSON body, by the type its field has in the Go API types. */
function timestampsIn(request: string, body: unknown, path: string[] = []): Sent[] {
  if (body === null || typeof body !== 'object') return [];
  return Object.entries(body).flatMap(([key, value]) => {
    const here = [...path, key];
    if (typeof value === 'string' && (MICRO_TIME_FIELDS.has(key) || TIME_FIELDS.has(key)))
      return [{ type: MICRO_TIME_FIELDS.has(key) ? 'MicroTime' : 'Time', where: `${request} ${here.join('.')}`, value } as const];
    return timestampsIn(request, value, here);
  });
}

/**
 * What the controller sends the API server, read the way a real API server reads it: the stand-in refuses
 * what Kubernetes refuses (test/support/kube-apiserver/wireFormats.ts), and every timestamp the controller
 * sent is parsed by Go's time package with metav1's layouts (test/support/go/kubetime.go), not by our own
 * reading of them. Before the fix, client-node wrote a Lease's renewTime as a plain Date, with three
 * fractional digits, which a real API server refuses with 400: no replica ever led.
 */
describe('what the controller sends the Kubernetes API, read as the API server reads it', function () {
  this.timeout(60_000);
  let harness: ControllerHarness;
  let sent: Sent[];
  let writes: ControllerHarness['kube']['requestLog'];

  before(async () => {
    harness = await startControllerHarness();
    const controller = harness.startController('wire-1');
    await waitFor(() => controller.isLeader, 'the replica to lead');
    await harness.custom.createNamespacedCustomObject({
      ...resourceAddress(NAMESPACE, 'apikeys'),
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'ApiKey',
        metadata: { name: 'wire' },
        spec: { tenantId: 'wire', scopes: ['audit:read'], secretName: 'wire-key' },
      },
    });
    await waitFor(async () => {
      const object = (await harness.custom.getNamespacedCustomObject({ ...resourceAddress(NAMESPACE, 'apikeys'), name: 'wire' })) as {
        status?: { conditions?: Array<{ type: string; status: string }> };
      };
      return object.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') ?? false;
    }, 'the ApiKey to be Ready');
    // An Event recorded twice is counted in the first one: a merge patch of count and lastTimestamp.
    const recorder = new EventRecorder(harness.kube.kubeConfig('controller').makeApiClient(CoreV1Api), testLogger(), {
      component: 'audit-trail-controller',
    });
    const involved = { apiVersion: `${GROUP}/${VERSION}`, kind: 'ApiKey', name: 'wire', namespace: NAMESPACE, uid: 'uid-wire' };
    await recorder.record(involved, 'Warning', 'Repeated', 'twice');
    await recorder.record(involved, 'Warning', 'Repeated', 'twice');
    // Stopping releases the Lease: one more renewTime.
    await controller.stop();
    writes = harness.kube.requestLog.filter((entry) => entry.token === 'controller' && entry.body !== undefined);
    sent = writes.flatMap((entry) => timestampsIn(`${entry.method} ${entry.path}`, JSON.parse(entry.body!)));
  });

  after(async () => {
    await harness?.stop();
  });

  it('wrote Leases, Events, a Secret, status and finalizer patches, and the API server accepted every one', () => {
    const written = new Set(writes.map((entry) => `${entry.method} ${entry.path.replace(/\/[^/]+$/, '/*')}`));
    expect([...written]).to.include.members([
      'POST /apis/coordination.k8s.io/v1/namespaces/audit-system/*',
      'PUT /apis/coordination.k8s.io/v1/namespaces/audit-system/leases/*',
      'POST /api/v1/namespaces/team-wire/*',
      'PATCH /api/v1/namespaces/team-wire/events/*',
      `PATCH /apis/${GROUP}/${VERSION}/namespaces/team-wire/apikeys/*`,
      `PATCH /apis/${GROUP}/${VERSION}/namespaces/team-wire/apikeys/wire/*`,
    ]);
    // 409 is optimistic concurrency at work; anything else in 4xx would be refused by a cluster too.
    const refused = writes.filter((entry) => entry.status! >= 400 && entry.status !== 409);
    expect(refused.map((entry) => `${entry.method} ${entry.path} ${entry.status}`)).to.deep.equal([]);
  });

  it("sends every MicroTime with exactly six fractional digits: Go parses each with metav1's layout", async () => {
    const micro = sent.filter((timestamp) => timestamp.type === 'MicroTime');
    expect(micro.map((timestamp) => timestamp.where.split(' ').at(-1))).to.include.members(['spec.acquireTime', 'spec.renewTime']);
    const parsed = await parseWithGo(micro);
    const refused = parsed.flatMap((result, index) => (result.error ? [`${micro[index]!.where}: ${result.error}`] : []));
    expect(refused).to.deep.equal([]);
    for (const timestamp of micro) expect(timestamp.value, timestamp.where).to.match(/\.\d{6}Z$/);
  });

  it('sends every Time as RFC 3339 in whole seconds, exactly as metav1 writes it back', async () => {
    const times = sent.filter((timestamp) => timestamp.type === 'Time');
    expect(times.map((timestamp) => timestamp.where.split(' ').at(-1))).to.include.members([
      'firstTimestamp',
      'lastTimestamp',
      'status.conditions.0.lastTransitionTime',
    ]);
    const parsed = await parseWithGo(times);
    const differing = parsed.flatMap((result, index) =>
      result.error || result.canonical !== result.value
        ? [`${times[index]!.where}: ${result.value} (${result.error || result.canonical})`]
        : [],
    );
    expect(differing).to.deep.equal([]);
  });

  it("is checked by a parser that refuses what a cluster refuses: Go and the stand-in reject client-node's three-digit Date", async () => {
    const [plainDate] = await parseWithGo([{ type: 'MicroTime', value: '2026-12-04T21:54:18.209Z' }]);
    expect(plainDate!.error).to.match(/cannot parse/);
    const response = await fetch(`${harness.kube.url}/apis/coordination.k8s.io/v1/namespaces/audit-system/leases`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: 'three-digits' },
        spec: { holderIdentity: 'x', leaseDurationSeconds: 15, renewTime: '2026-12-04T21:54:18.209Z' },
      }),
    });
    expect(response.status).to.equal(400);
    const status = (await response.json()) as Record<string, unknown>;
    expect(status).to.include({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'BadRequest', code: 400 });
    expect(status.message).to.match(/^Lease in version "v1" cannot be handled as a Lease: parsing time "2026-12-04T21:54:18\.209Z"/);
  });

  it('answers names and label values beyond their limits with 422 Invalid and its causes, as the API server does', async () => {
    const post = async (path: string, body: object) => {
      const response = await fetch(`${harness.kube.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { code: response.status, status: (await response.json()) as Record<string, any> };
    };
    const secret = await post(`/api/v1/namespaces/${NAMESPACE}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'Not_A_Name', labels: { 'audittrail.dev/tenant': 't'.repeat(64) } },
    });
    expect(secret.code).to.equal(422);
    expect(secret.status).to.include({ kind: 'Status', reason: 'Invalid', code: 422 });
    expect(secret.status.details).to.include({ name: 'Not_A_Name', group: '', kind: 'Secret' });
    expect(secret.status.details.causes.map((cause: { field: string }) => cause.field)).to.have.members([
      'metadata.name',
      'metadata.labels',
    ]);
    expect(secret.status.message).to.match(/^Secret "Not_A_Name" is invalid: \[metadata\.name: Invalid value/);
    const namespace = await post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team.a' } });
    expect(namespace.code).to.equal(422);
    expect(namespace.status.message).to.match(
      /^Namespace "team.a" is invalid: metadata\.name: Invalid value: "team.a": a lowercase RFC 1123 label/,
    );
    // A generated name keeps 58 characters of its prefix, whatever its length.
    const event = await post(`/api/v1/namespaces/${NAMESPACE}/events`, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { generateName: `${'a'.repeat(250)}.` },
      involvedObject: { kind: 'ApiKey', name: 'a'.repeat(250), namespace: NAMESPACE },
      reason: 'Long',
    });
    expect(event.code).to.equal(201);
    expect(event.status.metadata.name).to.have.length(63);
  });
});
