import { createHash, sign, verify, type KeyObject } from 'node:crypto';
import { ed25519PublicKey, rawPublicKey } from './webhookEd25519.ts';

/**
 * Checkpoints as C2SP writes them (docs/integrity.md "Checkpoints and tiles"): a `tlog-checkpoint` is a
 * `signed-note` whose text is three lines (origin, tree size, base64 root hash); each signature line is
 * an em dash, the key's name and base64(4-byte key id ‖ signature). Two signature types are used here:
 * 0x01, the log's Ed25519 signature over the note text, and 0x04, a witness's `tlog-cosignature/v1`
 * (Ed25519 over "cosignature/v1\ntime <t>\n" and the note text, the 8-byte time before the signature). A
 * key is named to verifiers by its vkey, `<name>+<hex key id>+base64(type ‖ public key)`.
 *
 * Depends on node:crypto only: it ships in the dependency-free client, which witnesses with it.
 */

export const LOG_SIGNATURE_TYPE = 0x01;
export const COSIGNATURE_TYPE = 0x04;

const EM_DASH = '\u2014';
const SIGNATURE_LINE = /^\u2014 (\S+) ([A-Za-z0-9+/]+={0,2})$/;
const BASE64_HASH = /^[A-Za-z0-9+/]{43}=$/;

export interface NoteSignature {
  readonly name: string;
  /** The first four bytes of the signature: SHA-256(name ‖ "\n" ‖ type ‖ public key)[:4]. */
  readonly keyId: Buffer;
  /** The bytes after the key id. */
  readonly signature: Buffer;
  /** The line as it appeared, em dash to the end, without its newline. */
  readonly line: string;
}

export interface SignedNote {
  /** The note text, ending with its newline: what the signatures cover. */
  readonly text: string;
  readonly signatures: readonly NoteSignature[];
}

export interface Checkpoint {
  readonly origin: string;
  readonly size: number;
  readonly rootHash: Buffer;
}

export interface VerifierKey {
  readonly name: string;
  readonly keyId: Buffer;
  readonly type: number;
  readonly publicKey: KeyObject;
  readonly text: string;
}

export class NoteFormatError extends Error {
  override name = 'NoteFormatError';
}

/** A key name of the signed-note format: not empty, no spaces, no plus. */
export function isKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name) && !hasControlCharacter(name, false);
}

/** Whether text holds a character below U+0020 (a newline counts only when `newlinesAllowed` is false). */
function hasControlCharacter(text: string, newlinesAllowed: boolean): boolean {
  for (let at = 0; at < text.length; at += 1) {
    const code = text.charCodeAt(at);
    if (code < 0x20 && !(newlinesAllowed && code === 0x0a)) return true;
  }
  return false;
}

export function noteKeyId(name: string, type: number, publicKey: KeyObject): Buffer {
  return createHash('sha256')
    .update(name)
    .update(Buffer.from([0x0a, type]))
    .update(rawPublicKey(publicKey))
    .digest()
    .subarray(0, 4);
}

export function verifierKeyText(name: string, type: number, publicKey: KeyObject): string {
  const material = Buffer.concat([Buffer.from([type]), rawPublicKey(publicKey)]);
  return `${name}+${noteKeyId(name, type, publicKey).toString('hex')}+${material.toString('base64')}`;
}

export function parseVerifierKey(text: string): VerifierKey {
  const trimmed = text.trim();
  const parts = trimmed.split('+');
  if (parts.length !== 3) throw new NoteFormatError('a verifier key is <name>+<key id>+<key>');
  const [name, idHex, material] = parts as [string, string, string];
  if (!isKeyName(name)) throw new NoteFormatError('the key name is empty or holds a space');
  if (!/^[0-9a-f]{8}$/.test(idHex)) throw new NoteFormatError('the key id is not 8 lowercase hex digits');
  const bytes = Buffer.from(material, 'base64');
  if (bytes.length !== 33 || (bytes[0] !== LOG_SIGNATURE_TYPE && bytes[0] !== COSIGNATURE_TYPE))
    throw new NoteFormatError('only Ed25519 keys (type 0x01) and Ed25519 cosigner keys (type 0x04) are known here');
  const type = bytes[0]!;
  const publicKey = ed25519PublicKey(bytes.subarray(1));
  const keyId = Buffer.from(idHex, 'hex');
  if (!noteKeyId(name, type, publicKey).equals(keyId)) throw new NoteFormatError('the key id does not match the name and key');
  return { name, keyId, type, publicKey, text: trimmed };
}

export function checkpointText(checkpoint: Checkpoint): string {
  return `${checkpoint.origin}\n${checkpoint.size}\n${checkpoint.rootHash.toString('base64')}\n`;
}

/** The three lines of a checkpoint's text (extension lines are refused: this log writes none). */
export function parseCheckpoint(text: string): Checkpoint {
  const lines = text.split('\n');
  if (lines.length !== 4 || lines[3] !== '') throw new NoteFormatError('a checkpoint is three lines: origin, size, root hash');
  const [origin, size, root] = lines as [string, string, string];
  if (origin.length === 0) throw new NoteFormatError('the origin line is empty');
  if (!/^(0|[1-9][0-9]{0,15})$/.test(size) || !Number.isSafeInteger(Number(size)))
    throw new NoteFormatError('the size line is not a decimal tree size');
  if (!BASE64_HASH.test(root)) throw new NoteFormatError('the root hash line is not the base64 of 32 bytes');
  return { origin, size: Number(size), rootHash: Buffer.from(root, 'base64') };
}

/** Splits a signed note at its last blank line into its text and its signature lines. */
export function parseSignedNote(note: string): SignedNote {
  if (hasControlCharacter(note, true)) throw new NoteFormatError('a note holds no control characters but newlines');
  if (!note.endsWith('\n')) throw new NoteFormatError('a note ends with a newline');
  const split = note.lastIndexOf('\n\n');
  if (split < 0) throw new NoteFormatError('a note has a blank line before its signatures');
  const text = note.slice(0, split + 1);
  const lines = note.slice(split + 2, -1).split('\n');
  const signatures = lines.map((line) => parseSignatureLine(line));
  if (signatures.length === 0) throw new NoteFormatError('a note has at least one signature');
  return { text, signatures };
}

export function parseSignatureLine(line: string): NoteSignature {
  const match = SIGNATURE_LINE.exec(line);
  if (!match || !isKeyName(match[1]!)) throw new NoteFormatError('a signature line is "\u2014 <name> <base64>"');
  const bytes = Buffer.from(match[2]!, 'base64');
  if (bytes.length < 5) throw new NoteFormatError('a signature is a key id and at least one byte');
  return { name: match[1]!, keyId: bytes.subarray(0, 4), signature: bytes.subarray(4), line };
}

export function formatSignedNote(text: string, signatureLines: readonly string[]): string {
  return `${text}\n${signatureLines.map((line) => `${line}\n`).join('')}`;
}

function signatureLine(name: string, keyId: Buffer, signature: Buffer): string {
  return `${EM_DASH} ${name} ${Buffer.concat([keyId, signature]).toString('base64')}`;
}

/** The log's signature line (type 0x01) over a note text, its key named `name`. */
export function signNoteText(text: string, name: string, privateKey: KeyObject): string {
  return signatureLine(name, noteKeyId(name, LOG_SIGNATURE_TYPE, privateKey), sign(null, Buffer.from(text), privateKey));
}

/** The log's signature line from a stored signature (the sealer signed it; the API only serves it). */
export function logSignatureLine(name: string, publicKey: KeyObject, signature: Buffer): string {
  return signatureLine(name, noteKeyId(name, LOG_SIGNATURE_TYPE, publicKey), signature);
}

/** The bytes a tlog-cosignature/v1 signs. */
function cosignedMessage(text: string, timestamp: number): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${timestamp}\n${text}`);
}

/** A witness's cosignature line (type 0x04) over a checkpoint's text, dated `timestamp` (POSIX seconds). */
export function cosignCheckpoint(text: string, name: string, privateKey: KeyObject, timestamp: number): string {
  const time = Buffer.alloc(8);
  time.writeBigUInt64BE(BigInt(timestamp));
  const signature = sign(null, cosignedMessage(text, timestamp), privateKey);
  return signatureLine(name, noteKeyId(name, COSIGNATURE_TYPE, privateKey), Buffer.concat([time, signature]));
}

/** Whether a signature line is by this key (name and key id both match), as signed-note tells verifiers to ask. */
export function isSignatureBy(signature: NoteSignature, key: VerifierKey): boolean {
  return signature.name === key.name && signature.keyId.equals(key.keyId);
}

/**
 * Verifies a signature line by `key` over `text`: the log's (type 0x01) or a cosignature (0x04, whose
 * time is returned). False when it does not verify; the caller has matched it to the key already.
 */
export function verifyNoteSignature(text: string, signature: NoteSignature, key: VerifierKey): { valid: boolean; timestamp?: number } {
  if (key.type === LOG_SIGNATURE_TYPE) {
    return { valid: signature.signature.length === 64 && verify(null, Buffer.from(text), key.publicKey, signature.signature) };
  }
  if (signature.signature.length !== 72) return { valid: false };
  const timestamp = signature.signature.readBigUInt64BE(0);
  if (timestamp > BigInt(Number.MAX_SAFE_INTEGER)) return { valid: false };
  const valid = verify(null, cosignedMessage(text, Number(timestamp)), key.publicKey, signature.signature.subarray(8));
  return { valid, timestamp: Number(timestamp) };
}

/**
 * Opens a signed note with the keys the caller trusts: every signature by a trusted key must verify, and at
 * least one must; signatures by other keys are ignored (signed-note's rules). Returns the verified ones.
 */
export function openSignedNote(note: string, trusted: readonly VerifierKey[]): { note: SignedNote; verifiedBy: VerifierKey[] } {
  const parsed = parseSignedNote(note);
  const verifiedBy: VerifierKey[] = [];
  for (const signature of parsed.signatures) {
    const key = trusted.find((candidate) => isSignatureBy(signature, candidate));
    if (!key) continue;
    if (!verifyNoteSignature(parsed.text, signature, key).valid)
      throw new NoteFormatError(`the signature of ${key.name} does not verify: the note is not what that key signed`);
    verifiedBy.push(key);
  }
  if (verifiedBy.length === 0) throw new NoteFormatError('no signature by a trusted key: the note is not verified');
  return { note: parsed, verifiedBy };
}
