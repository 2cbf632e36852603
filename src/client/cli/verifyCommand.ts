import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { verifyExport } from '../exportVerifier.ts';
import { verifyStreamCopy } from '../streamCopyVerifier.ts';
import type { ConsistencyProof, SignedTreeHead, TrustedKey } from '../integrity.ts';
import { PROGRAM, VERIFY_ARGUMENTS } from './usage.ts';

/**
 * `audit-trail-client verify`: checks an export made with proofs=true, or a log stream's copy (the NDJSON
 * or .ndjson.gz files a destination received, --stream-copy), offline, with no database and no network.
 * The operator CLI's `audit-trail verify` is this same command under its own name (`program`).
 * Exits 0 with a summary, 1 naming every failing event and the reason, 2 for a usage problem.
 */
export async function runVerify(
  args: string[],
  out: NodeJS.WritableStream = process.stdout,
  err: NodeJS.WritableStream = process.stderr,
  program = PROGRAM,
): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    // `--stream-copy objects/*.ndjson.gz`: the shell expands the pattern into one value and the rest as
    // positionals, which are more files of the copy (and a usage error anywhere else).
    allowPositionals: true,
    options: {
      export: { type: 'string' },
      'stream-copy': { type: 'string', multiple: true, default: [] },
      'public-key': { type: 'string', multiple: true, default: [] },
      'tree-head': { type: 'string', multiple: true, default: [] },
      consistency: { type: 'string', multiple: true, default: [] },
      complete: { type: 'boolean', default: false },
    },
  });
  const copies = [...values['stream-copy'], ...positionals];
  const strayFiles = values['stream-copy'].length === 0 && positionals.length > 0;
  if (strayFiles || Boolean(values.export) === copies.length > 0 || values['public-key'].length === 0) {
    err.write(
      `${program} verify: --public-key and one of --export and --stream-copy are required\nusage: ${program} verify ${VERIFY_ARGUMENTS}\n`,
    );
    return 2;
  }
  if (copies.length > 0) return verifyCopy(copies, values['public-key'], values['tree-head'], out, err, program);
  let inputs: Parameters<typeof verifyExport>[0];
  try {
    inputs = {
      // Read as bytes and decoded at once: readFile's 'utf8' decodes chunk by chunk into a string of many
      // pieces, which parsing then had to flatten (BENCHMARKS.md, "Tamper evidence (issue 18)", the verification).
      // An archive object (docs/retention.md "Archive before expiry") is gzipped NDJSON: verified as it is stored.
      exportText: gunzipped(await readFile(values.export!)).toString('utf8'),
      trustedKeys: (await Promise.all(values['public-key'].map(readTrustedKeys))).flat(),
      savedHeads: (await Promise.all(values['tree-head'].map((path) => readJsonList<SignedTreeHead>(path, 'tree_heads')))).flat(),
      consistencyProofs: (await Promise.all(values.consistency.map((path) => readJsonList<ConsistencyProof>(path, 'proofs')))).flat(),
    };
  } catch (error) {
    err.write(`${program} verify: ${(error as Error).message}\n`);
    return 2;
  }
  const report = verifyExport({ ...inputs, complete: values.complete });
  for (const failure of report.failures) {
    err.write(`${program} verify: ${failure.eventId ? `event ${failure.eventId}: ` : ''}${failure.reason}\n`);
  }
  const head = report.head
    ? `the tree head of size ${report.head.tree_size} signed at ${report.head.timestamp} by key ${report.head.key_id}`
    : 'no tree head';
  for (const event of report.redacted) {
    out.write(
      `event ${event.eventId}: redacted (${event.fields.join(', ')}; ${event.recorded ? 'recorded' : 'not recorded'} in this export by admin.event.redact${event.references.length > 0 ? `, reference ${event.references.join(', ')}` : ''}): position and leaf proven, content not re-verifiable\n`,
    );
  }
  for (const leaf of report.expired) {
    out.write(
      `leaf ${leaf.leafIndex} (event ${leaf.eventId}, ${leaf.timestamp}): expired at ${leaf.expiredAt} (retain ${leaf.retain}, ${leaf.source}): leaf proven, content gone\n`,
    );
  }
  const redacted =
    report.redacted.length > 0 ? `, ${report.redacted.length} redacted (position and leaf proven, content not re-verifiable)` : '';
  const expired = report.expired.length > 0 ? `, ${report.expired.length} expired (leaf proven, content gone)` : '';
  const summary = `${report.events} events, ${report.proven} proven against ${head}${redacted}${expired}, ${report.unsealed} not yet sealed; ${report.savedHeads} saved tree heads`;
  if (report.failures.length > 0) {
    err.write(`${program} verify: FAILED (${report.failures.length} problems): ${summary}\n`);
    return 1;
  }
  out.write(`verified: ${summary} consistent with it\n`);
  return 0;
}

/** --stream-copy: the files a stream's destination received, gzipped (S3 objects) or not. */
async function verifyCopy(
  paths: readonly string[],
  keyPaths: readonly string[],
  headPaths: readonly string[],
  out: NodeJS.WritableStream,
  err: NodeJS.WritableStream,
  program: string,
): Promise<number> {
  let trust: Pick<Parameters<typeof verifyStreamCopy>[0], 'trustedKeys' | 'savedHeads'>;
  try {
    trust = {
      trustedKeys: (await Promise.all(keyPaths.map(readTrustedKeys))).flat(),
      savedHeads: (await Promise.all(headPaths.map((path) => readJsonList<SignedTreeHead>(path, 'tree_heads')))).flat(),
    };
  } catch (error) {
    err.write(`${program} verify: ${(error as Error).message}\n`);
    return 2;
  }
  let report: ReturnType<typeof verifyStreamCopy>;
  try {
    report = verifyStreamCopy({ ...trust, texts: copyFileTexts(paths) });
  } catch (error) {
    if (!(error instanceof UnreadableCopyError)) throw error;
    err.write(`${program} verify: ${error.message}\n`);
    return 2;
  }
  for (const failure of report.failures)
    err.write(`${program} verify: ${failure.tenantId ? `tenant ${failure.tenantId}: ` : ''}${failure.reason}\n`);
  const tenants = report.tenants.map((tenant) => {
    const head = tenant.verifiedHead;
    const proven = head
      ? `${head.tree_size} proven against the tree head of size ${head.tree_size} signed at ${head.timestamp}`
      : 'none proven';
    for (const event of tenant.redacted)
      out.write(`tenant ${tenant.tenantId}: event ${event.eventId}: redacted: position and leaf proven, content not re-verifiable\n`);
    const redacted = tenant.redacted.length > 0 ? `, ${tenant.redacted.length} redacted` : '';
    return `tenant ${tenant.tenantId}: ${tenant.events} events (${proven}; ${tenant.uncovered} past it, ${tenant.repeats} repeated records${redacted})`;
  });
  const summary = `${report.records} records; ${tenants.join('; ')}`;
  if (report.failures.length > 0) {
    err.write(`${program} verify: FAILED (${report.failures.length} problems): ${summary}\n`);
    return 1;
  }
  out.write(`verified: ${summary}\n`);
  return 0;
}

class UnreadableCopyError extends Error {
  override name = 'UnreadableCopyError';
}

/**
 * The copy's files, one at a time as the verifier asks for them: a copy of thousands of objects is never in
 * memory whole, and no more than one file is open at once.
 */
function* copyFileTexts(paths: readonly string[]): Generator<string> {
  for (const path of paths) {
    try {
      yield gunzipped(readFileSync(path)).toString('utf8');
    } catch (error) {
      throw new UnreadableCopyError(`${path}: ${(error as Error).message}`, { cause: error });
    }
  }
}

/** The bytes, gunzipped when they are gzip (by their magic number, whatever the file is called). */
function gunzipped(bytes: Buffer): Buffer {
  return bytes[0] === 0x1f && bytes[1] === 0x8b ? gunzipSync(bytes) : bytes;
}

/** PEM public keys (one or more per file), or the JSON of GET /audit/integrity/keys with validity windows. */
async function readTrustedKeys(path: string): Promise<TrustedKey[]> {
  const text = await readFile(path, 'utf8');
  if (text.trimStart().startsWith('{')) {
    const keys = parseJson(text, path) as { keys?: TrustedKey[] };
    if (Array.isArray(keys.keys)) return keys.keys;
  }
  const pems = text.match(/-----BEGIN PUBLIC KEY-----[\s\S]+?-----END PUBLIC KEY-----/g);
  if (!pems) throw new Error(`${path} holds neither PEM public keys nor the {"keys": [...]} of GET /audit/integrity/keys`);
  return pems.map((pem) => ({ public_key_pem: `${pem}\n` }));
}

/** One object, an array of them, or a page that lists them under `member`. */
async function readJsonList<T>(path: string, member: string): Promise<T[]> {
  const parsed = parseJson(await readFile(path, 'utf8'), path);
  if (Array.isArray(parsed)) return parsed as T[];
  const list = (parsed as Record<string, unknown>)[member];
  return Array.isArray(list) ? (list as T[]) : [parsed as T];
}

function parseJson(text: string, path: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${path} is not JSON`);
  }
}
