/// <reference lib="dom" />
import { expect } from 'chai';
import { gunzipSync } from 'node:zlib';
import type { Page } from 'playwright-core';
import { verifyWebhookSignature } from '../../src/client/webhookSignature.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { producerEvent } from '../support/newEvents.ts';
import { launchBrowser, type TestBrowser } from '../support/browser.ts';
import { ingest, mintPortalLink, openPortal, startPortalService } from '../support/portal.ts';
import { startReceiver, type TestReceiver } from '../support/receiver.ts';
import { call, mintKey, type TestService } from '../support/service.ts';
import { waitFor } from '../support/wait.ts';

/**
 * Log streams in the portal (docs/portal.md "Log streams"), against the real service with its streams role
 * and a collector on loopback: a session with streams:write creates a stream (its signing secret shown once),
 * sends a test record, pauses it and sees its lag grow, resumes it and sees it catch up, and deletes it; a
 * session without it sees the streams and nothing that changes them.
 */
describe('customer portal: log streams, in a real browser', function () {
  this.timeout(90_000);
  let db: TestDatabase;
  let service: TestService;
  let browser: TestBrowser;
  let collector: TestReceiver;
  let key: string;
  let page: Page;

  const streamRow = () => page.locator('table.streams tbody tr').first();
  const records = () =>
    collector.received
      .filter((batch) => batch.headers['content-encoding'] === 'gzip')
      .flatMap((batch) => gunzipSync(batch.rawBody).toString('utf8').trim().split('\n'))
      .map((line) => JSON.parse(line))
      // Batches begin with the tenant's signed tree head; a test record has no event id.
      .filter((record) => typeof record.event_id === 'string' && typeof record.action === 'string');

  before(async () => {
    db = await createTestDatabase();
    service = await startPortalService(db.url, { roles: ['api', 'ingest', 'sealer', 'streams'], env: { STREAMS_POLL_MS: '100' } });
    key = (await mintKey(db.url, { tenantId: 'clinic-s', scopes: ['audit:read', 'streams:write', 'portal:sessions'] })).key;
    collector = await startReceiver(200, '/audit');
    browser = await launchBrowser();
    page = await browser.newPage();
    await openPortal(page, (await mintPortalLink(service, key, { capabilities: ['audit:read', 'streams:write'] })).url);
    await page.getByRole('button', { name: 'Log streams' }).click();
    await page.getByRole('heading', { name: 'Log streams' }).waitFor();
  });

  after(async () => {
    await browser?.close();
    await collector?.close();
    await service?.stop();
    await db?.drop();
  });

  it('creates an HTTPS stream with a filter, shows its secret once, and the secret signs its batches', async () => {
    const form = page.locator('form.create');
    await form.getByLabel('Destination').selectOption('https');
    await form.getByLabel('Collector URL').fill(collector.url);
    await form.getByLabel(/^Actions/).fill('phi.');
    await form.getByRole('button', { name: 'Create stream' }).click();
    const dialog = page.locator('dialog[open]');
    await dialog.getByRole('heading', { name: 'Stream created' }).waitFor();
    const secret = (await dialog.getByTestId('secret').textContent())!;
    expect(secret).to.match(/^[0-9a-f]{64}$/);
    await dialog.getByRole('button', { name: 'Close', exact: true }).click();
    await streamRow().getByText(collector.url).waitFor();
    expect(await streamRow().locator('td').nth(1).textContent()).to.equal('Active');
    expect(await streamRow().locator('td').first().textContent()).to.include('Native, phi.');

    await ingest(service, [
      producerEvent({ tenant_id: 'clinic-s', action: 'phi.read' }),
      producerEvent({ tenant_id: 'clinic-s', action: 'auth.login' }),
    ]);
    await waitFor(() => records().some((record) => record.action === 'phi.read'), 'the phi.read event at the collector');
    const batch = collector.received.find((received) => received.headers['content-encoding'] === 'gzip')!;
    expect(verifyWebhookSignature(secret, String(batch.headers['x-service-signature']), batch.rawBody).valid).to.equal(true);
    expect(records().some((record) => record.action === 'auth.login')).to.equal(false);
  });

  it('sends a test record and says the collector accepted it', async () => {
    const before = collector.received.length;
    await streamRow().getByRole('button', { name: 'Send test' }).click();
    await streamRow()
      .getByRole('status')
      .filter({ hasText: /^Test record accepted in \d+ ms$/ })
      .waitFor();
    expect(collector.received.length).to.be.greaterThan(before);
  });

  it('pauses the stream and shows its lag grow, then resumes it and shows it catch up', async () => {
    await streamRow().getByRole('button', { name: 'Pause' }).click();
    await streamRow().locator('td').nth(1).filter({ hasText: 'Paused' }).waitFor();
    const delivered = records().length;
    await ingest(
      service,
      [1, 2, 3].map(() => producerEvent({ tenant_id: 'clinic-s', action: 'phi.read' })),
    );
    // Sealed within a few hundred milliseconds; the page shows the lag when it looks again.
    await waitFor(
      async () => {
        await page.getByRole('button', { name: 'Refresh' }).click();
        return /^\d+ events waiting \(paused\)$/.test((await streamRow().locator('td').nth(2).textContent()) ?? '');
      },
      'the lag of the paused stream',
      20_000,
      300,
    );
    expect(records().length).to.equal(delivered);
    await streamRow().getByRole('button', { name: 'Resume' }).click();
    await streamRow().locator('td').nth(1).filter({ hasText: 'Active' }).waitFor();
    await waitFor(() => records().length === delivered + 3, 'the three events delivered after the resume');
    await waitFor(
      async () => {
        await page.getByRole('button', { name: 'Refresh' }).click();
        return (await streamRow().locator('td').nth(2).textContent()) === 'Caught up';
      },
      'the stream caught up',
      20_000,
      300,
    );
    expect(await streamRow().locator('td').nth(3).locator('time').textContent()).to.match(/ UTC$/);
  });

  it('shows a session without streams:write the streams, and no control that changes one', async () => {
    const readOnly = await browser.newPage();
    await openPortal(readOnly, (await mintPortalLink(service, key, { capabilities: ['audit:read'] })).url);
    await readOnly.getByRole('button', { name: 'Log streams' }).click();
    await readOnly.locator('table.streams tbody tr').first().waitFor();
    expect(await readOnly.getByRole('button', { name: /Create stream|Send test|Pause|Resume|Delete/ }).count()).to.equal(0);
    await readOnly.close();
  });

  it('deletes the stream after asking', async () => {
    await streamRow().getByRole('button', { name: 'Delete' }).click();
    await page.locator('dialog[open]').getByRole('button', { name: 'Delete stream' }).click();
    await page.getByText('No log streams yet.').waitFor();
    const { json } = await call(`${service.baseUrl}/audit/streams`, { key });
    expect(json.streams).to.deep.equal([]);
  });
});
