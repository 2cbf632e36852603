/// <reference lib="dom" />
// page.evaluate callbacks run in the browser.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { portalContentSecurityPolicy } from '../../src/http/portalPages.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { launchBrowser, type TestBrowser } from '../support/browser.ts';
import { mintPortalLink, startPortalService } from '../support/portal.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

/**
 * Embedding the portal (docs/portal.md "Embedding"): PORTAL_FRAME_ANCESTORS names the consoles that may
 * frame it, and its strict CSP (no inline script, nothing from another origin) is what browsers enforce.
 * The consoles here are pages of a loopback server; `localhost` and `127.0.0.1` are two different sites to
 * a browser, so the allowed console frames the portal across sites, as a platform on another domain would.
 */
describe('customer portal: embedding and its Content-Security-Policy, in a real browser', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let browser: TestBrowser;
  let consoleServer: Server;
  let consolePort: number;
  let backendKey: string;

  before(async () => {
    db = await createTestDatabase();
    await seedEvents(db.url, [newEvent({ tenantId: 'clinic-a', action: 'phi.read' })]);
    consoleServer = createServer((request, response) => {
      const src = new URL(request.url!, 'http://console').searchParams.get('src') ?? '';
      response.writeHead(200, { 'content-type': 'text/html' });
      response.end(`<!doctype html><title>Console</title><iframe title="Audit trail" src="${src.replace(/"/g, '&quot;')}"></iframe>`);
    });
    await new Promise<void>((resolve) => consoleServer.listen(0, '127.0.0.1', resolve));
    consolePort = (consoleServer.address() as AddressInfo).port;
    service = await startPortalService(db.url, { roles: ['api'], env: { PORTAL_FRAME_ANCESTORS: `http://localhost:${consolePort}` } });
    backendKey = (await mintKey(db.url, { tenantId: 'clinic-a', scopes: ['audit:read', 'portal:sessions'] })).key;
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
    await new Promise((resolve) => consoleServer?.close(resolve));
    await db?.drop();
  });

  it('serves the portal with the strict policy, its frame-ancestors from PORTAL_FRAME_ANCESTORS', async () => {
    const response = await call(`${new URL(service.baseUrl).origin}/portal/`);
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-security-policy')).to.equal(
      `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors http://localhost:${consolePort}`,
    );
    expect(response.headers.get('x-frame-options')).to.equal(null);
    expect(response.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(response.headers.get('referrer-policy')).to.equal('no-referrer');
    // Every script of the page is a file of our own origin: no inline code for the policy to allow.
    expect(response.text).not.to.match(/<script(?![^>]*\bsrc=)/);
    expect(response.text).not.to.match(/\sstyle=|\son\w+=/);
  });

  it('lets no site frame it by default', async () => {
    expect(portalContentSecurityPolicy([])).to.match(/; frame-ancestors 'none'$/);
    const plain = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    try {
      const response = await call(`${new URL(plain.baseUrl).origin}/portal/`);
      expect(response.headers.get('content-security-policy')).to.match(/; frame-ancestors 'none'$/);
      expect(response.headers.get('x-frame-options')).to.equal('DENY');
    } finally {
      await plain.stop();
    }
  });

  it('works framed by an allowed console on another site, the session held by the page, not a cookie', async () => {
    const { url } = await mintPortalLink(service, backendKey);
    const page = await browser.newPage();
    await page.goto(`http://localhost:${consolePort}/?src=${encodeURIComponent(url)}`);
    const portal = page.frameLocator('iframe');
    await portal.locator('table.events tbody tr').first().waitFor();
    expect(await portal.locator('table.events tbody tr').count()).to.be.greaterThan(0);
    await portal.getByRole('button', { name: 'Webhooks' }).click();
    await portal.getByRole('heading', { name: 'Webhooks' }).waitFor();
    await page.close();
  });

  it('is refused by the browser in the frame of a console not listed, which never gets to use the link', async () => {
    const { url, sessionId } = await mintPortalLink(service, backendKey);
    const page = await browser.newPage();
    const refused = new Promise<void>((resolve) =>
      page.on('console', (message) => message.text().includes('frame-ancestors') && resolve()),
    );
    await page.goto(`http://127.0.0.1:${consolePort}/?src=${encodeURIComponent(url)}`);
    await refused;
    expect(await page.frameLocator('iframe').locator('#portal').count()).to.equal(0);
    // The link was never exchanged: it still opens the portal, once, where it is allowed.
    const direct = await browser.newPage();
    await direct.goto(url);
    await direct.locator('table.events tbody tr').first().waitFor();
    const trail = await call(`${service.baseUrl}/audit/events?action=admin.portal_session.create`, { key: backendKey });
    expect(trail.json.events.map((event: { resource_id: string }) => event.resource_id)).to.include(sessionId);
    await page.close();
    await direct.close();
  });

  it('runs no inline script, even one the page itself were tricked into adding', async () => {
    const { url } = await mintPortalLink(service, backendKey);
    const page = await browser.newPage();
    await page.goto(url);
    await page.locator('table.events tbody tr').first().waitFor();
    const outcome = await page.evaluate(
      () =>
        new Promise<{ ran: boolean; violated: string }>((resolve) => {
          document.addEventListener('securitypolicyviolation', (event) =>
            resolve({ ran: (window as unknown as { injected?: boolean }).injected === true, violated: event.violatedDirective }),
          );
          const script = document.createElement('script');
          script.textContent = 'window.injected = true';
          document.body.append(script);
        }),
    );
    expect(outcome).to.deep.equal({ ran: false, violated: 'script-src-elem' });
    await page.close();
  });
});
