import { AuditTrailClient } from '../auditTrailClient.ts';
import { CLIENT_VERSION, UsageError } from './usage.ts';

const API_PATH = '/api/v2/public';

/**
 * The key's shape (docs/api.md "Authentication"). Checked before any request so that a mistyped variable
 * (a stray newline, quotes, another token) is named without its value ever being echoed anywhere.
 */
const API_KEY_FORMAT = /^atr_(live|test)_[0-9a-f]{8}_[0-9a-f]{32}$/;

/**
 * The client of the commands that call the API: the address from `--url` or AUDIT_TRAIL_URL, the key from
 * AUDIT_TRAIL_API_KEY only (a flag would leave it in shell history and in every `ps` listing).
 */
export function clientFrom(url: string | undefined, env: NodeJS.ProcessEnv = process.env): AuditTrailClient {
  return new AuditTrailClient({ ...apiConnection(url, env), userAgent: `audit-trail-client/${CLIENT_VERSION}` });
}

/** The API's base URL and the key, checked as clientFrom checks them, for commands that talk to it directly. */
export function apiConnection(url: string | undefined, env: NodeJS.ProcessEnv = process.env): { baseUrl: string; apiKey: string } {
  return { baseUrl: apiBaseUrl(url ?? env.AUDIT_TRAIL_URL), apiKey: apiKey(env.AUDIT_TRAIL_API_KEY) };
}

/** The service's address as users know it (its origin), or the API's base URL as the docs spell it. */
function apiBaseUrl(address: string | undefined): string {
  if (!address) throw new UsageError('no service address: set AUDIT_TRAIL_URL or pass --url, e.g. https://audit.example.com');
  let url: URL;
  try {
    url = new URL(address);
  } catch {
    throw new UsageError('the service address (AUDIT_TRAIL_URL or --url) is not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new UsageError('the service address must be an http or https URL');
  const path = url.pathname.replace(/\/+$/, '');
  return `${url.origin}${path.endsWith(API_PATH) ? path : `${path}${API_PATH}`}`;
}

function apiKey(value: string | undefined): string {
  if (!value) throw new UsageError('no API key: set AUDIT_TRAIL_API_KEY');
  const key = value.trim();
  if (!API_KEY_FORMAT.test(key)) throw new UsageError('AUDIT_TRAIL_API_KEY is not an API key (atr_live_<8 hex>_<32 hex>)');
  return key;
}
