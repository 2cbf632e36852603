import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { runVerify } from '../../src/client/cli/verifyCommand.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { newEvent } from '../support/newEvents.ts';
import { seedEvents } from '../support/events.ts';
import { sealKeyPair, startTestSealer, type TestSealer } from '../support/integrity.ts';
import { call, mintKey, startTestService, type TestService } from '../support/service.ts';

/** Collects what a stream is sent, as text. */
function sink(): Writable & { text(): string } {
  let text = '';
  const stream = new Writable({
    write(chunk, _encoding, done) {
      text += String(chunk);
      done();
    },
  });
  return Object.assign(stream, { text: () => text });
}

/**
 * `verify --complete` on a whole trail exported in pages: 10,001 events are two pages (the cap is 10,000),
 * and the first page's own audit.export event is sealed before the second page is asked for, so the
 * second page's latest head is newer than the first's and holds a leaf no page carries.
 */
describe('verify --complete on a trail exported in pages across a sealing', function () {
  this.timeout(180_000);
  const EVENTS = 10_001;
  const T0 = Date.now() - 86_400_000;
  let db: TestDatabase;
  let api: TestService;
  let sealer: TestSealer;
  let key: string;
  let directory: string;
  let publicKeyFile: string;
  const seal = sealKeyPair();

  before(async () => {
    db = await createTestDatabase();
    directory = await mkdtemp(join(tmpdir(), 'paged-export-'));
    publicKeyFile = join(directory, 'public.pem');
    await writeFile(publicKeyFile, seal.publicPem);
    // One event per millisecond: the first page ends at exactly 10,000 events.
    await seedEvents(
      db.url,
      Array.from({ length: EVENTS }, (_, index) => newEvent({ tenantId: 'paged', occurredAtMs: T0 + index })),
    );
    key = (await mintKey(db.url, { tenantId: 'paged', scopes: ['audit:read', 'audit:export'] })).key;
    sealer = await startTestSealer(db.url, seal.privateKey);
    await sealer.sealNow();
    api = await startTestService({ databaseUrl: db.url, roles: ['api'] });
  });

  after(async () => {
    await api?.stop();
    await sealer?.close();
    await db?.drop();
    if (directory) await rm(directory, { recursive: true, force: true });
  });

  /** The documented walk: page after page with until = the last timestamp, with proofs; NDJSON lines. */
  async function exportInPages(pin: boolean): Promise<{ lines: string[]; heads: number[] }> {
    const lines: string[] = [];
    const heads: number[] = [];
    let until: string | undefined;
    for (let page = 0; page < 5; page += 1) {
      const query = `format=ndjson&proofs=true${pin && heads[0] !== undefined ? `&tree_size=${heads[0]}` : ''}`;
      const response = await call(`${api.baseUrl}/audit/export?${query}`, { key, body: until ? { until } : {} });
      expect(response.status, response.text.slice(0, 300)).to.equal(200);
      const pageLines = response.text.trimEnd().split('\n');
      lines.push(...pageLines);
      heads.push(JSON.parse(pageLines[0]!).tree_head.tree_size);
      if (response.headers.get('x-service-truncated') !== 'true') break;
      until = JSON.parse(pageLines.at(-1)!).timestamp;
      // The page's audit.export event becomes a leaf before the next page is asked for.
      await sealer.sealNow();
    }
    return { lines, heads };
  }

  async function verify(lines: string[], ...extra: string[]): Promise<{ code: number; out: string; err: string }> {
    const file = join(directory, `export-${Math.random().toString(16).slice(2)}.ndjson`);
    await writeFile(file, `${lines.join('\n')}\n`);
    const [out, err] = [sink(), sink()];
    const code = await runVerify(['--export', file, '--public-key', publicKeyFile, '--complete', ...extra], out, err);
    return { code, out: out.text(), err: err.text() };
  }

  it('accepts pages proven against the first page’s head (tree_size), whose leaves the pages hold every one of', async () => {
    const { lines, heads } = await exportInPages(true);
    expect(lines).to.have.length(EVENTS + 1); // and the key's admin.key.create event
    expect(heads).to.have.length(2);
    expect(heads[1]).to.equal(heads[0]);
    const result = await verify(lines);
    expect(result.err).to.equal('');
    expect(result.code).to.equal(0);
    expect(result.out).to.match(
      new RegExp(`^verified: ${EVENTS + 1} events, ${EVENTS + 1} proven against the tree head of size ${heads[0]}`),
    );
  });

  it('accepts pages with heads of their own once consistency proofs link them, and asks for the proof until then', async () => {
    const { lines, heads } = await exportInPages(false);
    expect(heads[1]).to.be.greaterThan(heads[0]!);
    const withoutProof = await verify(lines);
    expect(withoutProof.code).to.equal(1);
    expect(withoutProof.err).to.include(`no consistency proof between sizes ${heads[0]} and ${heads[1]}`);
    expect(withoutProof.err).not.to.include('lacks the events of leaves');

    const consistency = await call(`${api.baseUrl}/audit/integrity/consistency?first=${heads[0]}&second=${heads[1]}`, { key });
    expect(consistency.status).to.equal(200);
    const proofFile = join(directory, 'consistency.json');
    await writeFile(proofFile, consistency.text);
    const result = await verify(lines, '--consistency', proofFile);
    expect(result.err).to.equal('');
    expect(result.code).to.equal(0);
  });

  it('still names the missing leaf when a page lacks an event', async () => {
    const { lines } = await exportInPages(true);
    const dropped = lines.splice(4_321, 1)[0]!;
    const result = await verify(lines);
    expect(result.code).to.equal(1);
    expect(result.err).to.match(new RegExp(`lacks the events of leaves ${JSON.parse(dropped).proof.leaf_index} of the tree head of size`));
  });

  it('refuses tree_size without proofs, and a size no head has', async () => {
    const plain = await call(`${api.baseUrl}/audit/export?tree_size=5`, { key, body: {} });
    expect(plain.status).to.equal(422);
    expect(plain.json.details[0].field).to.equal('tree_size');
    const unknown = await call(`${api.baseUrl}/audit/export?proofs=true&tree_size=3`, { key, body: {} });
    expect(unknown.status).to.equal(404);
    expect(unknown.json.error).to.equal('not_found');
  });
});
