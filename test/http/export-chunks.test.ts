import { expect } from 'chai';
import { ExportChunks } from '../../src/http/exportChunks.ts';

/** Appends each row's texts, collecting the chunks handed back and the rest, as the export route does. */
function gather(chunks: ExportChunks, rows: string[][]): Buffer[] {
  const sent: Buffer[] = [];
  for (const [first, second, third] of rows) {
    const full = chunks.append(first!, second, third);
    if (full !== undefined) sent.push(full);
  }
  sent.push(chunks.rest());
  return sent;
}

describe('ExportChunks', () => {
  it('sends every byte of every row, in order, in chunks no bigger than asked', () => {
    const rows = Array.from({ length: 500 }, (_, i) => [`{"n":${i},"text":"${'x'.repeat(i % 37)}"}`, '\n']);
    const sent = gather(new ExportChunks(256), rows);
    expect(Buffer.concat(sent).toString('utf8')).to.equal(rows.map((row) => row.join('')).join(''));
    expect(sent.length).to.be.above(10);
    for (const chunk of sent) expect(chunk.length).to.be.at.most(256);
  });

  it('counts bytes, not characters: rows of multi-byte text are neither cut nor overlapped', () => {
    const rows = Array.from({ length: 200 }, (_, i) => [',', `{"name":"Zoë ${i} 日本語 🙂"}`]);
    const sent = gather(new ExportChunks(100), rows);
    expect(Buffer.concat(sent).toString('utf8')).to.equal(rows.map((row) => row.join('')).join(''));
    // Every chunk ends on a row's end: each decodes alone.
    for (const chunk of sent) expect(Buffer.from(chunk.toString('utf8'), 'utf8').equals(chunk)).to.equal(true);
  });

  it('gives a row bigger than a chunk a chunk of its own', () => {
    const big = 'y'.repeat(1_000);
    const sent = gather(new ExportChunks(100), [['a'], [big, '\n'], ['b']]);
    expect(sent.map((chunk) => chunk.toString('utf8'))).to.deep.equal(['a', `${big}\n`, 'b']);
  });
});
