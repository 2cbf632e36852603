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
