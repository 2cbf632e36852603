import { expect } from 'chai';
import { checkpointText, formatSignedNote } from '../../src/client/signedNote.ts';
import { publishStaticLog, type StaticLogSink } from '../../src/integrity/staticLog.ts';
import { tlogTilePath, type TlogTilePath } from '../../src/integrity/tlogTiles.ts';
import type { TransparencyLog } from '../../src/integrity/transparencyLog.ts';

/**
 * The log's side as publishStaticLog reads it (checkpoint, bundles' generation, tiles), answered from memory:
 * what is tested is which files a copy receives, in which order, not how the log reads its tables (static-log
 * test does that against Postgres).
 */
class LogView {
  size = 0;
  generation = 1;
  checkpoint(): Promise<string> {
    const text = checkpointText({ origin: 'audit.example/acme', size: this.size, rootHash: Buffer.alloc(32, this.size % 256) });
    return Promise.resolve(formatSignedNote(text, [`\u2014 audit.example/acme ${Buffer.alloc(68).toString('base64')}`]));
  }
  bundleGeneration(): Promise<number> {
    return Promise.resolve(this.generation);
  }
  hashTile(_tenant: string, tile: TlogTilePath): Promise<{ body: Buffer }> {
    return Promise.resolve({ body: Buffer.from(`hashes ${tlogTilePath(tile)}`) });
  }
  entryBundle(_tenant: string, tile: TlogTilePath): Promise<{ body: Buffer }> {
    return Promise.resolve({ body: Buffer.from(`entries ${tlogTilePath(tile)} of generation ${this.generation}`) });
  }
}

/** A copy in memory, recording each write in order with its kind. */
class MemorySink implements StaticLogSink {
  readonly files = new Map<string, string>();
  writes: Array<[string, string]> = [];
  read(path: string): Promise<string | undefined> {
    return Promise.resolve(this.files.get(path));
  }
  write(path: string, body: Buffer, kind: 'checkpoint' | 'full' | 'partial'): Promise<void> {
    this.files.set(path, body.toString());
    this.writes.push([path, kind]);
    return Promise.resolve();
  }
}

describe('a static copy of a log, kept up incrementally', () => {
  let view: LogView;
  let sink: MemorySink;
  const publish = (everything = false) => publishStaticLog(view as unknown as TransparencyLog, 'acme', sink, everything);

  beforeEach(() => {
    view = new LogView();
    sink = new MemorySink();
  });

  it('writes every tile of a first copy, full ones marked so, then the generation and the checkpoint last', async () => {
    view.size = 300;
    expect(await publish()).to.deep.equal({ size: 300, previousSize: 0, files: 7 });
    expect(sink.writes).to.deep.equal([
      ['tile/0/000', 'full'],
      ['tile/entries/000', 'full'],
      ['tile/0/001.p/44', 'partial'],
      ['tile/entries/001.p/44', 'partial'],
      ['tile/1/000.p/1', 'partial'],
      ['bundle-generation', 'checkpoint'],
      ['checkpoint', 'checkpoint'],
    ]);
    expect(sink.files.get('checkpoint')).to.equal(await view.checkpoint());
  });

  it('writes afterwards only the tiles completed since and the new partial ones', async () => {
    view.size = 300;
    await publish();
    sink.writes = [];
    view.size = 520;
    expect(await publish()).to.deep.equal({ size: 520, previousSize: 300, files: 7 });
    expect(sink.writes.map(([path]) => path)).to.deep.equal([
      'tile/0/001',
      'tile/entries/001',
      'tile/0/002.p/8',
      'tile/entries/002.p/8',
      'tile/1/000.p/2',
      'bundle-generation',
      'checkpoint',
    ]);
  });

  it('writes every full bundle again once a redaction or an expiry moved the bundles’ generation on', async () => {
    view.size = 600;
    await publish();
    sink.writes = [];
    view.generation = 2;
    await publish();
    // The full bundles again; the partial tiles of the size as at every publication.
    expect(sink.writes.map(([path]) => path)).to.deep.equal([
      'tile/entries/000',
      'tile/entries/001',
      'tile/0/002.p/88',
      'tile/entries/002.p/88',
      'tile/1/000.p/2',
      'bundle-generation',
      'checkpoint',
    ]);
    expect(sink.files.get('tile/entries/000')).to.equal('entries entries/000 of generation 2');
    expect(sink.files.get('bundle-generation')).to.equal('2\n');
  });

  it('writes everything again when told to, whatever the copy holds', async () => {
    view.size = 300;
    await publish();
    sink.writes = [];
    expect(await publish(true)).to.include({ previousSize: 0, files: 7 });
  });
});
