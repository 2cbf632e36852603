/// <reference lib="dom" />
// page.evaluate and waitForFunction callbacks run in the browser.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import type { Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { accessibilityViolations, launchBrowser, type TestBrowser } from '../support/browser.ts';
import { mintPortalLink, openPortal, startPortalService } from '../support/portal.ts';
import { call, mintKey, type TestService } from '../support/service.ts';

/**
 * The customer portal's trail, in Debian's Chromium against the real service (docs/portal.md): a link a
 * backend minted opens it once; the tenant's events newest first, filtered and paged; an event's every
 * field; its verification in the browser; the export; and what a session cannot do.
 */
describe('customer portal: the trail, in a real browser', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let browser: TestBrowser;
  let backendKey: string;
  let readOnlyBackendKey: string;
  let otherTenantEventId: string;
  const T0 = Date.parse('2026-03-02T09:00:00.000Z');
  const MINUTE = 60_000;
  const hostile = {
    userId: '<img src=x onerror="document.title=\'pwned\'">',
    resourceId: "<script>document.title='pwned'</script>",
    details: JSON.stringify({ note: '<b onmouseover="document.title=\'pwned\'">bold</b>' }),
    justification: '=HYPERLINK("https://evil.example","click")',
  };
  // 55 PHI reads of patient records, 5 admin changes, one hostile read: 56 phi.read events in all.
  const reads = Array.from({ length: 55 }, (_, index) =>
    newEvent({
      tenantId: 'clinic-a',
      occurredAtMs: T0 + index * MINUTE,
      action: 'phi.read',
      resourceType: 'patient_record',
      resourceId: `patient-${index}`,
    }),
  );
  const adminChanges = Array.from({ length: 5 }, (_, index) =>
    newEvent({
      tenantId: 'clinic-a',
      occurredAtMs: T0 + (100 + index) * MINUTE,
      action: 'admin.user.update',
      resourceType: 'user',
      resourceId: `user-${index}`,
      phiInvolved: false,
      fieldsAccessed: '',
    }),
  );
  const hostileEvent = newEvent({ tenantId: 'clinic-a', occurredAtMs: T0 + 200 * MINUTE, action: 'phi.read', ...hostile });
  // Patient 7's chart, opened by two more people: the question the portal exists to answer.
  const chartViews = ['dr-house', 'nurse-jackie'].map((userId, index) =>
    newEvent({
      tenantId: 'clinic-a',
      occurredAtMs: T0 + (300 + index) * MINUTE,
      action: 'phi.view',
      userId,
      resourceType: 'chart',
      resourceId: 'patient-7',
    }),
  );

  const rows = (page: Page) => page.locator('table.events tbody tr');
  const rowIds = (page: Page) => rows(page).evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-event-id')));
  async function applyFilters(page: Page, fields: Record<string, string>): Promise<void> {
    for (const [name, value] of Object.entries(fields)) {
      const field = page.locator(`form.filters [name="${name}"]`);
      if ((await field.evaluate((element) => element.tagName)) === 'SELECT') await field.selectOption(value);
      else await field.fill(value);
    }
    const before = await rowIds(page);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForFunction((previous) => {
      const ids = [...document.querySelectorAll('table.events tbody tr')].map((tr) => tr.getAttribute('data-event-id'));
      return document.querySelector('table.events[aria-busy="false"], p.empty') !== null && JSON.stringify(ids) !== previous;
    }, JSON.stringify(before));
  }

  before(async () => {
    db = await createTestDatabase();
    const otherTenant = newEvent({ tenantId: 'clinic-b', occurredAtMs: T0, action: 'phi.read' });
    otherTenantEventId = otherTenant.eventId;
    await seedEvents(db.url, [...reads, ...adminChanges, hostileEvent, ...chartViews, otherTenant]);
    service = await startPortalService(db.url);
    backendKey = (await mintKey(db.url, { tenantId: 'clinic-a', scopes: ['audit:read', 'audit:export', 'portal:sessions'] })).key;
    readOnlyBackendKey = (await mintKey(db.url, { tenantId: 'clinic-a', scopes: ['audit:read', 'portal:sessions'] })).key;
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
    await db?.drop();
  });

  describe('opening a link', () => {
    it("shows the tenant's newest events first, and takes the token out of the address and off every request", async () => {
      const { url } = await mintPortalLink(service, backendKey);
      const token = new URL(url).hash.slice('#link='.length);
      const page = await browser.newPage();
      const requested: string[] = [];
      page.on('request', (request) => requested.push(`${request.url()} ${request.headers().referer ?? ''}`));
      await openPortal(page, url);
      expect(page.url()).to.equal(`${new URL(url).origin}/portal/`);
      const { json } = await call(`${service.baseUrl}/audit/events?limit=50`, { key: backendKey });
      expect(await rowIds(page)).to.deep.equal(json.events.map((event: { event_id: string }) => event.event_id));
      expect(await page.getByText('Tenant clinic-a').count()).to.equal(1);
      expect(await page.getByText('Opening your audit trail').count()).to.equal(0);
      expect(requested.length).to.be.greaterThan(3);
      for (const line of requested) expect(line).not.to.include(token.slice(-64));
      await page.close();
    });

    it('refuses a second open of the same link with a clear page', async () => {
      const { url } = await mintPortalLink(service, backendKey);
      const first = await browser.newPage();
      await openPortal(first, url);
      const second = await browser.newPage();
      await second.goto(url);
      await second.getByRole('heading', { name: 'This link has already been used' }).waitFor();
      expect(await second.getByText('Each portal link opens the portal once').count()).to.equal(1);
      expect(await second.locator('table.events').count()).to.equal(0);
      expect(await accessibilityViolations(second)).to.deep.equal([]);
      await first.close();
      await second.close();
    });

    it('resumes after a reload with its cookie', async () => {
      const { url } = await mintPortalLink(service, backendKey);
      const page = await browser.newPage();
      await openPortal(page, url);
      await page.reload();
      await rows(page).first().waitFor();
      expect(await rows(page).count()).to.equal(50);
      await page.close();
    });

    it('refuses an expired session, at its link and in an open page', async () => {
      const unopened = await mintPortalLink(service, backendKey, { ttl_s: 60 });
      const opened = await mintPortalLink(service, backendKey, { ttl_s: 60 });
      const page = await browser.newPage();
      await openPortal(page, opened.url);
      await expire(unopened.sessionId);
      await expire(opened.sessionId);
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.getByRole('heading', { name: 'This session has ended' }).waitFor();
      const late = await browser.newPage();
      await late.goto(unopened.url);
      await late.getByRole('heading', { name: 'This session has expired' }).waitFor();
      await page.close();
      await late.close();
    });

    it('refuses a session its backend ended, from the next click on', async () => {
      const { url, sessionId } = await mintPortalLink(service, backendKey);
      const page = await browser.newPage();
      await openPortal(page, url);
      const ended = await call(`${service.baseUrl}/portal/sessions/${sessionId}`, { key: backendKey, method: 'DELETE' });
      expect(ended.status).to.equal(204);
      await page.getByRole('button', { name: 'Older' }).click();
      await page.getByRole('heading', { name: 'This session has ended' }).waitFor();
      await page.reload();
      await page.getByRole('heading', { name: 'This session has ended' }).waitFor();
      await page.close();
    });

    it('signs out: the session ends and a reload does not bring it back', async () => {
      const { url, sessionId } = await mintPortalLink(service, backendKey);
      const page = await browser.newPage();
      await openPortal(page, url);
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { name: 'Signed out' }).waitFor();
      const trail = await call(`${service.baseUrl}/audit/events?action=admin.portal_session.end`, { key: backendKey });
      expect(trail.json.events.map((event: { resource_id: string }) => event.resource_id)).to.include(sessionId);
      await page.reload();
      await page.getByRole('heading', { name: 'This session has ended' }).waitFor();
      await page.close();
    });
  });

  describe('the list', () => {
    let page: Page;
    before(async () => {
      page = await browser.newPage();
      await openPortal(page, (await mintPortalLink(service, backendKey)).url);
    });
    after(() => page.close());

    it('filters by exact action', async () => {
      await applyFilters(page, { action: 'admin.user.update' });
      expect(await rowIds(page)).to.deep.equal([...adminChanges].reverse().map((event) => event.eventId));
    });

    it('filters by resource type, PHI and time range, and pages through the result both ways', async () => {
      await applyFilters(page, { action: '', resource_type: 'patient_record', phi_involved: 'true', since: '', until: '' });
      const firstPage = await rowIds(page);
      expect(firstPage).to.deep.equal(
        [...reads]
          .reverse()
          .slice(0, 50)
          .map((event) => event.eventId),
      );
      await page.getByRole('button', { name: 'Older' }).click();
      await page.getByText('Page 2').waitFor();
      await page.waitForFunction(() => document.querySelectorAll('table.events tbody tr').length === 5);
      expect(await rowIds(page)).to.deep.equal(
        [...reads]
          .reverse()
          .slice(50)
          .map((event) => event.eventId),
      );
      expect(await page.getByRole('button', { name: 'Older' }).isDisabled()).to.equal(true);
      await page.getByRole('button', { name: 'Newer' }).click();
      await page.getByText('Page 1').waitFor();
      await page.waitForFunction(() => document.querySelectorAll('table.events tbody tr').length === 50);
      expect(await rowIds(page)).to.deep.equal(firstPage);

      // From 09:10:00 (inclusive) until 09:20:00 (exclusive): events 10 to 19.
      await applyFilters(page, { since: '2026-03-02T09:10:00', until: '2026-03-02T09:20:00' });
      expect(await rowIds(page)).to.deep.equal(
        reads
          .slice(10, 20)
          .reverse()
          .map((event) => event.eventId),
      );
      await applyFilters(page, { phi_involved: 'false', resource_type: '', since: '', until: '2026-03-03T00:00:00' });
      expect(await rowIds(page)).to.deep.equal([...adminChanges].reverse().map((event) => event.eventId));
    });

    it("answers who opened this patient's record, and what one user did", async () => {
      await applyFilters(page, { action: '', resource_type: '', phi_involved: '', since: '', until: '', resource_id: 'patient-7' });
      expect(await rowIds(page)).to.deep.equal([chartViews[1]!.eventId, chartViews[0]!.eventId, reads[7]!.eventId]);
      expect(await rows(page).locator('td:nth-child(3)').allTextContents()).to.deep.equal([
        'nurse-jackie (clinician)',
        'dr-house (clinician)',
        'user-1 (clinician)',
      ]);
      await applyFilters(page, { resource_id: '', user_id: 'dr-house' });
      expect(await rowIds(page)).to.deep.equal([chartViews[0]!.eventId]);
      await applyFilters(page, { user_id: '' });
    });

    it('says what is wrong with a filter the service refuses', async () => {
      await page.getByLabel(/^Action/).fill('Not An Action');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await page.getByRole('alert').filter({ hasText: 'action: must be a dotted lowercase action' }).waitFor();
      await page.getByLabel(/^Action/).fill('');
    });
  });

  describe('an event', () => {
    let page: Page;
    before(async () => {
      page = await browser.newPage();
      await openPortal(page, (await mintPortalLink(service, backendKey)).url);
    });
    after(() => page.close());
    afterEach(async () => {
      if (await page.locator('dialog[open]').count()) await page.keyboard.press('Escape');
    });

    async function openEvent(id: string): Promise<void> {
      await page.getByLabel('Event id').fill(id);
      await page.getByRole('button', { name: 'Open event' }).click();
      await page.locator('dialog[open]').waitFor();
    }

    it('shows every field, as text', async () => {
      const event = reads[7]!;
      await openEvent(event.eventId);
      const fields = await page.locator('dialog[open] dl.fields dt').allTextContents();
      expect(fields).to.deep.equal([
        'event_id',
        'timestamp',
        'action',
        'user_id',
        'user_role',
        'resource_type',
        'resource_id',
        'fields_accessed',
        'phi_involved',
        'tenant_id',
        'source_ip',
        'user_agent',
        'justification',
        'success',
        'details',
      ]);
      const values = page.locator('dialog[open] dl.fields dd');
      expect(await values.nth(0).locator('pre').textContent()).to.equal(event.eventId);
      // The time as the list shows it, in the person's zone and named, then exactly as stored.
      expect(await values.nth(1).locator('time').textContent()).to.equal('Mar 2, 2026, 09:07:00 UTC');
      expect(await values.nth(1).textContent()).to.include('2026-03-02T09:07:00.000Z as stored');
      expect(await values.nth(6).locator('pre').textContent()).to.equal('patient-7');
      expect(await values.nth(7).locator('pre').textContent()).to.equal('[\n  "diagnosis"\n]');
    });

    it('verifies the event in the browser against the signed tree head and the published key', async () => {
      await openEvent(reads[3]!.eventId);
      await page.getByRole('button', { name: 'Verify this event' }).click();
      const report = page.getByTestId('verification');
      await report.getByRole('heading', { name: 'Verified in this browser' }).waitFor();
      const checks = await report.locator('li').allTextContents();
      expect(checks.map((check) => check.split(':')[0])).to.deep.equal([
        '✓ Event hash',
        '✓ Inclusion',
        '✓ Tenant',
        '✓ Tree head signature',
        '✓ Key validity',
      ]);
      expect(await accessibilityViolations(page)).to.deep.equal([]);
    });

    it('refuses to verify when the proof does not lead to the signed root', async () => {
      await page.route('**/proof?*', async (route) => {
        const response = await route.fetch();
        const proof = await response.json();
        proof.audit_path[0] = proof.audit_path[0].replace(/^./, (digit: string) => (digit === '0' ? '1' : '0'));
        await route.fulfill({ response, json: proof });
      });
      try {
        await openEvent(reads[4]!.eventId);
        await page.getByRole('button', { name: 'Verify this event' }).click();
        const report = page.getByTestId('verification');
        await report.getByRole('heading', { name: 'Not verified' }).waitFor();
        expect(await report.locator('li.bad').allTextContents()).to.deep.equal([
          "✗ Inclusion: The audit path does not lead to the tree head's root.",
        ]);
      } finally {
        await page.unroute('**/proof?*');
      }
    });

    it("shows another tenant's event id as not found", async () => {
      await openEvent(otherTenantEventId);
      await page.locator('dialog[open]').getByText('No such event in this trail.').waitFor();
      expect(await page.locator('dialog[open] dl.fields').count()).to.equal(0);
    });

    it('renders an event whose fields hold HTML and script as characters, running nothing', async () => {
      const title = await page.title();
      await applyFilters(page, { action: 'phi.read' });
      const row = page.locator(`tr[data-event-id="${hostileEvent.eventId}"]`);
      expect(await row.locator('td').nth(2).textContent()).to.equal(`${hostile.userId} (clinician)`);
      expect(await row.locator('td').nth(3).textContent()).to.equal(`claim ${hostile.resourceId}`);
      await openEvent(hostileEvent.eventId);
      const dialog = page.locator('dialog[open]');
      await dialog.getByText(hostile.resourceId, { exact: true }).waitFor();
      await dialog.getByText('<b onmouseover', { exact: false }).hover();
      expect(await page.locator('table.events img, dialog img, table.events b, dialog b, script:not([src])').count()).to.equal(0);
      expect(await page.title()).to.equal(title);
    });

    it('is usable from the keyboard: a row opens with Enter, Escape closes it and focus comes back', async () => {
      await applyFilters(page, { action: 'admin.user.update' });
      const details = page.getByRole('button', { name: /^Details of admin\.user\.update/ }).first();
      await details.focus();
      await page.keyboard.press('Enter');
      await page.locator('dialog[open]').waitFor();
      expect(await page.evaluate(() => document.activeElement?.closest('dialog') !== null)).to.equal(true);
      await page.keyboard.press('Escape');
      await page.locator('dialog[open]').waitFor({ state: 'detached' });
      // Focus returns once the dialog's close has been handled, which can be a task after it is detached: waited
      // for (failing after the timeout if it never comes back), then checked.
      await page
        .waitForFunction(
          () => /^Details of admin\.user\.update/.test(document.activeElement?.getAttribute('aria-label') ?? ''),
          undefined,
          {
            timeout: 5_000,
          },
        )
        .catch(() => undefined);
      expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).to.match(/^Details of admin\.user\.update/);
      await page.getByRole('button', { name: 'Trail' }).focus();
      await page.keyboard.press('Tab');
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
      await page.getByRole('button', { name: 'Trail' }).click();
      await rows(page).first().waitFor();
    });
  });

  describe('the export', () => {
    it('downloads the current filter as NDJSON and as CSV, with formula cells defused', async () => {
      const page = await browser.newPage();
      await openPortal(page, (await mintPortalLink(service, backendKey, { capabilities: ['audit:read', 'audit:export'] })).url);
      await applyFilters(page, { action: 'phi.read', since: '2026-03-02T12:00:00' });
      const [ndjson] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download NDJSON' }).click()]);
      const lines = readFileSync((await ndjson.path())!, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect(lines.map((event) => event.event_id)).to.deep.equal([hostileEvent.eventId]);
      expect(lines[0].user_id).to.equal(hostile.userId);
      await page.getByRole('status').filter({ hasText: ': 1 events.' }).waitFor();
      const [csv] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
      expect(csv.suggestedFilename()).to.match(/^audit-trail-.*\.csv$/);
      const text = readFileSync((await csv.path())!, 'utf8');
      const [header, row] = text.split('\r\n');
      expect(header).to.equal(
        'event_id,timestamp,action,user_id,user_role,resource_type,resource_id,fields_accessed,phi_involved,tenant_id,source_ip,user_agent,justification,success,details',
      );
      expect(row).to.include(`"<img src=x onerror=""document.title='pwned'"">"`);
      expect(row).to.include(`"'=HYPERLINK(""https://evil.example"",""click"")"`);
      const exports = await call(`${service.baseUrl}/audit/events?action=audit.export`, { key: backendKey });
      expect(exports.json.events[0].user_role).to.equal('portal_session');
      await page.close();
    });

    it('is absent from a session without audit:export', async () => {
      const page = await browser.newPage();
      await openPortal(page, (await mintPortalLink(service, backendKey, { capabilities: ['audit:read'] })).url);
      expect(await page.getByRole('button', { name: /^Download/ }).count()).to.equal(0);
      await page.close();
    });

    it('is absent when the minting key lacks audit:export, whatever was asked', async () => {
      const refused = await call(`${service.baseUrl}/portal/sessions`, {
        key: readOnlyBackendKey,
        method: 'POST',
        body: { capabilities: ['audit:read', 'audit:export'] },
      });
      expect(refused.status).to.equal(403);
    });
  });

  describe('budgets', () => {
    it('loads at most 100 KB of JavaScript, gzipped, for its first page, all from its own origin', async () => {
      const page = await browser.newPage();
      const scripts: Array<{ url: string; body: Buffer }> = [];
      const origins = new Set<string>();
      page.on('request', (request) => origins.add(new URL(request.url()).origin));
      page.on('response', async (response) => {
        if (response.request().resourceType() === 'script') scripts.push({ url: response.url(), body: await response.body() });
      });
      await openPortal(page, (await mintPortalLink(service, backendKey)).url);
      expect(scripts.length).to.be.greaterThan(0);
      const gzipped = scripts.reduce((total, script) => total + gzipSync(script.body, { level: 9 }).length, 0);
      expect(gzipped).to.be.at.most(100 * 1024);
      expect([...origins]).to.deep.equal([new URL(service.baseUrl).origin]);
      expect(await accessibilityViolations(page)).to.deep.equal([]);
      await page.close();
    });
  });

  // The passing of time, in this file's own database.
  async function expire(sessionId: string): Promise<void> {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(`UPDATE portal_sessions SET created_at = now() - interval '1 hour', expires_at = now() WHERE id = $1`, [
        sessionId,
      ]);
    } finally {
      await client.end();
    }
  }
});
