import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { ApiKeyService, type KeyGrants } from '../../src/auth/apiKeyService.ts';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { Database } from '../../src/db/database.ts';
import { EventWriter } from '../../src/events/eventWriter.ts';
import { startService, type Role, type RunningService } from '../../src/main.ts';
import { createLogger, type Logger } from '../../src/platform/logger.ts';
import { WEBHOOK_FAN_OUT } from '../../src/delivery/fanOut.ts';
import { removeNamespaceStreams } from './natsNamespaces.ts';

export const TEST_PEPPER = 'test-pepper-0123456789abcdef0123456789abcdef';
export const TEST_INGEST_TOKEN = 'test-ingest-token-0123456789abcdef';
export const TEST_ENCRYPTION_KEY = '0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0';

/** Test logs are silent unless TEST_LOG_LEVEL asks for them. */
export function testLogger(): Logger {
  return createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
}

/**
 * A configuration for a service on ephemeral ports against the given database. Its rate-limit budgets are
 * its own (a fresh Redis key prefix) unless overrides say otherwise: the auth-failure budget is per client
 * address, and every test, of this run and of any other on the machine, calls from 127.0.0.1.
 */
export function testConfig(databaseUrl: string, overrides: Record<string, string> = {}): Config {
  return loadConfig({
    DATABASE_URL: databaseUrl,
    RATE_LIMIT_KEY_PREFIX: `test:${randomBytes(4).toString('hex')}`,
    HOST: '127.0.0.1',
    PORT: '0',
    INTERNAL_PORT: '0',
    KEY_PEPPER: TEST_PEPPER,
    INGEST_TOKENS: TEST_INGEST_TOKEN,
    SECRET_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
    LOG_LEVEL: 'silent',
    SHUTDOWN_GRACE_MS: '2000',
    // Tests stop services constantly; the drain delay has a test of its own.
    SHUTDOWN_DRAIN_DELAY_MS: '0',
    ...overrides,
  });
}

export interface TestService {
  readonly service: RunningService;
  readonly baseUrl: string;
  readonly internalUrl: string;
  /** '' when started without one. */
  readonly busNamespace: string;
  /** One series of its /metrics, e.g. `audit_errors_total{kind="relay_failed"}`; 0 until it appears. */
  metric(series: string): Promise<number>;
  stop(): Promise<void>;
}

/**
 * Starts the real service in this process, with a JetStream namespace of its own unless one is given;
 * `busNamespace: null` leaves it to NATS_NAMESPACE (unset in tests: the production default). The streams
 * of a namespace it made up are deleted when it stops, so runs do not pile them up on the NATS.
 */
export async function startTestService(options: {
  databaseUrl: string;
  roles: Role[];
  env?: Record<string, string>;
  busNamespace?: string | null;
  log?: Logger;
  kubeConfig?: KubeConfig;
}): Promise<TestService> {
  // Made up here, so this service's to clean up.
  const ownNamespace = options.busNamespace === undefined ? `t${randomBytes(4).toString('hex')}` : undefined;
  const busNamespace = options.busNamespace === null ? undefined : (options.busNamespace ?? ownNamespace);
  const config = testConfig(options.databaseUrl, options.env);
  const service = await startService({
    config,
    roles: options.roles,
    log: options.log ?? testLogger(),
    busNamespace,
    kubeConfig: options.kubeConfig,
  });
  return {
    service,
    baseUrl: `http://127.0.0.1:${service.publicPort}/api/v2/public`,
    internalUrl: `http://127.0.0.1:${service.internalPort}`,
    busNamespace: busNamespace ?? '',
    async metric(series) {
      const { text } = await call(`http://127.0.0.1:${service.internalPort}/metrics`);
      const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
      return line === undefined ? 0 : Number(line.slice(series.length + 1));
    },
    async stop() {
      await service.stop();
      if (ownNamespace !== undefined) await removeNamespaceStreams(config.natsUrl, ownNamespace);
    },
  };
}

/** Runs fn with the operator's key service on its own short-lived pool. */
async function withKeyService<T>(
  databaseUrl: string,
  environment: 'live' | 'test',
  fn: (service: ApiKeyService) => Promise<T>,
): Promise<T> {
  const db = new Database({ url: databaseUrl, poolSize: 1, applicationName: 'test keys', log: testLogger() });
  try {
    return await fn(new ApiKeyService({ db, writer: new EventWriter(db, WEBHOOK_FAN_OUT), pepper: TEST_PEPPER, environment }));
  } finally {
    await db.close();
  }
}

const TEST_OPERATOR = { userId: 'test-operator', userRole: 'operator' };

/** Mints keys straight through the domain service, as the operator CLI does. */
export async function mintKey(
  databaseUrl: string,
  grants: KeyGrants,
  environment: 'live' | 'test' = 'live',
): Promise<{ key: string; lookupId: string }> {
  const minted = await withKeyService(databaseUrl, environment, (service) => service.mint(grants, TEST_OPERATOR));
  return { key: minted.key, lookupId: minted.record.lookupId };
}

export async function revokeKey(databaseUrl: string, lookupId: string): Promise<void> {
  await withKeyService(databaseUrl, 'live', (service) => service.revoke(lookupId, TEST_OPERATOR));
}

/** GET with a bearer key; returns status, headers and the raw body text plus its JSON when it is JSON. */
export async function call(
  url: string,
  options: { key?: string; method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Headers; text: string; json: any }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key !== undefined) headers.authorization = `Bearer ${options.key}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(url, { method: options.method ?? (body === undefined ? 'GET' : 'POST'), headers, body });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}
