import { expect } from 'chai';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiTransport } from '../../src/client/apiTransport.ts';
import {
  checkpointText,
  formatSignedNote,
  LOG_SIGNATURE_TYPE,
  openSignedNote,
  parseVerifierKey,
  signNoteText,
  verifierKeyText,
} from '../../src/client/signedNote.ts';
import { witnessOnce, witnessVerifierKey } from '../../src/client/witness.ts';
import { consistencyProof, merkleTreeHash } from '../support/rfc9162.ts';

const ORIGIN = 'audit.example/acme';
const WITNESS = 'witness.customer.example/audit';

/**
 * A log served from memory through the client's own transport (its fetch option): the witness's decisions
 * (co-sign or refuse) depend only on the checkpoints and proofs it is given, which an independent RFC 9162
 * implementation computes here. What the witness posts is kept.
 */
class LogInMemory {
  readonly log = generateKeyPairSync('ed25519');
  readonly key = parseVerifierKey(verifierKeyText(ORIGIN, LOG_SIGNATURE_TYPE, this.log.publicKey));
  leaves: Buffer[] = [];
  /** What GET /checkpoint answers; the current tree's signed checkpoint unless set. */
  offered: string | undefined;
  /** Alters the consistency proofs served, to play a log that lies. */
  alterProof: (proof: string[]) => string[] = (proof) => proof;
  readonly posted: string[] = [];

  add(count: number): void {
    for (let index = 0; index < count; index += 1) this.leaves.push(Buffer.from(`{"n":${this.leaves.length}}`));
    this.offered = undefined;
  }

  checkpoint(leaves = this.leaves, origin = ORIGIN, signer = this.log.privateKey): string {
    const text = checkpointText({ origin, size: leaves.length, rootHash: merkleTreeHash(leaves) });
    return formatSignedNote(text, [signNoteText(text, ORIGIN, signer)]);
  }

  readonly transport = new ApiTransport({
    baseUrl: 'https://audit.example',
    apiKey: 'unused',
    fetch: async (input, init) => {
      const url = new URL(String(input));
      if (url.pathname === '/audit/integrity/checkpoint') return new Response(this.offered ?? this.checkpoint());
      if (url.pathname === '/audit/integrity/consistency') {
        const first = Number(url.searchParams.get('first'));
        const second = Number(url.searchParams.get('second'));
        const proof = consistencyProof(first, this.leaves.slice(0, second)).map((hash) => hash.toString('hex'));
        return Response.json({ first, second, proof: this.alterProof(proof) });
      }
      if (url.pathname === '/audit/integrity/cosignatures' && init?.method === 'POST') {
        this.posted.push(String(init.body));
        return new Response('', { status: 201 });
      }
      return Response.json({ error: 'not_found' }, { status: 404 });
    },
  });
}

describe('a witness’s consistency checks', () => {
  const witness = generateKeyPairSync('ed25519');
  let log: LogInMemory;
  let stateDirectory: string;
  const once = () =>
    witnessOnce({
      api: log.transport,
      logKey: log.key,
      name: WITNESS,
      privateKey: witness.privateKey,
      stateDirectory,
      nowSeconds: () => 1_800_000_000,
    });

  beforeEach(async () => {
    log = new LogInMemory();
    stateDirectory = await mkdtemp(join(tmpdir(), 'witness-'));
  });
  afterEach(() => rm(stateDirectory, { recursive: true, force: true }));

  it('co-signs the first checkpoint it sees and posts it as tlog-witness add-checkpoint: old 0, no proof', async () => {
    log.add(5);
    expect(await once()).to.deep.equal({ kind: 'cosigned', origin: ORIGIN, size: 5, previousSize: 0 });
    const [body] = log.posted;
    expect(body!.startsWith('old 0\n\n')).to.equal(true);
    const witnessKey = parseVerifierKey(witnessVerifierKey(WITNESS, witness.privateKey));
    const opened = openSignedNote(body!.slice('old 0\n\n'.length), [log.key, witnessKey]);
    expect(opened.verifiedBy.map((key) => key.name)).to.deep.equal([ORIGIN, WITNESS]);
  });

  it('co-signs a larger tree after a consistency proof to the one kept, and posts the proof in base64', async () => {
    log.add(5);
    await once();
    log.add(8);
    expect(await once()).to.deep.equal({ kind: 'cosigned', origin: ORIGIN, size: 13, previousSize: 5 });
    const lines = log.posted[1]!.split('\n');
    const proof = consistencyProof(5, log.leaves).map((hash) => hash.toString('base64'));
    expect(lines.slice(0, proof.length + 2)).to.deep.equal(['old 5', ...proof, '']);
  });

  it('co-signs the same tree again without a proof', async () => {
    log.add(3);
    await once();
    expect(await once()).to.deep.equal({ kind: 'cosigned', origin: ORIGIN, size: 3, previousSize: 3 });
  });

  it('refuses a larger tree whose proof does not verify, keeping both checkpoints, the reason and the proof', async () => {
    log.add(5);
    await once();
    const kept = await readFile(join(stateDirectory, `${ORIGIN.replace(/\//g, '_')}.checkpoint`), 'utf8');
    log.add(4);
    log.alterProof = (proof) => proof.map((hash, index) => (index === 0 ? 'ff'.repeat(32) : hash));
    const outcome = await once();
    expect(outcome.kind).to.equal('refused');
    if (outcome.kind !== 'refused') return;
    expect(outcome.reason).to.match(/^the new tree does not extend the one kept: /);
    expect((await readdir(outcome.evidence)).sort()).to.deep.equal([
      'consistency-proof.json',
      'kept.checkpoint',
      'offered.checkpoint',
      'reason.txt',
    ]);
    expect(await readFile(join(outcome.evidence, 'kept.checkpoint'), 'utf8')).to.equal(kept);
    // Nothing signed, and the kept checkpoint stays the one to check the next against.
    expect(log.posted).to.have.length(1);
    expect(await readFile(join(stateDirectory, `${ORIGIN.replace(/\//g, '_')}.checkpoint`), 'utf8')).to.equal(kept);
  });

  it('refuses a tree that replaces leaves the kept one had, even when it is larger', async () => {
    log.add(4);
    await once();
    log.leaves[1] = Buffer.from('{"n":"rewritten"}');
    log.add(4);
    const outcome = await once();
    expect(outcome).to.include({ kind: 'refused' });
  });

  it('refuses a checkpoint the log’s key did not sign, or of another origin, before asking for any proof', async () => {
    log.add(2);
    log.offered = log.checkpoint(log.leaves, ORIGIN, generateKeyPairSync('ed25519').privateKey);
    const unsigned = await once();
    expect(unsigned).to.include({ kind: 'refused' });
    expect((unsigned as { reason: string }).reason).to.match(/^the checkpoint is not the log's: /);
    log.offered = log.checkpoint(log.leaves, 'audit.example/other');
    expect(await once()).to.include({
      kind: 'refused',
      reason: `the checkpoint's origin audit.example/other is not the log's (${ORIGIN})`,
    });
    expect(log.posted).to.deep.equal([]);
  });
});
