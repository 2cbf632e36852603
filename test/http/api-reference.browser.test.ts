/// <reference lib="dom" />
// page.evaluate and init scripts run in the browser.
import { expect } from 'chai';
import { API_REFERENCE_CSP } from '../../src/http/apiReferencePages.ts';
import { launchBrowser, type TestBrowser } from '../support/browser.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { call, startTestService, type TestService } from '../support/service.ts';

/** The API reference page (docs/api.md "Reference"): Swagger UI from the service's own files, under a strict CSP. */
describe('API reference page at /api/v2/public/docs/', function () {
  this.timeout(60_000);
  let db: TestDatabase;
  let service: TestService;
  let browser: TestBrowser;
  let origin: string;

  before(async () => {
    db = await createTestDatabase();
    service = await startTestService({ databaseUrl: db.url, roles: ['api'] });
    origin = new URL(service.baseUrl).origin;
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
    await db?.drop();
  });

  it('serves the page and every file it names from this origin, each with the strict policy and no inline code', async () => {
    const bare = await fetch(`${service.baseUrl}/docs`, { redirect: 'manual' });
    expect(bare.status).to.equal(308);
    expect(bare.headers.get('location')).to.equal('/api/v2/public/docs/');
    const page = await call(`${service.baseUrl}/docs/`);
    expect(page.status).to.equal(200);
    expect(page.headers.get('content-type')).to.equal('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).to.equal(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(API_REFERENCE_CSP).to.equal(page.headers.get('content-security-policy'));
    expect(page.headers.get('x-frame-options')).to.equal('DENY');
    expect(page.text).not.to.match(/<script(?![^>]*\bsrc=)/);
    expect(page.text).not.to.match(/\sstyle=|\son\w+=|<style/);
    const files = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
    expect(files.length).to.equal(4);
    for (const file of files) {
      expect(file, 'a file of the page itself').to.match(/^\.\/[\w-]+\.(js|css)$/);
      const asset = await call(new URL(file, `${service.baseUrl}/docs/`).toString());
      expect(asset.status, file).to.equal(200);
      expect(asset.headers.get('content-type'), file).to.match(file.endsWith('.js') ? /^text\/javascript/ : /^text\/css/);
      expect(asset.headers.get('cache-control'), file).to.equal('public, max-age=31536000, immutable');
      expect(asset.headers.get('content-security-policy'), file).to.equal(API_REFERENCE_CSP);
    }
    expect((await call(`${service.baseUrl}/docs/nothing.js`)).status).to.equal(404);
  });

  it('renders every operation of the served OpenAPI document in Chromium, with no request to another origin and no CSP violation', async () => {
    type Operations = Record<string, Record<string, unknown>>;
    const openapi = (await call(`${service.baseUrl}/openapi.json`)).json as { paths: Operations; webhooks: Operations };
    // The paths, and the webhooks the service sends (listed by their names).
    const operations = [...Object.entries(openapi.paths), ...Object.entries(openapi.webhooks)].flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    const page = await browser.newPage();
    const requested: string[] = [];
    const consoleErrors: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    // Before any of the page's scripts: every violation the browser reports, whatever causes it.
    await page.addInitScript(() => {
      const seen: string[] = [];
      (window as unknown as { violations: string[] }).violations = seen;
      document.addEventListener('securitypolicyviolation', (event) => seen.push(`${event.violatedDirective} ${event.blockedURI}`));
    });
    await page.goto(`${service.baseUrl}/docs/`);
    await page.locator('.opblock').first().waitFor();
    await page.getByText('Audit Trail API').first().waitFor();
    const rendered = await page.locator('.opblock-summary').evaluateAll((summaries) =>
      summaries.map((summary) => {
        const method = summary.querySelector('.opblock-summary-method')?.textContent?.trim() ?? '';
        const path = summary.querySelector('.opblock-summary-path')?.getAttribute('data-path') ?? '';
        return `${method} ${path}`;
      }),
    );
    expect([...rendered].sort()).to.deep.equal([...operations].sort());
    expect(rendered).to.include('GET /audit/events/live');
    // Opening an operation shows its parameters, read from the document.
    await page.locator('.opblock-summary', { hasText: '/audit/events/live' }).first().click();
    await page.locator('.parameters-container').getByText('Last-Event-ID').waitFor();
    expect(await page.evaluate(() => (window as unknown as { violations: string[] }).violations)).to.deep.equal([]);
    expect(consoleErrors.filter((text) => /Content Security Policy/i.test(text))).to.deep.equal([]);
    expect(requested.length).to.be.greaterThan(4);
    expect(requested.filter((url) => new URL(url).origin !== origin)).to.deep.equal([]);
    expect(requested).to.include(`${service.baseUrl}/openapi.json`);
    await page.close();
  });
});
