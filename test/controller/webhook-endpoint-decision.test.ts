import { expect } from 'chai';
import type { SecretState } from '../../src/controller/kubeResources.ts';
import { actsOnRequest, decideWebhookEndpoint } from '../../src/controller/webhookEndpointDecision.ts';
import type { WebhookEndpointSpec } from '../../src/controller/webhookEndpointResource.ts';
import { secretData, type WebhookEndpointObject } from '../../src/controller/webhookEndpointState.ts';
import type { WebhookEndpoint } from '../../src/webhooks/webhookEndpoint.ts';
import { webhookEndpoint } from '../support/webhookEndpoints.ts';

const ROTATE = 'audittrail.dev/rotate';
const RECREATE = 'audittrail.dev/recreate';
const ENABLE = 'audittrail.dev/enable';

const SPEC: WebhookEndpointSpec = { tenantId: 'acme', url: 'https://hooks.example/in', secretName: 'acme-hook' };

function endpoint(overrides: Partial<WebhookEndpoint> = {}): WebhookEndpoint {
  return webhookEndpoint({
    id: 'e1',
    url: 'https://hooks.example/in',
    managedBy: 'kubernetes:ns/acme-hook/uid',
    ...overrides,
  });
}

function resource(annotations: Record<string, string> = {}, status: WebhookEndpointObject['status'] = { id: 'e1' }): WebhookEndpointObject {
  return {
    apiVersion: 'audittrail.dev/v1',
    kind: 'WebhookEndpoint',
    metadata: { name: 'acme-hook', namespace: 'ns', uid: 'uid', annotations },
    spec: SPEC,
    status,
  } as WebhookEndpointObject;
}

const holding = (id: string): SecretState => ({ state: 'owned', values: secretData('s'.repeat(32), id) });
const NONE_HANDLED = { recreateRequest: undefined, rotateRequest: undefined, enableRequest: undefined };

describe('what a reconcile of a WebhookEndpoint does, decided', () => {
  it('registers the first endpoint, taking every annotation already there as handled', () => {
    const object = resource({ [ROTATE]: 'r1', [ENABLE]: 'e1' }, undefined);
    expect(decideWebhookEndpoint(object, SPEC, undefined, { state: 'missing' })).to.deep.equal({
      kind: 'register',
      handled: { recreateRequest: undefined, rotateRequest: 'r1', enableRequest: 'e1' },
    });
  });

  it('enables an endpoint disabled by hand once spec.disabled is gone, without being asked', () => {
    const found = endpoint({ active: false, disabledReason: 'manual' });
    const step = decideWebhookEndpoint(resource(), SPEC, found, holding('e1'));
    expect(step).to.deep.equal({ kind: 'enable', endpoint: found, handled: NONE_HANDLED });
  });

  it('keeps an auto-disabled endpoint disabled until the enable annotation asks, then records the request', () => {
    const found = endpoint({ active: false, disabledReason: 'auto', consecutiveFailures: 50 });
    expect(decideWebhookEndpoint(resource(), SPEC, found, holding('e1')).kind).to.equal('settled');
    const asked = decideWebhookEndpoint(resource({ [ENABLE]: 'now' }), SPEC, found, holding('e1'));
    expect(asked).to.deep.equal({ kind: 'enable', endpoint: found, handled: { ...NONE_HANDLED, enableRequest: 'now' } });
    const handled = decideWebhookEndpoint(resource({ [ENABLE]: 'now' }, { id: 'e1', enableRequest: 'now' }), SPEC, found, holding('e1'));
    expect(handled.kind).to.equal('settled');
  });

  it('replaces an auto-disabled endpoint when the recreate annotation asks, even with enable asked too', () => {
    const found = endpoint({ active: false, disabledReason: 'auto' });
    const step = decideWebhookEndpoint(resource({ [RECREATE]: 'again', [ENABLE]: 'now' }), SPEC, found, holding('e1'));
    expect(step).to.deep.equal({ kind: 'replace', endpoint: found, handled: { ...NONE_HANDLED, recreateRequest: 'again' } });
  });

  it('ignores the recreate annotation on an endpoint that was not auto-disabled', () => {
    expect(decideWebhookEndpoint(resource({ [RECREATE]: 'again' }), SPEC, endpoint(), holding('e1')).kind).to.equal('settled');
  });

  it('rotates the signing secret of an active endpoint in place when asked', () => {
    const found = endpoint();
    expect(decideWebhookEndpoint(resource({ [ROTATE]: 'r2' }), SPEC, found, holding('e1'))).to.deep.equal({
      kind: 'rotate-in-place',
      endpoint: found,
      handled: { ...NONE_HANDLED, rotateRequest: 'r2' },
    });
  });

  it('replaces a disabled endpoint asked to rotate (a disabled one has nothing to rotate in place)', () => {
    const found = endpoint({ active: false, disabledReason: 'auto' });
    expect(decideWebhookEndpoint(resource({ [ROTATE]: 'r2' }), SPEC, found, holding('e1'))).to.deep.equal({
      kind: 'replace',
      endpoint: found,
      handled: { ...NONE_HANDLED, rotateRequest: 'r2' },
    });
  });

  it('keeps a delivered endpoint whose Secret was deleted or changed, and says so (deliveries go on)', () => {
    const step = decideWebhookEndpoint(resource(), SPEC, endpoint(), { state: 'missing' });
    expect(step.kind).to.equal('secret-missing');
    expect(step.kind === 'secret-missing' && step.health).to.include({ state: 'Stalled', reason: 'SecretMissing' });
    expect(decideWebhookEndpoint(resource(), SPEC, endpoint(), holding('e0')).kind).to.equal('secret-missing');
  });

  it('replaces an endpoint whose secret no one ever saw (neither the Secret nor status shows it)', () => {
    const found = endpoint();
    expect(decideWebhookEndpoint(resource({}, {}), SPEC, found, { state: 'missing' })).to.deep.equal({
      kind: 'replace',
      endpoint: found,
      handled: NONE_HANDLED,
    });
  });

  it('updates an active endpoint in place when a setting differs from the spec, and settles one that matches', () => {
    const found = endpoint();
    expect(decideWebhookEndpoint(resource(), { ...SPEC, description: 'billing' }, found, holding('e1')).kind).to.equal('update-in-place');
    expect(decideWebhookEndpoint(resource(), SPEC, found, holding('e1'))).to.deep.equal({
      kind: 'settled',
      endpoint: found,
      handled: NONE_HANDLED,
    });
  });

  it('leaves a disabled endpoint settled whatever its Secret holds or its settings say', () => {
    const found = endpoint({ active: false, disabledReason: 'auto' });
    expect(decideWebhookEndpoint(resource(), { ...SPEC, description: 'billing' }, found, { state: 'missing' }).kind).to.equal('settled');
  });

  it('acts on a request only for the current version of the resource: enabling, rotating, replacing', () => {
    const found = endpoint();
    const kinds = ['enable', 'rotate-in-place', 'replace', 'update-in-place', 'settled'] as const;
    expect(kinds.filter((kind) => actsOnRequest({ kind, endpoint: found, handled: NONE_HANDLED }))).to.deep.equal([
      'enable',
      'rotate-in-place',
      'replace',
    ]);
    expect(actsOnRequest({ kind: 'register', handled: NONE_HANDLED })).to.equal(false);
  });
});
