import { expect } from 'chai';
import type { Page } from 'playwright-core';
import type { Role } from '../../src/main.ts';
import { sealKeyPair } from './integrity.ts';
import { freePort } from './ports.ts';
import { TEST_INGEST_TOKEN, call, startTestService, type TestService } from './service.ts';

/** The service for the portal's browser tests: on a port known up front, so PUBLIC_BASE_URL names it. */
export async function startPortalService(
  databaseUrl: string,
  options: { roles?: Role[]; env?: Record<string, string> } = {},
): Promise<TestService & { origin: string }> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const service = await startTestService({
    databaseUrl,
    roles: options.roles ?? ['api', 'ingest', 'relay', 'worker', 'sealer'],
    env: {
      PORT: String(port),
      PUBLIC_BASE_URL: origin,
      SEAL_SIGNING_KEY: sealKeyPair().privatePem,
      SEAL_INTERVAL: '200ms',
      WEBHOOK_ALLOW_HTTP: 'true',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      DELIVERY_SCHEDULE: '1h',
      DELIVERY_TIMEOUT_MS: '2000',
      DELIVERY_RELAY_POLL_MS: '100',
      ...options.env,
    },
  });
  return Object.assign(service, { origin });
}

/** What a platform's backend does: mint a session for its tenant and hand the link to a browser. */
export async function mintPortalLink(
  service: TestService,
  key: string,
  body: { ttl_s?: number; capabilities?: string[] } = {},
): Promise<{ url: string; sessionId: string }> {
  const response = await call(`${service.baseUrl}/portal/sessions`, { key, method: 'POST', body });
  expect(response.status, response.text).to.equal(201);
  return { url: response.json.url, sessionId: response.json.session.id };
}

/** Opens a link and waits until the trail's first page is on screen. */
export async function openPortal(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await page.locator('table.events tbody tr').first().waitFor();
}

/** Writes events through the ingest role's HTTP input, as a producer does; returns their ids. */
export async function ingest(service: TestService, events: Array<Record<string, unknown>>): Promise<string[]> {
  const response = await call(`${service.internalUrl}/internal/v1/events`, {
    headers: { authorization: `Bearer ${TEST_INGEST_TOKEN}` },
    body: { events },
  });
  expect(response.status, response.text).to.be.lessThan(300);
  return response.json.events.map((result: { event_id: string }) => result.event_id);
}
