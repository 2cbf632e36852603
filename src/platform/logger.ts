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
  return serialized === error ? error : plainErrorFields(serialized as unknown as Record<string, unknown>);
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
