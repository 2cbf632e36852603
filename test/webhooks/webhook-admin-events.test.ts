import { expect } from 'chai';
import { endpointNotice, streamNotice } from '../../src/webhooks/operationalEvents.ts';
import { SecretBox } from '../../src/webhooks/secretBox.ts';
import type { WebhookEndpoint } from '../../src/webhooks/webhookEndpoint.ts';
import { webhookEvent } from '../../src/webhooks/webhookEvents.ts';
import { webhookEndpoint } from '../support/webhookEndpoints.ts';

const endpoint = webhookEndpoint({
  id: `wh_${'c'.repeat(32)}`,
  eventFilter: ['phi.'],
  description: 'SIEM',
  active: false,
  disabledReason: 'auto',
  consecutiveFailures: 10,
  disabledAt: new Date(0),
  headerNames: ['X-Team'],
  timeoutS: 5,
  retryScheduleS: [10, 60],
  ordered: true,
});
const actor = { userId: 'ops@acme', userRole: 'admin', sourceIp: '10.1.2.3', userAgent: 'curl/8' };

describe('what the trail and the operational endpoints are told of a webhook endpoint', () => {
  it('records a change as an admin.webhook.* event of the tenant, by its actor, dated now', () => {
    const before = Date.now();
    const event = webhookEvent('admin.webhook.disable', endpoint, actor);
    expect(event).to.deep.include({
      tenantId: 'acme',
      action: 'admin.webhook.disable',
      userId: 'ops@acme',
      userRole: 'admin',
      sourceIp: '10.1.2.3',
      userAgent: 'curl/8',
      resourceType: 'webhook_endpoint',
      resourceId: endpoint.id,
      phiInvolved: false,
      success: true,
    });
    expect(event.occurredAtMs).to.be.within(before, Date.now());
  });

  it('says what the endpoint is (settings, header names, state), and what the change adds', () => {
    const details = JSON.parse(
      webhookEvent('admin.webhook.update', endpoint, actor, { previous: { url: 'https://old.example.com/' } }).details,
    );
    expect(details).to.deep.equal({
      url: endpoint.url,
      event_filter: ['phi.'],
      description: 'SIEM',
      kind: 'events',
      payload_filter: null,
      header_names: ['X-Team'],
      timeout_s: 5,
      retry_schedule_s: [10, 60],
      rate_limit_per_s: null,
      ordered: true,
      signature_schemes: ['hmac'],
      active: false,
      consecutive_failures: 10,
      managed_by: null,
      previous: { url: 'https://old.example.com/' },
    });
  });

  it('never carries a secret or a header value', () => {
    const box = new SecretBox('22'.repeat(32));
    const sealed = { ...endpoint, secretCiphertext: box.seal('whsec_top'), headersCiphertext: box.seal('[["X-Team","blue"]]') };
    const text = JSON.stringify(webhookEvent('admin.webhook.create', sealed as WebhookEndpoint, actor));
    expect(text).not.to.include('whsec_top').and.not.to.include('blue').and.not.to.include('Ciphertext');
  });

  it('tells operational endpoints bad news as unsuccessful and good news as successful', () => {
    const disabled = endpointNotice('endpoint.disabled', endpoint, { reason: 'auto' });
    expect(disabled).to.deep.equal({
      tenantId: 'acme',
      type: 'endpoint.disabled',
      resource: { type: 'webhook_endpoint', id: endpoint.id },
      success: false,
      details: { url: endpoint.url, description: 'SIEM', consecutive_failures: 10, reason: 'auto' },
    });
    expect(endpointNotice('endpoint.enabled', endpoint).success).to.equal(true);
    expect(endpointNotice('endpoint.failing', endpoint).success).to.equal(false);
    const stream = { id: `str_${'d'.repeat(32)}`, tenantId: 'acme', destinationType: 'splunk_hec' };
    expect(streamNotice('stream.failing', stream, { reason: '403' })).to.deep.include({
      success: false,
      resource: { type: 'log_stream', id: stream.id },
      details: { destination_type: 'splunk_hec', reason: '403' },
    });
    expect(streamNotice('stream.recovered', stream).success).to.equal(true);
  });
});
