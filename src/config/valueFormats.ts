import { createPrivateKey, type KeyObject } from 'node:crypto';
import { accessSync, constants } from 'node:fs';
import { z } from 'zod';
import { parsePostgresUrl } from './postgresUrl.ts';

/** The formats an environment variable's value may take (environment.ts), each with the message a wrong one gets. */

export const commaList = z.string().transform((value) =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item.length > 0),
);

export const booleanFlag = z
  .enum(['true', 'false', '1', '0', ''], { message: 'must be true or false' })
  .transform((value) => value === 'true' || value === '1');

export const duration = (example: string) =>
  z.string().transform((value, ctx) => {
    const ms = parseDuration(value.trim());
    if (ms === undefined) {
      ctx.addIssue({ code: 'custom', message: `must be a duration such as ${example} (units ms, s, m, h, d)` });
      return z.NEVER;
    }
    return ms;
  });

// An Ed25519 private key in PEM (PKCS#8). The message never repeats the value: it is a secret.
export const ed25519PrivateKey = z.string().transform((pem, ctx): KeyObject => {
  try {
    const key = createPrivateKey(pem.replace(/\\n/g, '\n'));
    if (key.asymmetricKeyType === 'ed25519') return key;
    ctx.addIssue({ code: 'custom', message: `must be an Ed25519 private key, not ${key.asymmetricKeyType ?? 'a symmetric key'}` });
  } catch {
    ctx.addIssue({
      code: 'custom',
      message: 'must be an Ed25519 private key in PEM (PKCS#8), as `openssl genpkey -algorithm ed25519` writes it',
    });
  }
  return z.NEVER;
});

// An origin as CSP's frame-ancestors takes it, and nothing that could end the directive or add another.
export const FRAME_ANCESTOR = /^(?:'self'|https?:\/\/(?:\*\.)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::\d{1,5})?)$/;

export const port = z.coerce.number().int().min(0, 'must be a port number').max(65535, 'must be a port number');

export const urlWithScheme = (schemes: string[]) =>
  z.string().refine(
    (value) => {
      try {
        return schemes.includes(new URL(value).protocol.replace(/:$/, ''));
      } catch {
        return false;
      }
    },
    `must be a URL with scheme ${schemes.join(' or ')}`,
  );

// A postgres:// URL with one host or several (host:port,host:port), as libpq takes it.
export const postgresUrl = z.string().superRefine((value, ctx) => {
  try {
    parsePostgresUrl(value);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: (error as Error).message });
  }
});

// A certificate, key or credentials file mounted into the pod: checked at start, so a wrong path is reported
// once, naming the variable, rather than as a failed connection on every attempt.
export const readableFile = z.string().superRefine((path, ctx) => {
  try {
    accessSync(path, constants.R_OK);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: `cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})` });
  }
});

export const deliverySchedule = z.string().transform((value, ctx) => {
  const delays = value.split(',').map((item) => parseDuration(item.trim()));
  if (delays.some((delay) => delay === undefined)) {
    ctx.addIssue({ code: 'custom', message: 'must be a comma-separated list of durations such as 1m,5m,30m,2h' });
    return z.NEVER;
  }
  return delays as number[];
});

/**
 * How long a tenant's events are kept (RETENTION_DEFAULT, RetentionPolicy's spec.retain): days, months or
 * years, in calendar terms (an event of 31 January kept `1mo` expires at the end of 28 February, as Postgres
 * adds intervals), so `6y` means six years whatever the leap days. `m` is minutes in every other duration of
 * the service, so months are `mo` and a bare `m` is refused rather than read one way or the other.
 */
export interface RetentionPeriod {
  /** As written, canonical (`6y`, `18mo`, `30d`). */
  readonly text: string;
  /** Years count as 12 months. */
  readonly months: number;
  readonly days: number;
}

export const RETENTION_PERIOD_PATTERN = /^([1-9][0-9]{0,4})(d|mo|y)$/;
/**
 * 100 years: past it, "forever" (no policy) says what is meant. Each unit is bounded in its own terms: counting
 * a month as 31 days against the day bound refused 99y and 100y, which the message allows.
 */
const RETENTION_MAX_MONTHS = 1_200;
const RETENTION_MAX_DAYS = 36_600;

/** "30d", "18mo", "6y" → a period; undefined when malformed, zero or beyond 100 years. */
export function parseRetentionPeriod(text: string): RetentionPeriod | undefined {
  const match = RETENTION_PERIOD_PATTERN.exec(text);
  if (!match) return undefined;
  const count = Number(match[1]);
  const unit = match[2]!;
  const period = { text, months: unit === 'y' ? count * 12 : unit === 'mo' ? count : 0, days: unit === 'd' ? count : 0 };
  return period.months > RETENTION_MAX_MONTHS || period.days > RETENTION_MAX_DAYS ? undefined : period;
}

const RETENTION_PERIOD_MESSAGE = 'must be a period such as 30d, 18mo or 6y (days, months, years; at most 100 years)';

export const retentionPeriod = z.string().transform((value, ctx) => {
  const period = parseRetentionPeriod(value.trim());
  if (period === undefined) {
    ctx.addIssue({ code: 'custom', message: RETENTION_PERIOD_MESSAGE });
    return z.NEVER;
  }
  return period;
});

const durationUnits: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "250ms", "5s", "1m", "2h", "400d" → milliseconds; undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text);
  if (!match) return undefined;
  return Math.round(Number(match[1]) * durationUnits[match[2]!]!);
}
