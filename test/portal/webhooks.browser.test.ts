/// <reference lib="dom" />
// page.evaluate callbacks run in the browser.
import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import type { Locator, Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';
import { accessibilityViolations, launchBrowser, type TestBrowser } from '../support/browser.ts';
import { ingest, mintPortalLink, openPortal, startPortalService } from '../support/portal.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * The customer portal's webhooks page, in Debian's Chromium against the real service, its workers and a
 * loopback receiver (docs/portal.md): create an endpoint and keep its secret, see deliveries and their
 * attempts, retry, replay, rotate, test, change settings, disable, enable again, delete, the operational events;
 * and a read-only session's page.
 */
describe('customer portal: webhooks, in a real browser', function () {
  this.timeout(90_000);
  let db: TestDatabase;
  let service: TestService;
  let browser: TestBrowser;
  let receiver: TestReceiver;
  let backendKey: string;
  let page: Page;
  let secret: string;
  let endpointId: string;

  const endpointRow = (id = endpointId) => page.locator(`tr[data-endpoint-id="${id}"]`);
  const signatureValid = (body: Buffer, header: string, key: string) => {
    const t = /t=(\d+)/.exec(header)![1]!;
    const expected = createHmac('sha256', key).update(`t=${t}.`).update(body).digest('hex');
    return header.split(',').some((part) => part === `v1=${expected}`);
  };
  const deliveriesOf = async (status?: string) =>
    (await call(`${service.baseUrl}/audit/webhooks/${endpointId}/deliveries${status ? `?status=${status}` : ''}`, { key: backendKey })).json
      .deliveries;
  async function openLog(): Promise<Locator> {
    await endpointRow().getByRole('button', { name: 'Deliveries' }).click();
    const dialog = page.locator('dialog[open]');
    await dialog.getByRole('heading', { name: /^Deliveries to / }).waitFor();
    return dialog;
  }
  async function closeDialog(): Promise<void> {
    await page.keyboard.press('Escape');
    await page.locator('dialog[open]').waitFor({ state: 'detached' });
  }

  before(async () => {
    db = await createTestDatabase();
    service = await startPortalService(db.url);
    backendKey = (await mintKey(db.url, { tenantId: 'clinic-a', scopes: ['audit:read', 'webhooks:write', 'portal:sessions'] })).key;
    receiver = await startReceiver(204);
    browser = await launchBrowser();
    page = await browser.newPage();
    await openPortal(page, (await mintPortalLink(service, backendKey, { capabilities: ['audit:read', 'webhooks:write'] })).url);
    await page.getByRole('button', { name: 'Webhooks' }).click();
    await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await receiver?.close();
    await service?.stop();
    await db?.drop();
  });

  it('creates an endpoint with a filter and shows its secret once, with a copy button', async () => {
    await page.getByLabel('URL').fill(receiver.url);
    await page.getByLabel(/^Actions/).fill('phi., admin.user.');
    await page.getByLabel('Description').fill('SIEM <em>test</em>');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const dialog = page.locator('dialog[open]');
    await dialog.getByRole('heading', { name: 'Endpoint created' }).waitFor();
    secret = (await dialog.getByTestId('secret').textContent())!;
    expect(secret).to.match(/^[0-9a-f]{64}$/);
    await dialog.getByRole('button', { name: 'Copy' }).click();
    await dialog.getByText('Copied.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).to.equal(secret);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await closeDialog();
    const { json } = await call(`${service.baseUrl}/audit/webhooks`, { key: backendKey });
    expect(json.endpoints).to.have.length(1);
    endpointId = json.endpoints[0].id;
    expect(json.endpoints[0]).to.include({ url: receiver.url, description: 'SIEM <em>test</em>' });
    expect(json.endpoints[0].event_filter).to.deep.equal(['phi.', 'admin.user.']);
    await endpointRow().getByText('SIEM <em>test</em>').waitFor();
    expect(await endpointRow().locator('em').count()).to.equal(0);
    expect(await endpointRow().locator('td').nth(2).textContent()).to.equal('Active');
  });

  it('shows a delivery and its attempt; the secret it showed is the one that signs', async () => {
    const [eventId] = await ingest(service, [producerEvent({ tenant_id: 'clinic-a', action: 'phi.read' })]);
    await waitFor(() => receiver.received.some((delivery) => delivery.json().id === eventId), 'the delivery');
    const delivered = receiver.received.find((delivery) => delivery.json().id === eventId)!;
    expect(signatureValid(delivered.rawBody, String(delivered.headers['x-service-signature']), secret)).to.equal(true);
    await waitFor(async () => (await deliveriesOf('succeeded')).length === 1, 'the recorded outcome');
    const log = await openLog();
    const row = log.locator('tr[data-delivery-id]').first();
    expect(await row.locator('td').nth(1).textContent()).to.equal('phi.read');
    expect(await row.locator('td').nth(2).textContent()).to.equal('Delivered');
    await row.getByRole('button', { name: 'Attempts' }).click();
    const attempt = log.locator('.attempts tbody tr').first();
    await attempt.waitFor();
    expect(await attempt.locator('td').nth(1).textContent()).to.equal('Succeeded');
    expect(await attempt.locator('td').nth(4).textContent()).to.equal('204');
    expect(await log.getByRole('button', { name: 'Retry now' }).count()).to.equal(0);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
    await closeDialog();
  });

  it("shows a failed attempt's status, error and response excerpt, and retries it", async () => {
    receiver.reply({ status: 500, body: '<h1>boom</h1>' });
    const [eventId] = await ingest(service, [producerEvent({ tenant_id: 'clinic-a', action: 'phi.query' })]);
    await waitFor(
      async () =>
        (await deliveriesOf()).some(
          (delivery: { event_id: string; attempts: number }) => delivery.event_id === eventId && delivery.attempts === 1,
        ),
      'the failed first attempt',
    );
    receiver.reply(204);
    // The endpoint's health says what its attempts were: failing, though no delivery has run out of attempts.
    await page.getByRole('button', { name: 'Trail' }).click();
    await page.getByRole('button', { name: 'Webhooks' }).click();
    const health = endpointRow().getByTestId('health');
    await health.getByText('Failing: 1 failed attempt in a row').waitFor();
    expect(await health.textContent()).to.include('Last error: HTTP 500 at');
    expect(await health.textContent()).to.include('50% of 2 attempts succeeded (24 h); 1 delivery retrying');
    const log = await openLog();
    const row = log.locator('tr[data-delivery-id]').filter({ hasText: 'phi.query' });
    // Still pending in the API's words (attempts remain), and failing in fact: said as it is.
    expect(await row.locator('td').nth(2).textContent()).to.equal('Retrying: attempt 1 failed');
    expect(await row.locator('td').nth(4).textContent()).to.equal('HTTP 500');
    await row.getByRole('button', { name: 'Attempts' }).click();
    const attempts = log.locator('.attempts tbody tr');
    await attempts.first().waitFor();
    expect(await attempts.first().locator('td').nth(1).textContent()).to.equal('Failed');
    expect(await attempts.first().locator('td').nth(4).textContent()).to.equal('500');
    expect(await attempts.first().locator('pre.excerpt').textContent()).to.equal('<h1>boom</h1>');
    await log.getByRole('button', { name: 'Retry now' }).click();
    await waitFor(async () => (await deliveriesOf('succeeded')).length === 2, 'the retried delivery to succeed');
    await log.getByRole('button', { name: 'Refresh' }).click();
    await log.locator('tr[data-delivery-id]').filter({ hasText: 'phi.query' }).filter({ hasText: 'Delivered' }).waitFor();
    await closeDialog();
  });

  it('replays a time range and shows its progress to completion', async () => {
    const before = receiver.received.length;
    const log = await openLog();
    const now = new Date(Date.now() + 1000);
    const hourAgo = new Date(now.getTime() - 3_600_000);
    const local = (date: Date) => date.toISOString().slice(0, 19);
    await log.getByLabel('From').fill(local(hourAgo));
    await log.getByLabel('Until').fill(local(now));
    await log.getByLabel('Only events not yet delivered').uncheck();
    await log.getByRole('button', { name: 'Replay' }).click();
    const status = log.getByTestId('replay-status');
    await status.filter({ hasText: 'Replay completed' }).waitFor({ timeout: 20_000 });
    // phi.read and phi.query match the filter ["phi.", "admin.user."]; the endpoint's own admin.webhook.* events do not.
    expect(await status.textContent()).to.equal('Replay completed: 2 events matched, 2 deliveries created.');
    await waitFor(() => receiver.received.length >= before + 2, 'the replayed deliveries');
    await closeDialog();
  });

  it('sends a test event and shows its outcome', async () => {
    await endpointRow().getByRole('button', { name: 'Send test' }).click();
    await endpointRow()
      .getByRole('status')
      .filter({ hasText: /^Test delivered: 204 in \d+ ms$/ })
      .waitFor();
    expect(receiver.received.at(-1)!.json().type).to.equal('webhook.test');
  });

  it('rotates the secret with an overlap: the new one shown once, deliveries signed with both', async () => {
    await endpointRow().getByRole('button', { name: 'Rotate secret' }).click();
    const dialog = page.locator('dialog[open]');
    await dialog.getByLabel(/^Overlap/).fill('3600');
    await dialog.getByRole('button', { name: 'Rotate secret' }).click();
    await page.locator('dialog[open]').getByRole('heading', { name: 'Secret rotated' }).waitFor();
    const rotated = (await page.locator('dialog[open]').getByTestId('secret').textContent())!;
    expect(rotated).to.match(/^[0-9a-f]{64}$/);
    expect(rotated).not.to.equal(secret);
    await closeDialog();
    const [eventId] = await ingest(service, [producerEvent({ tenant_id: 'clinic-a', action: 'phi.read' })]);
    await waitFor(() => receiver.received.some((delivery) => delivery.json().id === eventId), 'a delivery after the rotation');
    const delivered = receiver.received.find((delivery) => delivery.json().id === eventId)!;
    const header = String(delivered.headers['x-service-signature']);
    expect(signatureValid(delivered.rawBody, header, rotated)).to.equal(true);
    expect(signatureValid(delivered.rawBody, header, secret)).to.equal(true);
  });

  it("changes the endpoint's settings: a payload filter refused at its place, then kept; Ed25519 with its public key; a header set", async () => {
    await endpointRow().getByRole('button', { name: 'Settings' }).click();
    const dialog = page.locator('dialog[open]');
    await dialog.getByRole('heading', { name: /^Settings of / }).waitFor();
    await dialog.getByLabel(/^Payload filter/).fill('{"path": "actor.name", "equals": "x"}');
    await dialog.getByRole('button', { name: 'Save settings' }).click();
    await dialog.getByRole('alert').filter({ hasText: 'payload_filter.path' }).waitFor();
    await dialog.getByLabel(/^Payload filter/).fill('{"path": "details.ward", "in": ["3B", "4C"]}');
    await dialog.getByLabel(/^Set headers/).fill('X-Team: compliance');
    await dialog.getByLabel('Ed25519 (v1a)').check();
    await dialog.getByLabel(/^Rate limit/).fill('25');
    await dialog.getByRole('button', { name: 'Save settings' }).click();
    await dialog.waitFor({ state: 'detached' });
    const { json } = await call(`${service.baseUrl}/audit/webhooks`, { key: backendKey });
    const changed = json.endpoints.find((endpoint: { id: string }) => endpoint.id === endpointId);
    expect(changed).to.deep.include({
      payload_filter: { path: 'details.ward', in: ['3B', '4C'] },
      header_names: ['X-Team'],
      signature_schemes: ['hmac', 'ed25519'],
      rate_limit_per_s: 25,
      description: 'SIEM <em>test</em>',
    });
    await endpointRow().getByText('and a payload filter').waitFor();
    await endpointRow().getByRole('button', { name: 'Settings' }).click();
    expect(await page.locator('dialog[open]').getByTestId('public-key').textContent()).to.equal(changed.public_key);
    await closeDialog();
    const log = await openLog();
    await log.getByText('Only events whose body meets this payload filter').waitFor();
    await closeDialog();
  });

  it('disables the endpoint and enables the same one again, shows both in the operational events, and deletes it', async () => {
    await endpointRow().getByRole('button', { name: 'Disable' }).click();
    await endpointRow().locator('td').nth(2).filter({ hasText: 'Disabled' }).waitFor();
    await endpointRow().getByRole('button', { name: 'Enable again' }).click();
    await endpointRow().locator('td').nth(2).filter({ hasText: 'Active' }).waitFor();
    const { json } = await call(`${service.baseUrl}/audit/webhooks`, { key: backendKey });
    expect(json.endpoints.map((endpoint: { id: string; active: boolean }) => [endpoint.id, endpoint.active])).to.deep.equal([
      [endpointId, true],
    ]);

    await page.reload();
    await openPortal(page, (await mintPortalLink(service, backendKey, { capabilities: ['audit:read', 'webhooks:write'] })).url);
    await page.getByRole('button', { name: 'Webhooks' }).click();
    const notices = page.locator('table.operational-events');
    await notices.locator('tr[data-event-type="endpoint.enabled"]').waitFor();
    await notices.locator('tr[data-event-type="endpoint.disabled"]').getByText('reason: manual').waitFor();

    const other = await call(`${service.baseUrl}/audit/webhooks`, { key: backendKey, body: { url: receiver.url, event_filter: ['phi.'] } });
    await endpointRow().getByRole('button', { name: 'Delete' }).click();
    await page.locator('dialog[open]').getByRole('button', { name: 'Delete endpoint' }).click();
    await endpointRow().waitFor({ state: 'detached' });
    const left = (await call(`${service.baseUrl}/audit/webhooks`, { key: backendKey })).json.endpoints;
    expect(left.map((endpoint: { id: string }) => endpoint.id)).to.deep.equal([other.json.endpoint.id]);
    expect(await accessibilityViolations(page)).to.deep.equal([]);
  });

  it('shows a read-only session the endpoints and their log, without a control that changes anything', async () => {
    const readOnly = await browser.newPage();
    await openPortal(readOnly, (await mintPortalLink(service, backendKey, { capabilities: ['audit:read'] })).url);
    await readOnly.getByRole('button', { name: 'Webhooks' }).click();
    const row = readOnly.locator('table.endpoints tbody tr').first();
    await row.waitFor();
    expect(
      await readOnly.getByRole('button', { name: /Create endpoint|Send test|Rotate secret|Disable|Delete|Settings/ }).count(),
    ).to.equal(0);
    await row.getByRole('button', { name: 'Deliveries' }).click();
    const log = readOnly.locator('dialog[open]');
    await log.getByRole('heading', { name: /^Deliveries to / }).waitFor();
    expect(await log.getByRole('button', { name: /Replay|Retry now/ }).count()).to.equal(0);
    await readOnly.close();
  });
});
