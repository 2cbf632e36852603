import { expect } from 'chai';
import {
  bundleLeaves,
  composeHashTile,
  encodeEntryBundle,
  storedTilesOf,
  tileExists,
  tilesBetween,
  tlogTilePath,
} from '../../src/integrity/tlogTiles.ts';

// C2SP tlog-tiles: which tiles a tree has, which stored tiles of 16 make one of 256, and the bundle encoding.
describe('tlog-tiles arithmetic', () => {
  it('says a full tile exists once its 256 hashes do, and a partial one once its first W do', () => {
    expect(tileExists({ level: 0, index: 0, width: 256 }, 255)).to.equal(false);
    expect(tileExists({ level: 0, index: 0, width: 256 }, 256)).to.equal(true);
    // A partial tile of an earlier size stays available: its hashes never change.
    expect(tileExists({ level: 0, index: 1, width: 10 }, 300)).to.equal(true);
    expect(tileExists({ level: 0, index: 1, width: 45 }, 300)).to.equal(false);
    // Level 1 holds one hash per 256 leaves; entry bundles count leaves as level 0 does.
    expect(tileExists({ level: 1, index: 0, width: 2 }, 511)).to.equal(false);
    expect(tileExists({ level: 1, index: 0, width: 2 }, 512)).to.equal(true);
    expect(tileExists({ level: 'entries', index: 0, width: 256 }, 256)).to.equal(true);
  });

  it('lists what a copy published at one size lacks at a larger one: completed full tiles and the new partials', () => {
    const paths = tilesBetween(300, 600).map(tlogTilePath);
    expect(paths).to.deep.equal(['0/001', 'entries/001', '0/002.p/88', 'entries/002.p/88', '1/000.p/2']);
    expect(tilesBetween(0, 0)).to.deep.equal([]);
  });

  it('lists, from 0, a tile for every hash and leaf of the tree, each one existing at that size', () => {
    const size = 256 * 256 + 3;
    const tiles = tilesBetween(0, size);
    for (const tile of tiles) expect(tileExists(tile, size), tlogTilePath(tile)).to.equal(true);
    const leaves = tiles.filter((tile) => tile.level === 'entries').reduce((sum, tile) => sum + tile.width, 0);
    expect(leaves).to.equal(size);
  });

  it('makes a C2SP tile of level L from stored tiles of 16 of level 2L', () => {
    expect(storedTilesOf({ level: 0, index: 0, width: 256 })).to.deep.equal({ level: 0, first: 0, last: 15 });
    expect(storedTilesOf({ level: 1, index: 3, width: 256 })).to.deep.equal({ level: 2, first: 48, last: 63 });
    // A partial tile of 17 hashes needs two stored tiles, the second partly.
    expect(storedTilesOf({ level: 0, index: 2, width: 17 })).to.deep.equal({ level: 0, first: 32, last: 33 });
  });

  it('composes a hash tile of exactly W hashes from the stored ones, and none when they are short', () => {
    const stored = [Buffer.alloc(16 * 32, 1), Buffer.alloc(16 * 32, 2)];
    const tile = composeHashTile({ level: 0, index: 0, width: 17 }, stored)!;
    expect(tile.length).to.equal(17 * 32);
    expect(tile.subarray(16 * 32)).to.deep.equal(Buffer.alloc(32, 2));
    expect(composeHashTile({ level: 0, index: 0, width: 33 }, stored)).to.equal(undefined);
  });

  it('gives an entry bundle its leaves', () => {
    expect(bundleLeaves({ level: 'entries', index: 2, width: 88 })).to.deep.equal({ first: 512, count: 88 });
  });

  it('encodes a bundle as big-endian uint16 lengths before each entry, and refuses an entry over 65,535 bytes', () => {
    expect(encodeEntryBundle([Buffer.from('ab'), Buffer.alloc(0), Buffer.alloc(300, 0x78)]).subarray(0, 8)).to.deep.equal(
      Buffer.from([0, 2, 0x61, 0x62, 0, 0, 0x01, 0x2c]),
    );
    expect(encodeEntryBundle([Buffer.alloc(0xffff)]).length).to.equal(0x10001);
    expect(() => encodeEntryBundle([Buffer.alloc(0x10000)])).to.throw(RangeError, /65,535/);
  });
});
