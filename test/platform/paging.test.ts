import { expect } from 'chai';
import { ValidationError } from '../../src/platform/errors.ts';
import { checkTimeWindow, pageOf, rowsToRead } from '../../src/platform/paging.ts';

/** Rows newest first, as the lists keep them; a cursor is the last row's position. */
const ROWS = [90, 80, 70, 60, 50, 40, 30, 20, 10, 0];

/** What a store does with a cursor and a read size: the rows after the position, at most `count`. */
const read = (after: number | undefined, count: number) => ROWS.filter((row) => after === undefined || row < after).slice(0, count);

describe('paging', () => {
  it('walks a list page by page, every row once and in order, following next_cursor until has_more is false', () => {
    for (const limit of [1, 3, 4, 5, 10, 11]) {
      const seen: number[] = [];
      let cursor: string | undefined;
      let pages = 0;
      for (;;) {
        const { rows, page } = pageOf(read(cursor === undefined ? undefined : Number(cursor), rowsToRead(limit)), limit, String);
        seen.push(...rows);
        pages += 1;
        expect(page.limit).to.equal(limit);
        expect(page.returned).to.equal(rows.length);
        expect(page.next_cursor === null).to.equal(!page.has_more);
        if (!page.has_more) break;
        cursor = page.next_cursor!;
      }
      expect(seen, `limit ${limit}`).to.deep.equal(ROWS);
      expect(pages, `limit ${limit}`).to.equal(Math.max(1, Math.ceil(ROWS.length / limit)));
    }
  });

  it('names the page’s last row in the cursor, never the row read past it', () => {
    const { rows, page } = pageOf([9, 8, 7, 6], 3, (last) => `after-${last}`);
    expect(rows).to.deep.equal([9, 8, 7]);
    expect(page).to.deep.equal({ limit: 3, returned: 3, next_cursor: 'after-7', has_more: true });
  });

  it('says there is no more when exactly a page came back, and encodes no cursor for the last page', () => {
    const encoded: number[] = [];
    const cursorAfter = (last: number) => {
      encoded.push(last);
      return String(last);
    };
    expect(pageOf([3, 2, 1], 3, cursorAfter).page).to.deep.equal({ limit: 3, returned: 3, next_cursor: null, has_more: false });
    expect(pageOf([], 3, cursorAfter).page).to.deep.equal({ limit: 3, returned: 0, next_cursor: null, has_more: false });
    expect(encoded).to.deep.equal([]);
  });

  it('reads one row past the page', () => {
    expect(rowsToRead(1)).to.equal(2);
    expect(rowsToRead(1000)).to.equal(1001);
  });
});

describe('checkTimeWindow', () => {
  const refusal = (sinceMs: number | undefined, untilMs: number | undefined) => {
    try {
      checkTimeWindow(sinceMs, untilMs);
      return undefined;
    } catch (error) {
      return error;
    }
  };

  it('refuses an empty window, since at or after until, with a 422 on since', () => {
    for (const [since, until] of [
      [1000, 1000],
      [2000, 1000],
    ] as const) {
      const error = refusal(since, until);
      expect(error).to.be.instanceOf(ValidationError);
      expect((error as ValidationError).status).to.equal(422);
      expect((error as ValidationError).details).to.deep.equal([{ field: 'since', message: 'must be earlier than until' }]);
    }
  });

  it('accepts since before until, and either end alone', () => {
    expect(refusal(999, 1000)).to.equal(undefined);
    expect(refusal(1000, undefined)).to.equal(undefined);
    expect(refusal(undefined, 1000)).to.equal(undefined);
    expect(refusal(undefined, undefined)).to.equal(undefined);
  });
});
