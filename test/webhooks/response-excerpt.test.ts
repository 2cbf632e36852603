import { expect } from 'chai';
import { RESPONSE_EXCERPT_BYTES, responseExcerpt } from '../../src/webhooks/responseExcerpt.ts';

/** What an attempt record keeps of a receiver's answer (docs/webhooks.md), written to a text column. */
describe('the excerpt of a receiver’s response kept with an attempt', () => {
  it('keeps a short body as it is, and nothing of an empty one', () => {
    expect(responseExcerpt(Buffer.from('{"error":"invalid signature"}'))).to.equal('{"error":"invalid signature"}');
    expect(responseExcerpt(Buffer.alloc(0))).to.equal('');
  });

  it('keeps at most 1 KiB, cut at a character boundary rather than through one', () => {
    const body = Buffer.from(`${'a'.repeat(RESPONSE_EXCERPT_BYTES - 1)}€ and more`);
    const excerpt = responseExcerpt(body);
    expect(excerpt).to.equal('a'.repeat(RESPONSE_EXCERPT_BYTES - 1));
    expect(Buffer.byteLength(responseExcerpt(Buffer.alloc(10_000, 'x')))).to.equal(RESPONSE_EXCERPT_BYTES);
  });

  it('replaces bytes that are not UTF-8, and NULs (which Postgres text refuses), with U+FFFD', () => {
    expect(responseExcerpt(Buffer.from([0x6f, 0x6b, 0xff, 0x00, 0x21]))).to.equal('ok\uFFFD\uFFFD!');
  });

  it('stays within 1 KiB when replacement characters grow a binary body', () => {
    const excerpt = responseExcerpt(Buffer.alloc(RESPONSE_EXCERPT_BYTES, 0xff));
    expect(Buffer.byteLength(excerpt)).to.be.at.most(RESPONSE_EXCERPT_BYTES);
    expect(excerpt).to.match(/^\uFFFD+$/);
  });
});
