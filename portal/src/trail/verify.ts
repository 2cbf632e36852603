/**
 * "Verify this event", in the browser with WebCrypto alone: the event as served hashes (RFC 8785 canonical
 * JSON, RFC 9162 leaf hash, SHA-256) to the leaf of the inclusion proof, the proof's path leads to the root
 * of a signed tree head (RFC 9162 §2.1.3.2), and the head's Ed25519 signature is by a published key whose
 * id matches and whose validity window holds the signing time. The same checks as the client package's
 * verifier (src/client/integrity.ts), which runs on node:crypto and cannot run here.
 */
import { canonicalJson } from '../../../src/client/canonicalJson.ts';
import type { InclusionProof, SignedTreeHead } from '../../../src/client/integrityShapes.ts';
import { ApiError, type PortalApi } from '../api.ts';

interface SealKey {
  key_id: string;
  public_key_pem: string;
  valid_from: string;
  valid_until: string | null;
}

interface Check {
  readonly label: string;
  readonly ok: boolean;
  readonly detail: string;
}

export type Verification =
  | {
      readonly state: 'proven' | 'redacted' | 'failed';
      readonly checks: readonly Check[];
      readonly head: SignedTreeHead;
      readonly leafIndex: number;
    }
  | { readonly state: 'not_sealed'; readonly message: string };

const encoder = new TextEncoder();

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>));
}

const toHex = (bytes: Uint8Array) => Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');

function fromHex(hex: string): Uint8Array {
  if (!/^(?:[0-9a-f]{2})*$/.test(hex)) throw new TypeError('not lowercase hex');
  return Uint8Array.from(hex.match(/../g) ?? [], (pair) => Number.parseInt(pair, 16));
}

const concat = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((length, part) => length + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
};

/** RFC 9162 §2.1.1: SHA-256(0x00 ‖ leaf). */
async function leafHashOf(event: Record<string, unknown>): Promise<string> {
  return toHex(await sha256(concat(new Uint8Array([0]), encoder.encode(canonicalJson(event)))));
}

/** RFC 9162 §2.1.3.2: the root the audit path leads to from the leaf at `index` of a tree of `size`; undefined when the path's length is wrong. */
async function rootFromPath(leafHash: string, index: number, size: number, path: readonly string[]): Promise<string | undefined> {
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return undefined;
  let fn = index;
  let sn = size - 1;
  let r = fromHex(leafHash);
  const node = (left: Uint8Array, right: Uint8Array) => sha256(concat(new Uint8Array([1]), left, right));
  for (const hex of path) {
    if (sn === 0) return undefined;
    const p = fromHex(hex);
    if (fn % 2 === 1 || fn === sn) {
      r = await node(p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      r = await node(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? toHex(r) : undefined;
}

function pemToDer(pem: string): Uint8Array {
  const base64 = pem.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, '').replace(/\s+/g, '');
  return Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
}

/** The service's key id: hex of the first 16 bytes of SHA-256 over the SPKI DER. */
async function keyIdOf(der: Uint8Array): Promise<string> {
  return toHex((await sha256(der)).subarray(0, 16));
}

async function signatureChecks(head: SignedTreeHead, keys: readonly SealKey[]): Promise<Check[]> {
  let key: SealKey | undefined;
  let der: Uint8Array | undefined;
  for (const candidate of keys) {
    const candidateDer = pemToDer(candidate.public_key_pem);
    // The id is recomputed from each published key, never taken from the listing on trust.
    if ((await keyIdOf(candidateDer)) === head.key_id) {
      key = candidate;
      der = candidateDer;
    }
  }
  if (!key || !der) return [{ label: 'Signing key', ok: false, detail: `Key ${head.key_id} is not among the published keys.` }];
  const publicKey = await crypto.subtle.importKey('spki', der as Uint8Array<ArrayBuffer>, { name: 'Ed25519' }, false, ['verify']);
  const signed = canonicalJson({
    tenant_id: head.tenant_id,
    tree_size: head.tree_size,
    root_hash: head.root_hash,
    timestamp: head.timestamp,
    key_id: head.key_id,
  });
  const signature = Uint8Array.from(atob(head.signature), (char) => char.charCodeAt(0));
  const valid = await crypto.subtle.verify({ name: 'Ed25519' }, publicKey, signature, encoder.encode(signed));
  const at = Date.parse(head.timestamp);
  const inWindow = at >= Date.parse(key.valid_from) && (key.valid_until === null || at < Date.parse(key.valid_until));
  return [
    {
      label: 'Tree head signature',
      ok: valid,
      detail: valid ? `Ed25519 signature by key ${head.key_id} is valid.` : 'The signature does not match the tree head.',
    },
    {
      label: 'Key validity',
      ok: inWindow,
      detail: inWindow
        ? `Signed at ${head.timestamp}, within the key's validity (from ${key.valid_from}${key.valid_until ? ` until ${key.valid_until}` : ''}).`
        : `Signed at ${head.timestamp}, outside the key's validity.`,
    },
  ];
}

/** Fetches the head, the proof against it, the event and the keys, and checks them all. */
export async function verifyEvent(api: PortalApi, eventId: string, tenantId: string): Promise<Verification> {
  let head: SignedTreeHead;
  let proof: InclusionProof;
  try {
    head = await api.json<SignedTreeHead>('GET', '/audit/integrity/tree-head');
    proof = await api.json<InclusionProof>('GET', `/audit/events/${encodeURIComponent(eventId)}/proof`, {
      query: { tree_size: String(head.tree_size) },
    });
  } catch (error) {
    if (error instanceof ApiError && (error.code === 'not_yet_sealed' || (error.status === 404 && error.code === 'not_found'))) {
      return {
        state: 'not_sealed',
        message: 'This event has not been sealed into the tree yet (it is, within seconds of being written). Try again shortly.',
      };
    }
    throw error;
  }
  const [event, { keys }] = await Promise.all([api.getEvent(eventId), api.json<{ keys: SealKey[] }>('GET', '/audit/integrity/keys')]);
  // A redacted event no longer hashes to its leaf; it carries the leaf hash it was sealed with (docs/retention.md).
  const redaction = redactionOf(event);
  const leafHash = redaction?.leaf_hash ?? (await leafHashOf(event));
  const root = await rootFromPath(leafHash, proof.leaf_index, head.tree_size, proof.audit_path);
  const checks: Check[] = [
    redaction
      ? {
          label: 'Redacted',
          ok: leafHash === proof.leaf_hash,
          detail: `${redaction.fields.join(', ')} ${redaction.fields.length === 1 ? 'was' : 'were'} redacted (reference ${redaction.references.join(', ')}): the event's position and sealed leaf ${leafHash} are proven, its content can no longer be re-verified.`,
        }
      : {
          label: 'Event hash',
          ok: leafHash === proof.leaf_hash,
          detail:
            leafHash === proof.leaf_hash
              ? `The event as shown hashes to leaf ${leafHash}.`
              : "The event as shown does not hash to the proof's leaf.",
        },
    {
      label: 'Inclusion',
      ok: root === head.root_hash && proof.tree_size === head.tree_size,
      detail:
        root === head.root_hash
          ? `Leaf ${proof.leaf_index} of a tree of ${head.tree_size} events leads to root ${head.root_hash}.`
          : "The audit path does not lead to the tree head's root.",
    },
    { label: 'Tenant', ok: head.tenant_id === tenantId, detail: `The tree head is of tenant ${head.tenant_id}.` },
    ...(await signatureChecks(head, keys)),
  ];
  const state = !checks.every((check) => check.ok) ? 'failed' : redaction ? 'redacted' : 'proven';
  return { state, checks, head, leafIndex: proof.leaf_index };
}

/** The event's redaction member, when it has a well-formed one. */
function redactionOf(event: Record<string, unknown>): { fields: string[]; leaf_hash: string; references: string[] } | undefined {
  const member = event.redaction as { fields?: unknown; leaf_hash?: unknown; history?: unknown } | undefined;
  if (!member || !Array.isArray(member.fields) || typeof member.leaf_hash !== 'string' || !/^[0-9a-f]{64}$/.test(member.leaf_hash))
    return undefined;
  const history = Array.isArray(member.history) ? (member.history as Array<{ reference?: unknown }>) : [];
  return { fields: member.fields.map(String), leaf_hash: member.leaf_hash, references: history.map((step) => String(step.reference)) };
}
