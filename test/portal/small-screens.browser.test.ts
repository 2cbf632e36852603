/// <reference lib="dom" />
// page.evaluate callbacks run in the browser.
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { accessibilityViolations, launchBrowser, type TestBrowser } from '../support/browser.ts';
import { mintPortalLink, openPortal, startPortalService } from '../support/portal.ts';
import { call, mintKey, type TestService } from '../support/service.ts';

/**
 * Every page of the portal on a phone (390×844) and on a laptop (1280×800), in light and dark
 * (prefers-color-scheme emulated): no page scrolls sideways, however long the values on it; on the phone the
 * trail is a list of cards, the filters are folded away and a dialog keeps a margin; and axe-core finds no
 * serious or critical problem, the colours' contrast included, in either scheme.
 */
const SIZES = [
  { name: 'phone', width: 390, height: 844 },
  { name: 'laptop', width: 1280, height: 800 },
] as const;
const SCHEMES = ['light', 'dark'] as const;

describe('customer portal: on a phone and a laptop, in light and dark', function () {
  this.timeout(120_000);
  let db: TestDatabase;
  let service: TestService;
  let browser: TestBrowser;
  let key: string;
  const long = 'service-account:nightly-claims-reconciliation-eu-west-production-batch-7';

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(
      db.url,
      Array.from({ length: 60 }, (_, index) =>
        newEvent({
          tenantId: 'clinic-a',
          occurredAtMs: Date.parse('2026-03-02T08:00:00.000Z') + index * 60_000,
          action: index % 2 ? 'phi.read' : 'admin.integration.credentials.rotate',
          userId: index % 3 ? long : 'dr-okafor',
          resourceType: 'patient_record',
          resourceId: `patient-${index}-${'x'.repeat(60)}`,
        }),
      ),
    );
    service = await startPortalService(db.url, { roles: ['api'] });
    key = (
      await mintKey(db.url, {
        tenantId: 'clinic-a',
        scopes: ['audit:read', 'audit:export', 'webhooks:write', 'streams:write', 'portal:sessions'],
      })
    ).key;
    const hook = await call(`${service.baseUrl}/audit/webhooks`, {
      key,
      body: { url: `https://siem.clinic-a.example/${'hooks/'.repeat(12)}audit`, event_filter: ['phi.', 'admin.integration.'] },
    });
    expect(hook.status, hook.text).to.equal(201);
    // A disabled one too: its operational event is listed below the endpoints.
    const retired = await call(`${service.baseUrl}/audit/webhooks`, {
      key,
      body: { url: `https://old.clinic-a.example/${'x'.repeat(80)}` },
    });
    await call(`${service.baseUrl}/audit/webhooks/${retired.json.endpoint.id}/disable`, { key, method: 'POST' });
    const stream = await call(`${service.baseUrl}/audit/streams`, {
      key,
      body: { destination: { type: 'https', url: `https://collector.clinic-a.example/${'audit/'.repeat(12)}` } },
    });
    expect(stream.status, stream.text).to.equal(201);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
    await db?.drop();
  });

  async function noSidewaysScroll(page: Page, where: string): Promise<void> {
    const widths = await page.evaluate((): { page: number; window: number } => ({
      page: document.documentElement.scrollWidth,
      window: window.innerWidth,
    }));
    expect(widths.page, `${where}: the page is ${widths.page} px wide in a ${widths.window} px window`).to.be.at.most(widths.window);
  }

  async function clean(page: Page, where: string): Promise<void> {
    await noSidewaysScroll(page, where);
    expect(await accessibilityViolations(page), where).to.deep.equal([]);
  }

  for (const size of SIZES) {
    for (const scheme of SCHEMES) {
      it(`fits every page of a ${size.name} (${size.width}×${size.height}) in ${scheme}, with nothing axe-core finds serious`, async () => {
        const page = await browser.newPage();
        try {
          await page.setViewportSize({ width: size.width, height: size.height });
          await page.emulateMedia({ colorScheme: scheme });
          const capabilities = ['audit:read', 'audit:export', 'webhooks:write', 'streams:write'];
          await openPortal(page, (await mintPortalLink(service, key, { capabilities })).url);
          expect(await page.evaluate(() => matchMedia('(prefers-color-scheme: dark)').matches)).to.equal(scheme === 'dark');
          const phone = size.name === 'phone';

          // The trail: cards on the phone, a table on the laptop; the filters folded away on the phone, open on the laptop.
          await noSidewaysScroll(page, 'the trail');
          expect(await page.locator('details.fold').evaluate((details) => (details as HTMLDetailsElement).open)).to.equal(!phone);
          const card = page.locator('table.events tbody tr').first();
          expect(await card.evaluate((row) => getComputedStyle(row).display)).to.equal(phone ? 'block' : 'table-row');
          const box = (await card.boundingBox())!;
          expect(box.x + box.width).to.be.at.most(size.width);
          if (phone) await page.locator('details.fold > summary').click();
          await clean(page, 'the trail with its filters open');

          // An event's detail: a dialog with a margin on every side of the window.
          await card.getByRole('button', { name: /^Details of/ }).click();
          const dialog = page.locator('dialog[open]');
          await dialog.locator('dl.fields').waitFor();
          const frame = (await dialog.boundingBox())!;
          expect(frame.x, 'left margin').to.be.at.least(8);
          expect(size.width - (frame.x + frame.width), 'right margin').to.be.at.least(8);
          expect(frame.y, 'top margin').to.be.at.least(8);
          expect(size.height - (frame.y + frame.height), 'bottom margin').to.be.at.least(8);
          await clean(page, "an event's detail");
          await page.keyboard.press('Escape');

          // Webhooks, and an endpoint's delivery log.
          await page.getByRole('button', { name: 'Webhooks' }).click();
          await page.locator('table.endpoints tbody tr [data-testid="health"]').first().waitFor();
          await page.locator('table.operational-events tbody tr').first().waitFor();
          await clean(page, 'the webhooks and the operational events');
          await page.getByRole('button', { name: 'Settings' }).first().click();
          await page.locator('dialog[open] form.settings').waitFor();
          await clean(page, "an endpoint's settings");
          await page.keyboard.press('Escape');
          await page.getByRole('button', { name: 'Deliveries' }).first().click();
          await page
            .locator('dialog[open]')
            .getByRole('heading', { name: /^Deliveries to/ })
            .waitFor();
          await clean(page, 'a delivery log');
          await page.keyboard.press('Escape');

          // Log streams, with the form of a new one.
          await page.getByRole('button', { name: 'Log streams' }).click();
          await page.locator('table.streams tbody tr').waitFor();
          await clean(page, 'the log streams');

          // The page of a link opened a second time.
          const { url } = await mintPortalLink(service, key);
          const first = await browser.newPage();
          await first.goto(url);
          await first.locator('table.events tbody tr').first().waitFor();
          const again = await browser.newPage();
          await again.setViewportSize({ width: size.width, height: size.height });
          await again.emulateMedia({ colorScheme: scheme });
          await again.goto(url);
          await again.getByRole('heading', { name: 'This link has already been used' }).waitFor();
          await clean(again, 'a used link');
          await first.close();
          await again.close();
        } finally {
          await page.close();
        }
      });
    }
  }
});
