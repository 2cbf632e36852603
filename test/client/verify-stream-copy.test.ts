import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { runVerify } from '../../src/client/cli/verifyCommand.ts';
import { eventLeafHash } from '../../src/client/integrity.ts';
import { TreeHeadSigner } from '../../src/integrity/treeHeadSigner.ts';
import { sealKeyPair } from '../support/integrity.ts';

/**
 * `verify --stream-copy` on copies as they are kept (docs/streams.md "Checking a SIEM copy"): the many
 * objects of a bucket, passed as the shell expands `objects/*.ndjson.gz`, and copies of any size, checkable
 * or not. Offline: no service, the heads signed here with a key of the test's own.
 */
describe('verify --stream-copy: any number of files, a copy of any size', function () {
  this.timeout(120_000);
  const keys = sealKeyPair();
  const signer = new TreeHeadSigner(keys.privateKey);
  let directory: string;

  before(() => {
    directory = mkdtempSync(join(tmpdir(), 'stream-copy-'));
    writeFileSync(join(directory, 'audit-public.pem'), keys.publicPem);
  });

  after(() => rmSync(directory, { recursive: true, force: true }));

  /** Native records of `count` events of tenant acme from leaf `first` on. */
  function records(first: number, count: number): Array<Record<string, unknown>> {
    return Array.from({ length: count }, (_, offset) => ({
      event_id: `00000000-0000-4000-8000-${String(first + offset).padStart(12, '0')}`,
      tenant_id: 'acme',
      action: 'phi.read',
      timestamp: '2026-12-01T00:00:00.000Z',
      leaf_index: first + offset,
    }));
  }

  /** RFC 9162 §2.1.1 over the leaf hashes, written out here rather than taken from the verifier. */
  function merkleRoot(leaves: Buffer[]): Buffer {
    if (leaves.length === 1) return leaves[0]!;
    let split = 1;
    while (split * 2 < leaves.length) split *= 2;
    const node = Buffer.concat([Buffer.from([1]), merkleRoot(leaves.slice(0, split)), merkleRoot(leaves.slice(split))]);
    return createHash('sha256').update(node).digest();
  }

  function signedHead(events: Array<Record<string, unknown>>) {
    const leaves = events.map(({ leaf_index: _leaf, ...event }) => Buffer.from(eventLeafHash(event), 'hex'));
    return signer.sign({
      tenant_id: 'acme',
      tree_size: events.length,
      root_hash: merkleRoot(leaves).toString('hex'),
      timestamp: '2026-12-01T00:00:01.000Z',
    });
  }

  /** Writes the lines as `files` gzipped objects, the way an S3 destination keeps a stream. */
  function writeObjects(name: string, lines: string[], files: number): string[] {
    const paths: string[] = [];
    const per = Math.ceil(lines.length / files);
    for (let index = 0; index < files; index += 1) {
      const path = join(directory, `${name}-${String(index).padStart(5, '0')}.ndjson.gz`);
      writeFileSync(path, gzipSync(`${lines.slice(index * per, (index + 1) * per).join('\n')}\n`));
      paths.push(path);
    }
    return paths;
  }

  async function verify(args: string[]): Promise<{ code: number; out: string; err: string }> {
    const seen = { out: '', err: '' };
    const sink = (which: 'out' | 'err') =>
      new Writable({
        write(chunk, _encoding, done) {
          seen[which] += String(chunk);
          done();
        },
      });
    const code = await runVerify(args, sink('out'), sink('err'), 'audit-trail');
    return { code, ...seen };
  }

  it('verifies 2,000 objects passed as the shell expands objects/*.ndjson.gz after one --stream-copy', async () => {
    const events = records(0, 4_000);
    const lines = [...events.map((event) => JSON.stringify(event)), JSON.stringify({ tree_head: signedHead(events) })];
    const [first, ...rest] = writeObjects('whole', lines, 2_000);
    const result = await verify(['--stream-copy', first!, ...rest, '--public-key', join(directory, 'audit-public.pem')]);
    expect(result.err).to.equal('');
    expect(result.out).to.match(/^verified: 4001 records; tenant acme: 4000 events \(4000 proven against the tree head of size 4000/);
    expect(result.code).to.equal(0);
  });

  it('finds a changed event among the objects', async () => {
    const events = records(0, 64);
    const head = signedHead(events);
    const changed = events.map((event) => (event.leaf_index === 40 ? { ...event, action: 'phi.write' } : event));
    const paths = writeObjects('changed', [...changed.map((event) => JSON.stringify(event)), JSON.stringify({ tree_head: head })], 8);
    const result = await verify(['--stream-copy', ...paths, '--public-key', join(directory, 'audit-public.pem')]);
    expect(result.err).to.include('do not reproduce the root of the tree head of size 64');
    expect(result.code).to.equal(1);
  });

  it('explains an uncheckable copy of 200,000 leaves that does not start at leaf 0, without overflowing the stack', async () => {
    const events = records(1, 200_000);
    const paths = writeObjects(
      'partial',
      events.map((event) => JSON.stringify(event)),
      20,
    );
    // One --stream-copy per file, the form the old command took too: only the size is under test here.
    const result = await verify([...paths.flatMap((path) => ['--stream-copy', path]), '--public-key', join(directory, 'audit-public.pem')]);
    expect(result.err).to.include('nothing could be verified: the copy starts at leaf 1, not at the tenant');
    expect(result.err).not.to.include('call stack');
    expect(result.code).to.equal(1);
  });

  it('names a file it cannot read (exit 2), and takes stray files only after --stream-copy', async () => {
    const missing = join(directory, 'missing.ndjson.gz');
    const unreadable = await verify(['--stream-copy', missing, '--public-key', join(directory, 'audit-public.pem')]);
    expect(unreadable.code).to.equal(2);
    expect(unreadable.err).to.include(missing);
    const stray = await verify(['--export', missing, 'other.ndjson', '--public-key', join(directory, 'audit-public.pem')]);
    expect(stray.code).to.equal(2);
    expect(stray.err).to.include('usage:');
  });
});
