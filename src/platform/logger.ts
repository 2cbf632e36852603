import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * JSON logs on stdout. Keys, secrets, signatures and event bodies never reach a log line: call sites log
 * only ids, and these redactions catch the headers and fields that could carry them by accident.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'audit-trail' },
      timestamp: pino.stdTimeFunctions.isoTime,
      serializers: { err: loggedError },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'headers.authorization',
          'authorization',
          'apiKey',
          'key',
          'secret',
          'signature',
          '*.secret',
          '*.apiKey',
        ],
        censor: '[redacted]',
      },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}

/**
 * Properties of an error that quote data rather than say what went wrong: a Postgres error's detail
 * ("Failing row contains (…)", "Key (…)=(…) already exists"), where (a COPY's line, a function's values)
 * and internal query. The rows they quote are the trail's: PHI.
 */
const DATA_BEARING_ERROR_FIELDS = new Set(['detail', 'where', 'internalQuery']);

/**
 * An error as a log line holds it: pino's serializer (type, message and stack with their causes), then only
 * the properties whose values are plain (a code, a severity, a table's name) or errors themselves. Objects
 * hung on an error stay out: pg's pool hangs the whole client on the error of an idle connection that broke,
 * which logged its cancel key and the text of every statement it had prepared, some 8 kB a line.
 */
function loggedError(error: unknown): unknown {
  const serialized = pino.stdSerializers.err(error as Error);
  if (serialized === error) return error;
  return withoutQuotedValues(plainErrorFields(serialized as unknown as Record<string, unknown>), quotingMessages(error));
}

/**
 * Postgres' data exceptions (SQLSTATE class 22) say which value they refused in their message: `invalid input
 * syntax for type uuid: "…"`, `value "…" is out of range for type integer`, `invalid byte sequence for
 * encoding "UTF8": 0x…`. The value is the trail's, so PHI. Such a message is logged up to where it starts
 * quoting; its code (kept) says the rest. Other classes name constraints, columns and types, not values
 * (class 23 quotes the row only in `detail`, dropped above).
 */
const QUOTING_SQLSTATE = /^22[0-9A-Z]{3}$/;
const VALUE_WITHHELD = '[the value withheld]';

/** Each message of the error, its causes and its aggregated errors that quotes a value, with what replaces it. */
function quotingMessages(error: unknown, found = new Map<string, string>(), depth = 0): Map<string, string> {
  if (typeof error !== 'object' || error === null || depth > 8) return found;
  const { code, severity, message, cause, errors } = error as Record<string, unknown>;
  if (typeof message === 'string' && typeof severity === 'string' && typeof code === 'string' && QUOTING_SQLSTATE.test(code)) {
    const withheld = messageUpToItsValue(message);
    if (withheld !== message) found.set(message, withheld);
  }
  quotingMessages(cause, found, depth + 1);
  if (Array.isArray(errors)) for (const inner of errors) quotingMessages(inner, found, depth + 1);
  return found;
}

/** The message up to its first quote or its first ": " (before which Postgres names what it refused). */
function messageUpToItsValue(message: string): string {
  const starts = [message.indexOf('"'), message.indexOf(': ')].filter((index) => index >= 0);
  if (starts.length === 0) return message;
  return `${message.slice(0, Math.min(...starts)).trimEnd()} ${VALUE_WITHHELD}`;
}

/** pino repeats a cause's message in its error's message and stack: each occurrence is replaced, nested errors too. */
function withoutQuotedValues(fields: Record<string, unknown>, replacements: Map<string, string>): Record<string, unknown> {
  if (replacements.size === 0) return fields;
  const replaced = (text: string) => {
    let result = text;
    for (const [quoting, withheld] of replacements) result = result.replaceAll(quoting, withheld);
    return result;
  };
  const kept: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === 'string') kept[name] = replaced(value);
    else if (Array.isArray(value)) kept[name] = value.map((inner) => withoutQuotedValues(inner as Record<string, unknown>, replacements));
    else if (typeof value === 'object' && value !== null) kept[name] = withoutQuotedValues(value as Record<string, unknown>, replacements);
    else kept[name] = value;
  }
  return kept;
}

function plainErrorFields(serialized: Record<string, unknown>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(serialized)) {
    if (DATA_BEARING_ERROR_FIELDS.has(name)) continue;
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) kept[name] = value;
    else if (Array.isArray(value) && name === 'aggregateErrors')
      kept[name] = value.map((inner) => plainErrorFields(inner as Record<string, unknown>));
    else if (isSerializedError(value)) kept[name] = plainErrorFields(value as Record<string, unknown>);
  }
  return kept;
}

/** What pino's serializer makes of an error found in a property of another. */
function isSerializedError(value: object): boolean {
  return typeof (value as { message?: unknown }).message === 'string' && typeof (value as { stack?: unknown }).stack === 'string';
}
