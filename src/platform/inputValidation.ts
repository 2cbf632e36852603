import type { z } from 'zod';
import { ValidationError, type FieldProblem } from './errors.ts';

/**
 * The one gate every outside input passes before its schema: query strings, JSON bodies, ingested events
 * (HTTP and JetStream), webhook registrations and the specs of Kubernetes resources. Besides the schema it
 * refuses, anywhere in the value, what Postgres or our own code cannot handle faithfully:
 *
 * - U+0000: Postgres text cannot hold it (SQLSTATE 22021), so it would fail the write as a 500;
 * - unpaired UTF-16 surrogates: the driver's UTF-8 encoding turns them into U+FFFD in the columns while
 *   JSON.stringify keeps them as `\ud800` escapes in the stored document, so the two would disagree;
 * - nesting deeper than MAX_INPUT_DEPTH: recursive code (JSON.stringify, Postgres' JSON functions) has a
 *   stack limit, and no audit record needs more.
 */

const MAX_INPUT_DEPTH = 32;

// Fields named in problems about deep values stop after this many segments: a path 10,000 levels long
// would be a response body of its own.
const REPORTED_PATH_SEGMENTS = 4;

interface Visit {
  readonly value: unknown;
  readonly key: string | undefined;
  readonly parent: Visit | undefined;
  readonly depth: number;
}

/** The first unacceptable text or nesting in a JSON-like value, with the path to it; undefined when clean. */
function findTextProblem(value: unknown, maxDepth = MAX_INPUT_DEPTH): { path: string[]; message: string } | undefined {
  // Iterative, so that the check itself cannot overflow the stack on the input it exists to refuse; paths
  // are built only for a problem found, since ingestion checks every field of every event.
  const stack: Visit[] = [{ value, key: undefined, parent: undefined, depth: 0 }];
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const current = visit.value;
    if (typeof current === 'string') {
      const unacceptable = unacceptableText(current);
      if (unacceptable) return { path: pathOf(visit), message: `must not contain ${unacceptable}` };
      continue;
    }
    if (typeof current !== 'object' || current === null) continue;
    if (visit.depth >= maxDepth) {
      return { path: pathOf(visit).slice(0, REPORTED_PATH_SEGMENTS), message: `nests deeper than ${maxDepth} levels` };
    }
    const depth = visit.depth + 1;
    if (Array.isArray(current)) {
      for (let index = 0; index < current.length; index += 1) {
        stack.push({ value: current[index], key: String(index), parent: visit, depth });
      }
      continue;
    }
    for (const key in current) {
      const unacceptable = unacceptableText(key);
      if (unacceptable) return { path: pathOf(visit), message: `has a key containing ${unacceptable}` };
      stack.push({ value: (current as Record<string, unknown>)[key], key, parent: visit, depth });
    }
  }
  return undefined;
}

function pathOf(visit: Visit): string[] {
  const path: string[] = [];
  for (let at: Visit | undefined = visit; at?.key !== undefined; at = at.parent) path.unshift(at.key);
  return path;
}

function unacceptableText(text: string): string | undefined {
  if (text.includes('\u0000')) return 'the NUL character (U+0000)';
  if (!text.isWellFormed()) return 'an unpaired UTF-16 surrogate (it is not valid Unicode)';
  return undefined;
}

/**
 * Validates `value` against `schema` after the text checks above; the error is the documented 422 with one
 * detail per problem, fields dotted and under `prefix` (`events.3.action`).
 */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, prefix?: string): z.output<S> {
  const result = checkInput(schema, value, prefix);
  if (!result.success) throw result.error;
  return result.data;
}

/**
 * parseInput without throwing, for callers that collect the problems of many items. `plainly` may answer
 * for the schema on input that passed the text checks: the schema's output, or undefined to let the schema
 * decide (it must accept nothing the schema refuses).
 */
export function checkInput<S extends z.ZodType>(
  schema: S,
  value: unknown,
  prefix?: string,
  plainly?: (value: unknown) => z.output<S> | undefined,
): { success: true; data: z.output<S> } | { success: false; error: ValidationError } {
  const textProblem = findTextProblem(value);
  if (textProblem) {
    const field = fieldName(prefix, textProblem.path);
    return { success: false, error: new ValidationError([{ field, message: textProblem.message }], `${field}: ${textProblem.message}`) };
  }
  const plain = plainly?.(value);
  if (plain !== undefined) return { success: true, data: plain };
  const parsed = schema.safeParse(value);
  if (!parsed.success) return { success: false, error: validationErrorFrom(parsed.error, prefix) };
  return { success: true, data: parsed.data };
}

/** zod issues → the `details` of a 422, field paths dotted (`events.3.action`). */
function validationErrorFrom(error: z.ZodError, prefix?: string): ValidationError {
  const details: FieldProblem[] = error.issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => ({ field: fieldName(prefix, [...issue.path, key]), message: 'is not a known field' }))
      : [{ field: fieldName(prefix, issue.path), message: issue.message }],
  );
  return new ValidationError(details, details.map((detail) => `${detail.field}: ${detail.message}`).join('; '));
}

function fieldName(prefix: string | undefined, path: readonly PropertyKey[]): string {
  return [prefix, ...path.map(String)].filter((part) => part !== undefined && part !== '').join('.') || '(body)';
}
