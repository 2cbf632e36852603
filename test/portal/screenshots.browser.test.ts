/// <reference lib="dom" />
// page.evaluate callbacks run in the browser.
import { expect } from 'chai';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Locator, Page } from 'playwright-core';
import type { NewEvent } from '../../src/events/eventStore.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { launchBrowser, type TestBrowser } from '../support/browser.ts';
import { mintPortalLink, openPortal, startPortalService } from '../support/portal.ts';
import { call, mintKey, type TestService } from '../support/service.ts';

/**
 * The pictures of the portal in docs/portal.md, taken from the real page so that they show what it is
 * today, each after checking that the page shows what its caption says. Everything on them is fixed (the
 * events, their ids and times, the endpoints, their recent attempts, the time zone, the viewport; times that
 * depend on the clock, such as the session's expiry, are shown as a fixed time), so a file is rewritten only
 * when the page's looks change, and a test run leaves the work tree clean otherwise.
 */
const PICTURES = 'docs/portal';
const PHONE = { width: 390, height: 844 };
const LAPTOP = { width: 1280, height: 900 };

describe('customer portal: the pictures in docs/portal.md', function () {
  this.timeout(90_000);
  let db: TestDatabase;
  let service: TestService;
  let browser: TestBrowser;
  let page: Page;
  let link: () => Promise<string>;

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

  /**
   * Takes the picture docs/portal.md shows as `name`, having checked that what its caption names is in it:
   * each of `shows` visible and wholly inside the viewport, not scrolled off or hidden. Writes the file only
   * when it differs from the one in the tree.
   */
  async function picture(name: string, shows: readonly Locator[]): Promise<void> {
    expect(readFileSync('docs/portal.md', 'utf8'), `docs/portal.md shows ${name}`).to.include(`portal/${name}`);
    const viewport = page.viewportSize()!;
    for (const shown of shows) {
      const box = await shown.boundingBox();
      expect(box, `${shown} is on the page`).to.not.equal(null);
      expect(box!.x >= 0 && box!.y >= 0, `${shown} starts inside the picture`).to.equal(true);
      expect(box!.x + box!.width <= viewport.width && box!.y + box!.height <= viewport.height, `${shown} ends inside the picture`).to.equal(
        true,
      );
    }
    await page.evaluate(() => {
      // Times the clock moves: the session's expiry, the attempts of the last day the health reports, and
      // when the operational events happened; and the endpoint ids the service draws at random.
      for (const element of document.querySelectorAll('header.top time, [data-testid="health"] time, section.operational time')) {
        element.textContent = 'Mar 2, 2026, 12:15:00 UTC';
      }
      for (const cell of document.querySelectorAll('section.operational td.url')) {
        cell.textContent = (cell.textContent ?? '').replace(/^wh_[0-9a-f]{32}$/, 'wh_6b4d74b72060cc74884204af4457f89f');
      }
    });
    const path = `${PICTURES}/${name}`;
    const taken = await page.screenshot({ fullPage: false, animations: 'disabled', caret: 'hide' });
    // A PNG of the viewport (its IHDR chunk's width and height), at the page's scale.
    const scale = await page.evaluate(() => devicePixelRatio);
    expect(taken.subarray(1, 4).toString('latin1')).to.equal('PNG');
    expect([taken.readUInt32BE(16), taken.readUInt32BE(20)]).to.deep.equal([viewport.width * scale, viewport.height * scale]);
    if (!existsSync(path) || !readFileSync(path).equals(taken)) writeFileSync(path, taken);
  }

  /** An endpoint's recent deliveries and their attempts, as the workers would have recorded them: the last ones refused with 401. */
  async function recordAttempts(endpointId: string): Promise<void> {
    const outcomes = [[204], [204], [204], [401, 401], [401, 401]];
    for (const [index, codes] of outcomes.entries()) {
      const event = events[index]!;
      const succeeded = codes.at(-1) === 204;
      const { rows } = await db.pool.query<{ id: string }>(
        `INSERT INTO deliveries (endpoint_id, tenant_id, event_id, event_occurred_at, state, attempts, created_at, completed_at)
         VALUES ($1, 'northwind-clinic', $2::uuid, $3::timestamptz, $4, $5, now() - interval '2 hours', CASE WHEN $4 = 'succeeded' THEN now() END)
         RETURNING id::text AS id`,
        [endpointId, event.eventId, new Date(event.occurredAtMs).toISOString(), succeeded ? 'succeeded' : 'pending', codes.length],
      );
      for (const [attempt, code] of codes.entries()) {
        await db.pool.query(
          `INSERT INTO delivery_attempts (delivery_id, attempt, attempted_at, duration_ms, status_code, error, response_excerpt)
           VALUES ($1::int8, $2, now() - make_interval(mins => $3), 41, $4, NULL, $5)`,
          [rows[0]!.id, attempt + 1, 100 - index * 10 - attempt, code, code === 401 ? '{"error":"invalid signature"}' : ''],
        );
      }
    }
  }

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, events);
    // The api role alone: no worker, so no delivery changes what the webhooks page shows.
    service = await startPortalService(db.url, { roles: ['api'] });
    const { key } = await mintKey(db.url, {
      tenantId: 'northwind-clinic',
      scopes: ['audit:read', 'audit:export', 'webhooks:write', 'streams:write', 'portal:sessions'],
    });
    for (const endpoint of [
      { url: 'https://siem.northwind.example/audit-hook', event_filter: ['phi.'], description: 'Security operations SIEM' },
      { url: 'https://compliance.northwind.example/hooks/exports', event_filter: ['phi.export'], description: 'Export alerts' },
    ]) {
      const created = await call(`${service.baseUrl}/audit/webhooks`, { key, body: endpoint });
      expect(created.status, created.text).to.equal(201);
    }
    const { json } = await call(`${service.baseUrl}/audit/webhooks`, { key });
    const byUrl = (part: string) => json.endpoints.find((endpoint: { url: string }) => endpoint.url.includes(part)).id as string;
    await call(`${service.baseUrl}/audit/webhooks/${byUrl('compliance')}/disable`, { key, method: 'POST' });
    await recordAttempts(byUrl('siem'));
    const stream = await call(`${service.baseUrl}/audit/streams`, {
      key,
      body: { destination: { type: 'splunk_hec', url: 'https://splunk.northwind.example:8088', token: 'hec-token', index: 'audit' } },
    });
    expect(stream.status, stream.text).to.equal(201);
    browser = await launchBrowser();
    link = async () =>
      (await mintPortalLink(service, key, { capabilities: ['audit:read', 'audit:export', 'webhooks:write', 'streams:write'] })).url;
    page = await browser.newPage();
    await page.setViewportSize(LAPTOP);
    await openPortal(page, await link());
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
    await db?.drop();
  });

  const rows = () => page.locator('table.events tbody tr');

  it('takes the trail, filtered to PHI access, with its chip and count', async () => {
    await page.locator('form.filters [name="phi_involved"]').selectOption('true');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction((count) => document.querySelectorAll('table.events tbody tr').length === count, events.length);
    await page
      .getByTestId('result-count')
      .filter({ hasText: `${events.length} events` })
      .waitFor();
    expect(await page.locator('ul.chips li.chip span').allTextContents()).to.deep.equal(['PHI only']);
    expect(await rows().first().locator('time').textContent()).to.equal('Mar 2, 2026, 11:56:00 UTC');
    await picture('trail.png', [page.locator('ul.chips'), page.getByTestId('result-count'), rows().first()]);
  });

  it('takes the webhooks page, an endpoint failing with 401s while no delivery has run out of attempts', async () => {
    await page.getByRole('button', { name: 'Webhooks' }).click();
    await page.locator('table.endpoints tbody tr').nth(1).waitFor();
    const health = page.locator('[data-testid="health"]').first();
    await health.getByText('Failing: 4 failed attempts in a row').waitFor();
    expect(await health.textContent()).to.include('43% of 7 attempts succeeded (24 h); 2 deliveries retrying');
    await picture('webhooks.png', [health.getByText('Failing: 4 failed attempts in a row')]);
  });

  it('takes the log streams page', async () => {
    await page.getByRole('button', { name: 'Log streams' }).click();
    await page.locator('table.streams tbody tr').getByText('https://splunk.northwind.example:8088').waitFor();
    expect(await page.locator('table.streams tbody tr td').nth(1).textContent()).to.equal('Active');
    await picture('streams.png', [page.locator('table.streams tbody tr').first()]);
  });

  it('takes the trail on a phone, in dark mode: cards, the filters folded away', async () => {
    await page.setViewportSize(PHONE);
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.goto('about:blank');
    await openPortal(page, await link());
    expect(await page.locator('details.fold').evaluate((details) => (details as HTMLDetailsElement).open)).to.equal(false);
    // The PHI events, from the folded filters, which fold away again.
    await page.locator('details.fold > summary').click();
    await page.locator('form.filters [name="phi_involved"]').selectOption('true');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page
      .getByTestId('result-count')
      .filter({ hasText: `${events.length} events` })
      .waitFor();
    await page.locator('details.fold > summary').click();
    expect(await rows().first().locator('time').textContent()).to.equal('Mar 2, 2026, 11:56:00 UTC');
    expect(
      await rows()
        .first()
        .evaluate((row) => getComputedStyle(row).display),
    ).to.equal('block');
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth)).to.equal(true);
    await picture('trail-phone-dark.png', [page.locator('ul.chips'), page.getByTestId('result-count'), rows().first()]);
  });
});
