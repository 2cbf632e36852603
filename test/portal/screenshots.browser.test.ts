/// <reference lib="dom" />
// page.evaluate callbacks run in the browser.
import { expect } from 'chai';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import type { NewEvent } from '../../src/events/eventStore.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent, seedEvents } from '../support/events.ts';
import { launchBrowser, type TestBrowser } from '../support/browser.ts';
import { mintPortalLink, openPortal, startPortalService } from '../support/portal.ts';
import { call, mintKey, type TestService } from '../support/service.ts';

/**
 * The pictures of the portal in docs/portal.md, taken from the real page so that they show what it is
 * today. Everything on them is fixed (the events, their ids and times, the endpoints, the time zone, the
 * viewport; the session's expiry is shown as a fixed time), so a file is rewritten only when the page's
 * looks change, and a test run leaves the work tree clean otherwise.
 */
const PICTURES = 'docs/portal';

describe('customer portal: the pictures in docs/portal.md', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let browser: TestBrowser;
  let page: Page;

  const people = [
    ['dr-okafor', 'physician'],
    ['nurse-lindqvist', 'nurse'],
    ['billing-chen', 'billing'],
    ['dr-okafor', 'physician'],
    ['reception-diaz', 'front_desk'],
  ] as const;
  const events: NewEvent[] = Array.from({ length: 14 }, (_, index) => {
    const [userId, userRole] = people[index % people.length]!;
    return newEvent({
      eventId: `0195a1c2-7d00-7000-8000-${String(index).padStart(12, '0')}`,
      tenantId: 'northwind-clinic',
      occurredAtMs: Date.parse('2026-03-02T08:15:00.000Z') + index * 17 * 60_000,
      action: index % 4 === 2 ? 'phi.export' : index % 3 === 1 ? 'phi.update' : 'phi.read',
      userId,
      userRole,
      resourceType: index % 5 === 3 ? 'lab_result' : 'patient_record',
      resourceId: `patient-${1040 + (index % 6)}`,
      success: index !== 9,
      sourceIp: '10.20.4.17',
      userAgent: 'northwind-ehr/5.2',
    });
  });

  /** Writes the picture only when it differs from the one in the tree. */
  async function picture(name: string): Promise<void> {
    await page.evaluate(() => {
      for (const element of document.querySelectorAll('header.top time')) element.textContent = '3/2/2026, 12:15:00 PM';
    });
    const path = `${PICTURES}/${name}`;
    const taken = await page.screenshot({ fullPage: false, animations: 'disabled', caret: 'hide' });
    if (!existsSync(path) || !readFileSync(path).equals(taken)) writeFileSync(path, taken);
    expect(readFileSync(path).equals(taken)).to.equal(true);
  }

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, events);
    // The api role alone: no worker, so no delivery changes what the webhooks page shows.
    service = await startPortalService(db.url, { roles: ['api'] });
    const { key } = await mintKey(db.url, {
      tenantId: 'northwind-clinic',
      scopes: ['audit:read', 'audit:export', 'webhooks:write', 'portal:sessions'],
    });
    for (const endpoint of [
      { url: 'https://siem.northwind.example/audit-hook', event_filter: ['phi.'], description: 'Security operations SIEM' },
      { url: 'https://compliance.northwind.example/hooks/exports', event_filter: ['phi.export'], description: 'Export alerts' },
    ]) {
      const created = await call(`${service.baseUrl}/audit/webhooks`, { key, body: endpoint });
      expect(created.status, created.text).to.equal(201);
    }
    const { json } = await call(`${service.baseUrl}/audit/webhooks`, { key });
    const exportsHook = json.endpoints.find((endpoint: { url: string }) => endpoint.url.includes('compliance'));
    await call(`${service.baseUrl}/audit/webhooks/${exportsHook.id}/disable`, { key, method: 'POST' });
    browser = await launchBrowser();
    page = await browser.newPage();
    await openPortal(page, (await mintPortalLink(service, key, { capabilities: ['audit:read', 'audit:export', 'webhooks:write'] })).url);
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
    await db?.drop();
  });

  it('takes the trail, filtered to PHI access', async () => {
    await page.locator('form.filters [name="phi_involved"]').selectOption('true');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction((count) => document.querySelectorAll('table.events tbody tr').length === count, events.length);
    await picture('trail.png');
  });

  it('takes the webhooks page', async () => {
    await page.getByRole('button', { name: 'Webhooks' }).click();
    await page.locator('table.endpoints tbody tr').nth(1).waitFor();
    await picture('webhooks.png');
  });
});
