import { createReadStream } from 'node:fs';
import type { NewEvent } from '../events/eventStore.ts';
import { ValidationError } from '../platform/errors.ts';
import { parseUtf8Json } from '../platform/utf8Json.ts';
import { MAX_BATCH_SIZE, parseEvent, type EventTimeWindow } from './eventInput.ts';
import type { EventWriter } from '../events/eventWriter.ts';
import { systemClock } from '../platform/clock.ts';

/**
 * The operator's path for history that producers may not write (`audit-trail import`): an NDJSON file of
 * producer events, checked whole before anything is stored, then written through the same write path as
 * every other event, in batches. Each line must carry event_id and timestamp, so that running an import
 * again after an interruption stores nothing twice.
 */

export interface ImportProblem {
  readonly line: number;
  readonly field: string;
  readonly message: string;
}

export interface ImportProgress {
  readonly total: number;
  readonly written: number;
  readonly stored: number;
  readonly duplicates: number;
}

// Enough to fix a file by; a file with more problems than this has a systematic one.
const MAX_REPORTED_PROBLEMS = 50;

/** Every line's problems (up to MAX_REPORTED_PROBLEMS), and how many events the file holds. */
export async function checkImportFile(path: string, window: EventTimeWindow): Promise<{ total: number; problems: ImportProblem[] }> {
  const problems: ImportProblem[] = [];
  let total = 0;
  const now = systemClock.now();
  for await (const { line, text } of lines(path)) {
    total += 1;
    try {
      parseImportLine(text, window, now);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      for (const detail of error.details) {
        if (problems.length < MAX_REPORTED_PROBLEMS) problems.push({ line, ...detail });
      }
    }
  }
  return { total, problems };
}

/** Writes a file that checkImportFile found clean; reports progress after each batch. */
export async function importEvents(
  path: string,
  window: EventTimeWindow,
  writer: EventWriter,
  onProgress: (progress: ImportProgress) => void,
  total: number,
): Promise<ImportProgress> {
  const now = systemClock.now();
  let batch: NewEvent[] = [];
  let progress: ImportProgress = { total, written: 0, stored: 0, duplicates: 0 };
  const flush = async () => {
    if (batch.length === 0) return;
    const results = await writer.write(batch, 'import');
    const stored = results.filter((result) => result.status === 'stored').length;
    progress = {
      total,
      written: progress.written + results.length,
      stored: progress.stored + stored,
      duplicates: progress.duplicates + results.length - stored,
    };
    batch = [];
    onProgress(progress);
  };
  for await (const { text } of lines(path)) {
    batch.push(parseImportLine(text, window, now));
    if (batch.length >= MAX_BATCH_SIZE) await flush();
  }
  await flush();
  return progress;
}

function parseImportLine(bytes: Buffer, window: EventTimeWindow, now: number): NewEvent {
  let item: unknown;
  try {
    item = parseUtf8Json(bytes);
  } catch (error) {
    if (error instanceof ValidationError) throw error;
    throw ValidationError.single('(line)', 'is not a JSON object');
  }
  const missing = ['event_id', 'timestamp'].filter(
    (field) => typeof item !== 'object' || item === null || (item as Record<string, unknown>)[field] === undefined,
  );
  if (missing.length > 0) {
    throw new ValidationError(
      missing.map((field) => ({ field, message: 'is required for an import, so that running it again stores nothing twice' })),
    );
  }
  return parseEvent(item, window, now);
}

/**
 * The file's non-blank lines as bytes (without their \n or \r\n), numbered from 1 as an editor shows them.
 * Split as bytes, not decoded text: a decoder would turn invalid UTF-8 into U+FFFD before the check.
 */
async function* lines(path: string): AsyncGenerator<{ line: number; text: Buffer }> {
  let line = 0;
  let rest = Buffer.alloc(0);
  const numbered = function* (text: Buffer) {
    line += 1;
    const content = text.at(-1) === 0x0d ? text.subarray(0, -1) : text;
    if (content.toString('latin1').trim() !== '') yield { line, text: content };
  };
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    let data = rest.length > 0 ? Buffer.concat([rest, chunk]) : chunk;
    for (let end = data.indexOf(0x0a); end >= 0; end = data.indexOf(0x0a)) {
      yield* numbered(data.subarray(0, end));
      data = data.subarray(end + 1);
    }
    rest = Buffer.from(data);
  }
  if (rest.length > 0) yield* numbered(rest);
}
