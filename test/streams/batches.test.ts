import { gunzipSync } from 'node:zlib';
import { expect } from 'chai';
import { cutBatches } from '../../src/streams/batches.ts';
import type { JsonWriter } from '../../src/streams/destinations/destination.ts';
import { DatadogItems, HecItems, type ItemEncoder } from '../../src/streams/destinations/itemEncoders.ts';
import type { EventRecord, StreamRecord } from '../../src/streams/records.ts';

const span = { streamId: 'str_batches', tenantId: 'tenant-a', firstLeaf: 100, lastLeaf: 199 };

/**
 * Records of the given leaves whose JSON is written from a shared cursor, as a stream's are from the rows of a
 * chunk: writing one after the generator has moved on throws, so a cutter that kept a record past its row fails.
 */
function* cursorRecords(leaves: readonly number[]): Generator<EventRecord> {
  let current = -1;
  for (const leaf of leaves) {
    current = leaf;
    const json = `{"event_id":"e-${leaf}","ünïcødé":"🩺","leaf_index":${leaf}}`;
    const writer: JsonWriter = {
      byteLength: Buffer.byteLength(json),
      writeTo: (target, at) => {
        if (current !== leaf) throw new Error(`leaf ${leaf} written after the cursor moved to ${current}`);
        return at + target.write(json, at);
      },
    };
    yield {
      kind: 'event',
      tenantId: 'tenant-a',
      leafIndex: leaf,
      timestampMs: Date.UTC(2026, 10, 2) + leaf,
      action: 'phi.read',
      json: writer,
    };
  }
}

const head: StreamRecord = {
  kind: 'tree_head',
  tenantId: 'tenant-a',
  leafIndex: 100,
  timestampMs: Date.UTC(2026, 10, 2),
  action: undefined,
  json: '{"tree_head":{"tree_size":200}}',
};

const hec = new HecItems({}, 'native');
const datadog = new DatadogItems({}, 'native');

/** What a gzipped body holds: HEC's items are lines, Datadog's a JSON array. */
function entriesOf(encoder: ItemEncoder, text: string): Array<{ event?: { leaf_index?: number }; audit?: { leaf_index?: number } }> {
  return encoder === hec ? text.split('\n').map((line) => JSON.parse(line)) : JSON.parse(text);
}

describe('stream batches', () => {
  for (const encoder of [hec, datadog] as ItemEncoder[]) {
    const name = encoder === hec ? 'HEC' : 'Datadog';

    it(`cuts ${name} batches within the limits, each led by the head, covering every leaf once and in order`, () => {
      // Leaves 100..199 with every third filtered out; a dozen items a batch by bytes, or 7 by count.
      const leaves = Array.from({ length: 100 }, (_, index) => 100 + index).filter((leaf) => leaf % 3 !== 0);
      for (const limits of [
        { maxItems: 7, maxBytes: 1_000_000 },
        { maxItems: 10_000, maxBytes: 3_000 },
      ]) {
        const batches = cutBatches(encoder, limits, span, cursorRecords(leaves), head);
        expect(batches.length).to.be.greaterThan(2);
        let next = span.firstLeaf;
        const sent: number[] = [];
        for (const { encoded, events } of batches) {
          expect(encoded.firstLeaf).to.equal(next);
          next = encoded.lastLeaf + 1;
          const text = gunzipSync(encoded.body).toString('utf8');
          expect(Buffer.byteLength(text)).to.be.at.most(limits.maxBytes);
          const entries = entriesOf(encoder, text);
          expect(entries.length).to.be.at.most(limits.maxItems + 1);
          expect(entries.length).to.equal(events + 1);
          expect(JSON.stringify(entries[0])).to.contain('tree_head');
          const carried = entries.slice(1).map((entry) => (entry.event ?? entry.audit)!.leaf_index!);
          for (const leaf of carried) expect(leaf).to.be.within(encoded.firstLeaf, encoded.lastLeaf);
          sent.push(...carried);
        }
        // The last batch takes the filtered-out leaves after its last record.
        expect(next).to.equal(span.lastLeaf + 1);
        expect(sent).to.deep.equal(leaves);
      }
    });
  }

  it('gives a record that does not fit to the next batch, written while its row is still the current one', () => {
    const batches = cutBatches(hec, { maxItems: 2, maxBytes: 1_000_000 }, span, cursorRecords([100, 101, 102, 150]), undefined);
    expect(batches.map(({ encoded, events }) => [encoded.firstLeaf, encoded.lastLeaf, events])).to.deep.equal([
      [100, 101, 2],
      [102, 199, 2],
    ]);
  });

  it('makes no batch of a chunk whose events were all filtered out', () => {
    expect(cutBatches(hec, hec.limits, span, cursorRecords([]), head)).to.deep.equal([]);
    expect(cutBatches(datadog, datadog.limits, span, [], undefined)).to.deep.equal([]);
  });

  it('puts a record over the byte limit alone in a batch rather than dropping it', () => {
    const batches = cutBatches(hec, { maxItems: 100, maxBytes: 10 }, span, cursorRecords([100, 101]), undefined);
    expect(batches.map(({ encoded, events }) => [encoded.firstLeaf, encoded.lastLeaf, events])).to.deep.equal([
      [100, 100, 1],
      [101, 199, 1],
    ]);
  });
});
