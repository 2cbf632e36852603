import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../src/platform/logger.ts';

/** A logger of the service's own kind whose JSON lines a test reads back; clear() forgets what was written. */
export interface LogCapture<Line> {
  readonly log: Logger;
  lines(): Line[];
  clear(): void;
}

export function captureLog<Line = Record<string, unknown>>(level: string): LogCapture<Line> {
  let text = '';
  const log = createLogger(
    level,
    new Writable({
      write(chunk, _encoding, done) {
        text += String(chunk);
        done();
      },
    }),
  );
  return {
    log,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Line),
    clear: () => {
      text = '';
    },
  };
}
