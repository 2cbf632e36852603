import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/**
 * Debian's Chromium (installed by scripts/services.sh), driven by playwright-core, with a fresh profile per
 * browser. The flags keep it from reaching out on its own (updates, sync, QUIC probes): this machine's
 * network is closed, and a test must depend on nothing but the service it tests.
 */
const CHROMIUM = '/usr/bin/chromium';
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  readonly context: BrowserContext;
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'audit-trail-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 900 },
    // Times on the page are the person's local time: fixed here, so tests and screenshots do not depend on the machine.
    timezoneId: 'UTC',
    locale: 'en-US',
    // The portal copies webhook secrets with the clipboard API; tests read back what it copied.
    permissions: ['clipboard-read', 'clipboard-write'],
    acceptDownloads: true,
  });
  return {
    context,
    newPage: () => context.newPage(),
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[] }>;
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * axe-core's serious and critical findings on the page as it is now. The page's CSP forbids inline and
 * foreign scripts, so axe is injected through the DevTools protocol, which CSP does not govern.
 */
export async function accessibilityViolations(page: Page): Promise<AxeViolation[]> {
  const session = await page.context().newCDPSession(page);
  try {
    await session.send('Runtime.evaluate', { expression: axeSource });
    const { result } = await session.send('Runtime.evaluate', {
      expression: `axe.run(document, { resultTypes: ['violations'] }).then((r) => JSON.stringify(r.violations))`,
      awaitPromise: true,
      returnByValue: true,
    });
    const violations = JSON.parse(result.value as string) as AxeViolation[];
    return violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
  } finally {
    await session.detach();
  }
}
