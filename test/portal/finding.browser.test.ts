/// <reference lib="dom" />
// page.evaluate and waitForFunction callbacks run in the browser.
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { launchBrowser, type TestBrowser } from '../support/browser.ts';
import { mintPortalLink, openPortal, startPortalService } from '../support/portal.ts';
import { call, mintKey, type TestService } from '../support/service.ts';

/**
 * Finding an event in the portal as a person does (docs/portal.md "Finding an event"): the search box, the
 * tenant's actions and families to pick from, time range shortcuts, the active filters as chips, the count,
 * copy buttons, and times that read the same in the list and the detail.
 */
describe('customer portal: finding an event, in a real browser', function () {
  this.timeout(90_000);
  let db: TestDatabase;
  let service: TestService;
  let browser: TestBrowser;
  let key: string;
  let page: Page;
  const HOUR = 3_600_000;
  const now = Date.now();
  // Recent events the shortcuts select, and older ones they leave out.
  const recent = [
    newEvent({ tenantId: 'clinic-f', occurredAtMs: now - 2 * HOUR, action: 'phi.read', userId: 'dr-house', resourceId: 'patient-7' }),
    newEvent({ tenantId: 'clinic-f', occurredAtMs: now - 3 * HOUR, action: 'phi.export', userId: 'nurse-jackie', resourceId: 'patient-8' }),
    newEvent({ tenantId: 'clinic-f', occurredAtMs: now - 4 * HOUR, action: 'admin.user.update', userId: 'admin-1', resourceId: 'user-3' }),
  ];
  const older = [
    newEvent({ tenantId: 'clinic-f', occurredAtMs: now - 50 * HOUR, action: 'phi.read', userId: 'Dr-House', resourceId: 'patient-9' }),
    newEvent({ tenantId: 'clinic-f', occurredAtMs: now - 60 * HOUR, action: 'auth.login', userId: 'dr-house', resourceId: 'session-1' }),
  ];
  // A search's first walk (5,000 events) finds nothing among these; the portal walks on and fills its page.
  const needle = newEvent({
    tenantId: 'clinic-f',
    occurredAtMs: now - 100 * HOUR,
    action: 'phi.read',
    userId: 'locum-zhivago',
    resourceId: 'patient-1',
  });
  const haystack = Array.from({ length: 5_100 }, (_, index) =>
    newEvent({
      tenantId: 'clinic-f',
      occurredAtMs: now - 90 * HOUR + index,
      action: 'phi.query',
      userId: 'batch',
      resourceId: `claim-${index}`,
    }),
  );

  const rows = () => page.locator('table.events tbody tr');
  const rowIds = () => rows().evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-event-id')));
  /** Waits for the list to show exactly these events. */
  async function showing(ids: string[]): Promise<void> {
    await page.waitForFunction(
      (expected) =>
        document.querySelector('table.events[aria-busy="false"], p.empty') !== null &&
        JSON.stringify([...document.querySelectorAll('table.events tbody tr')].map((tr) => tr.getAttribute('data-event-id'))) === expected,
      JSON.stringify(ids),
    );
  }
  const chips = () => page.locator('ul.chips li.chip span').allTextContents();

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, [...recent, ...older, needle, ...haystack]);
    service = await startPortalService(db.url, { roles: ['api'] });
    key = (await mintKey(db.url, { tenantId: 'clinic-f', scopes: ['audit:read', 'audit:export', 'portal:sessions'] })).key;
    browser = await launchBrowser();
    page = await browser.newPage();
    await openPortal(page, (await mintPortalLink(service, key, { capabilities: ['audit:read', 'audit:export'] })).url);
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
    await db?.drop();
  });

  it('searches ids, actions, users and resources in any case, saying what it found, and clears from its chip', async () => {
    await page.getByRole('searchbox', { name: 'Search the trail' }).fill('HOUSE');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await showing([recent[0]!.eventId, older[0]!.eventId, older[1]!.eventId]);
    expect(await page.getByTestId('result-count').textContent()).to.equal('3 found');
    expect(await chips()).to.deep.equal(['Search: HOUSE']);
    // An export takes filters, not a search: the buttons say so rather than export something else.
    expect(await page.getByRole('button', { name: 'Download CSV' }).isDisabled()).to.equal(true);
    await page.getByRole('button', { name: 'Remove Search: HOUSE' }).click();
    await rows().nth(6).waitFor();
    expect(await chips()).to.deep.equal([]);
    expect(await page.getByRole('searchbox', { name: 'Search the trail' }).inputValue()).to.equal('');
  });

  it('walks on past the first 5,000 events a search examines, to find one older than them', async () => {
    await page.getByRole('searchbox', { name: 'Search the trail' }).fill('zhivago');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await showing([needle.eventId]);
    await page.getByRole('button', { name: 'Clear all' }).click();
    await rows().nth(6).waitFor();
  });

  it("offers the tenant's actions and their families, and a family typed with a dot is matched as webhook filters are", async () => {
    const offered = await page
      .locator('#trail-actions option')
      .evaluateAll((options) => options.map((option) => (option as HTMLOptionElement).value));
    expect(offered).to.include.members(['phi.', 'admin.', 'admin.user.', 'phi.read', 'phi.export', 'auth.login', 'admin.user.update']);
    await page.getByLabel(/^Action/).fill('phi.');
    await page.getByLabel('User id').fill('dr-house');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await showing([recent[0]!.eventId]);
    expect(await chips()).to.deep.equal(['Actions starting: phi.', 'User id: dr-house']);
    expect(await page.getByTestId('result-count').textContent()).to.equal('1 event');
    // One chip goes, the other stays, and the form follows.
    await page.getByRole('button', { name: 'Remove User id: dr-house' }).click();
    await rows().nth(49).waitFor();
    expect((await rowIds()).slice(0, 3)).to.deep.equal([recent[0]!.eventId, recent[1]!.eventId, older[0]!.eventId]);
    const actions = await rows().locator('td:nth-child(2)').allTextContents();
    expect(actions.filter((action) => !action.startsWith('phi.'))).to.deep.equal([]);
    expect(await page.getByLabel('User id').inputValue()).to.equal('');
    expect(await page.getByLabel(/^Action/).inputValue()).to.equal('phi.');
    await page.getByRole('button', { name: 'Clear all' }).click();
  });

  it('narrows to the last 24 hours with a shortcut, and counts what the filters match', async () => {
    await page.getByRole('button', { name: 'Last 24 hours' }).click();
    await page.locator('ul.chips').waitFor();
    const [since] = await chips();
    expect(since).to.match(/^From \w{3} \d{1,2}, \d{4}, \d{2}:\d{2}:\d{2} UTC$/);
    await page.getByTestId('result-count').waitFor();
    // The seeded events of the last day, and what the service wrote since (the key's minting, the portal's sessions).
    const { json } = await call(`${service.baseUrl}/audit/events?since=${encodeURIComponent(new Date(now - 24 * HOUR).toISOString())}`, {
      key,
    });
    const lastDay = json.events.map((event: { event_id: string }) => event.event_id);
    expect(lastDay).to.include.members(recent.map((event) => event.eventId));
    await showing(lastDay);
    expect(await page.getByTestId('result-count').textContent()).to.equal(`${lastDay.length} events`);
    await page.getByRole('button', { name: 'Clear all' }).click();
    await rows().nth(6).waitFor();
  });

  it('copies an event id from the list, and shows its time the same way in the list and in its detail', async () => {
    const row = page.locator(`tr[data-event-id="${recent[1]!.eventId}"]`);
    await row.getByRole('button', { name: /^Copy id of phi\.export/ }).click();
    await row.getByText('Copied.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).to.equal(recent[1]!.eventId);
    const listed = await row.locator('time').textContent();
    expect(listed).to.match(/ UTC$/);
    await row.getByRole('button', { name: /^Details of/ }).click();
    const dialog = page.locator('dialog[open]');
    expect(await dialog.locator('dl.fields dd time').textContent()).to.equal(listed);
    await dialog.getByRole('button', { name: 'Copy user_id' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).to.equal('nurse-jackie');
    await page.keyboard.press('Escape');
  });
});
