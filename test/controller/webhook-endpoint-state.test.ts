import { expect } from 'chai';
import type { CustomResource, SecretState } from '../../src/controller/kubeResources.ts';
import { managedByOf, pendingRequest } from '../../src/controller/kubeResources.ts';
import { ROTATE_ANNOTATION } from '../../src/controller/resources.ts';
import type { WebhookEndpointSpec } from '../../src/controller/webhookEndpointResource.ts';
import {
  RECREATE_ANNOTATION,
  differsFromSpec,
  healthOf,
  heldSecretOf,
  secretData,
  settledSecret,
} from '../../src/controller/webhookEndpointState.ts';
import type { WebhookEndpoint } from '../../src/webhooks/webhookEndpoint.ts';
import { webhookEndpoint } from '../support/webhookEndpoints.ts';

const ID = `wh_${'a'.repeat(32)}`;
const endpoint = (changes: Partial<WebhookEndpoint> = {}): WebhookEndpoint =>
  webhookEndpoint({ id: ID, eventFilter: ['phi.'], managedBy: 'kubernetes:acme/siem/uid-1', ...changes });
const spec = (changes: Partial<WebhookEndpointSpec> = {}) =>
  ({ url: 'https://hooks.example.com/audit', eventFilter: ['phi.'], secretName: 'siem-hook', ...changes }) as WebhookEndpointSpec;
const resource = (
  annotations: Record<string, string> = {},
  status: Record<string, unknown> = {},
): CustomResource<unknown, Record<string, unknown>> =>
  ({
    apiVersion: 'audittrail.dev/v1alpha1',
    kind: 'WebhookEndpoint',
    metadata: { namespace: 'acme', name: 'siem', uid: 'uid-1', annotations },
    spec: {},
    status,
  }) as CustomResource<unknown, Record<string, unknown>>;
const owned = (values: Record<string, string>): SecretState => ({ state: 'owned', values });

/** What the WebhookEndpoint controller concludes from a resource, its endpoint and its Secret, without I/O. */
describe('a WebhookEndpoint resource and its endpoint (webhookEndpointState.ts)', () => {
  it('applies nothing while the endpoint is as the spec says, URL spelling and scheme order aside', () => {
    expect(differsFromSpec(endpoint(), spec())).to.equal(false);
    expect(differsFromSpec(endpoint(), spec({ url: 'HTTPS://Hooks.Example.com:443/audit' }))).to.equal(false);
    const both = endpoint({ signatureSchemes: ['hmac', 'ed25519'] });
    expect(differsFromSpec(both, spec({ signatureSchemes: ['ed25519', 'hmac'] }))).to.equal(false);
  });

  it('changes the endpoint in place when any setting of the spec differs', () => {
    for (const changed of [
      spec({ url: 'https://hooks.example.com/other' }),
      spec({ eventFilter: ['admin.'] }),
      spec({ description: 'SIEM' }),
      spec({ timeoutSeconds: 5 }),
      spec({ retryScheduleSeconds: [10] }),
      spec({ rateLimitPerSecond: 3 }),
      spec({ ordered: true }),
      spec({ signatureSchemes: ['ed25519'] }),
      spec({ payloadFilter: { path: 'type', equals: 'phi.read' } }),
    ])
      expect(differsFromSpec(endpoint(), changed), JSON.stringify(changed)).to.equal(true);
  });

  it('reports an active endpoint Ready, and one disabled automatically Stalled with the annotations that help', () => {
    expect(healthOf(endpoint())).to.deep.include({ state: 'Ready', reason: 'Active' });
    const disabled = healthOf(endpoint({ active: false, disabledReason: 'auto', consecutiveFailures: 10 }));
    expect(disabled).to.deep.include({ state: 'Stalled', reason: 'AutoDisabled' });
    expect(disabled.message).to.include('after 10 consecutive failed deliveries').and.include(RECREATE_ANNOTATION);
    expect(healthOf(endpoint({ active: false, disabledReason: 'manual' })).reason).to.equal('DisabledOutsideKubernetes');
  });

  it('writes the signing secret for receivers in both forms, with the endpoint it signs for', () => {
    const data = secretData('whsec_c2VjcmV0', ID);
    expect(data).to.include({ signingSecret: 'whsec_c2VjcmV0', endpointId: ID });
    expect(data.standardWebhooksSecret).to.match(/^whsec_/);
  });

  it('takes the secret from the Secret only when it holds this endpoint’s, and no annotation asks to change it', () => {
    const held = owned(secretData('s3cret', ID));
    expect(heldSecretOf(held, endpoint())).to.equal('s3cret');
    expect(heldSecretOf(owned(secretData('s3cret', `wh_${'b'.repeat(32)}`)), endpoint())).to.equal(undefined);
    expect(heldSecretOf({ state: 'missing' }, endpoint())).to.equal(undefined);
    expect(settledSecret(resource(), endpoint())(held)).to.equal(true);
    expect(settledSecret(resource({ [ROTATE_ANNOTATION]: '2' }, { rotateRequest: '1' }), endpoint())(held)).to.equal(false);
    expect(settledSecret(resource({ [ROTATE_ANNOTATION]: '1' }, { rotateRequest: '1' }), endpoint())(held)).to.equal(true);
    expect(settledSecret(resource(), undefined)(held)).to.equal(false);
  });

  it('asks again only for an annotation value not handled yet, and owns rows by namespace, name and uid', () => {
    expect(pendingRequest(resource({ [RECREATE_ANNOTATION]: 'x' }), RECREATE_ANNOTATION, undefined)).to.equal('x');
    expect(pendingRequest(resource({ [RECREATE_ANNOTATION]: 'x' }), RECREATE_ANNOTATION, 'x')).to.equal(undefined);
    expect(pendingRequest(resource(), RECREATE_ANNOTATION, 'x')).to.equal(undefined);
    expect(managedByOf(resource())).to.equal('kubernetes:acme/siem/uid-1');
  });
});
