import type { KeyObject } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApiTransport } from './apiTransport.ts';
import { verifyConsistency } from './integrity.ts';
import type { ConsistencyProof } from './integrityShapes.ts';
import {
  COSIGNATURE_TYPE,
  cosignCheckpoint,
  formatSignedNote,
  isSignatureBy,
  NoteFormatError,
  openSignedNote,
  parseCheckpoint,
  type Checkpoint,
  type VerifierKey,
  verifierKeyText,
} from './signedNote.ts';

/**
 * A customer as a witness of its tenant's log (docs/integrity.md "Watching a log"): keeps the last
 * checkpoint it verified, checks each new one against it (same tree at the same size, or an RFC 9162
 * consistency proof to a larger one), and only then co-signs it (tlog-cosignature/v1, the customer's own
 * Ed25519 key) and hands the cosignature to the service in the tlog-witness add-checkpoint shape. A
 * checkpoint that does not extend the kept one is refused: nothing is signed, the kept checkpoint stays,
 * and both are written down as evidence. Dependency-free, like the rest of the client.
 */

export interface WitnessOptions {
  readonly api: ApiTransport;
  /** The log's verifier key, obtained once and trusted (GET /audit/integrity/verifier-key, out of band). */
  readonly logKey: VerifierKey;
  readonly name: string;
  readonly privateKey: KeyObject;
  /** Where the last verified checkpoint per log, and any evidence, is kept. */
  readonly stateDirectory: string;
  readonly nowSeconds?: () => number;
}

export type WitnessOutcome =
  | { readonly kind: 'cosigned'; readonly origin: string; readonly size: number; readonly previousSize: number }
  | { readonly kind: 'refused'; readonly origin: string; readonly reason: string; readonly evidence: string };

const fileName = (origin: string) => origin.replace(/[^A-Za-z0-9._-]/g, '_');

export async function witnessOnce(options: WitnessOptions): Promise<WitnessOutcome> {
  const { api, logKey } = options;
  const offered = await (await api.request('GET', '/audit/integrity/checkpoint', undefined, { headers: { accept: 'text/plain' } })).text();
  const statePath = join(options.stateDirectory, `${fileName(logKey.name)}.checkpoint`);
  const kept = await readFile(statePath, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  const refuse = (reason: string, proof?: ConsistencyProof) => keepEvidence(options, logKey.name, reason, kept, offered, proof);
  let text: string;
  let checkpoint: Checkpoint;
  try {
    text = openSignedNote(offered, [logKey]).note.text;
    checkpoint = parseCheckpoint(text);
  } catch (error) {
    if (error instanceof NoteFormatError) return refuse(`the checkpoint is not the log's: ${error.message}`);
    throw error;
  }
  if (checkpoint.origin !== logKey.name) return refuse(`the checkpoint's origin ${checkpoint.origin} is not the log's (${logKey.name})`);
  let previousSize = 0;
  let proofLines: string[] = [];
  if (kept !== undefined) {
    const previous = parseCheckpoint(openSignedNote(kept, [logKey]).note.text);
    previousSize = previous.size;
    const consistency = await consistencyWith(api, previous, checkpoint);
    if (!consistency.consistent) return refuse(consistency.reason, consistency.proof);
    proofLines = consistency.proofLines;
  }
  const logSignature = openSignedNote(offered, [logKey]).note.signatures.filter((signature) => isSignatureBy(signature, logKey));
  const cosignature = cosignCheckpoint(text, options.name, options.privateKey, (options.nowSeconds ?? nowSeconds)());
  const cosigned = formatSignedNote(text, [...logSignature.map((signature) => signature.line), cosignature]);
  // Kept before it is handed out, as tlog-witness asks: a witness never signs a tree it would not remember.
  await mkdir(options.stateDirectory, { recursive: true });
  await writeFile(`${statePath}.tmp`, cosigned, { mode: 0o600 });
  await rename(`${statePath}.tmp`, statePath);
  const body = `old ${previousSize}\n${proofLines.map((line) => `${line}\n`).join('')}\n${cosigned}`;
  const witnessKey = encodeURIComponent(witnessVerifierKey(options.name, options.privateKey));
  await api.request('POST', `/audit/integrity/cosignatures?witness_key=${witnessKey}`, undefined, { text: body });
  return { kind: 'cosigned', origin: checkpoint.origin, size: checkpoint.size, previousSize };
}

type Consistency =
  | { readonly consistent: true; readonly proofLines: string[] }
  | { readonly consistent: false; readonly reason: string; readonly proof?: ConsistencyProof };

/** Whether `next` extends `previous`: the same tree at the same size, or a consistency proof that verifies. */
async function consistencyWith(api: ApiTransport, previous: Checkpoint, next: Checkpoint): Promise<Consistency> {
  if (next.size < previous.size) {
    return { consistent: false, reason: `the log went back from ${previous.size} leaves to ${next.size}` };
  }
  if (next.size === previous.size) {
    return previous.rootHash.equals(next.rootHash)
      ? { consistent: true, proofLines: [] }
      : { consistent: false, reason: `two different trees of ${next.size} leaves: the log forked` };
  }
  if (previous.size === 0) return { consistent: true, proofLines: [] };
  const proof = (await (
    await api.request('GET', `/audit/integrity/consistency?first=${previous.size}&second=${next.size}`)
  ).json()) as ConsistencyProof;
  const verdict = verifyConsistency(
    proof,
    { tree_size: previous.size, root_hash: previous.rootHash.toString('hex') },
    { tree_size: next.size, root_hash: next.rootHash.toString('hex') },
  );
  if (!verdict.valid) return { consistent: false, reason: `the new tree does not extend the one kept: ${verdict.reason}`, proof };
  return { consistent: true, proofLines: proof.proof.map((hex) => Buffer.from(hex, 'hex').toString('base64')) };
}

/** Both checkpoints, the reason and the proof, in a directory of their own: what shows the log misbehaved. */
async function keepEvidence(
  options: WitnessOptions,
  origin: string,
  reason: string,
  kept: string | undefined,
  offered: string,
  proof: ConsistencyProof | undefined,
): Promise<WitnessOutcome> {
  const directory = join(options.stateDirectory, `evidence-${fileName(origin)}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  await mkdir(directory, { recursive: true });
  if (kept !== undefined) await writeFile(join(directory, 'kept.checkpoint'), kept);
  await writeFile(join(directory, 'offered.checkpoint'), offered);
  await writeFile(join(directory, 'reason.txt'), `${reason}\n`);
  if (proof) await writeFile(join(directory, 'consistency-proof.json'), `${JSON.stringify(proof, null, 2)}\n`);
  return { kind: 'refused', origin, reason, evidence: directory };
}

/** The vkey of a witness key (type 0x04): what the service and the witness's relying parties are given. */
export function witnessVerifierKey(name: string, key: KeyObject): string {
  return verifierKeyText(name, COSIGNATURE_TYPE, key);
}

const nowSeconds = () => Math.floor(Date.now() / 1000);
