import { expect } from 'chai';
import { redactedLeafVerdict } from '../../src/integrity/redactedLeaf.ts';

const LEAF = 'cd'.repeat(32);
const SERVED = `{"event_id":"e-1","justification":"[redacted]","redaction":{"fields":["justification"],"leaf_hash":"${LEAF}"}}`;

// The integrity check's reading of a document served as redacted: its content no longer hashes to its leaf.
describe('the integrity check of a redacted leaf', () => {
  it('passes a document that is not served as redacted to the ordinary check', () => {
    expect(redactedLeafVerdict('{"event_id":"e-1","justification":"care"}', LEAF, false)).to.deep.equal({ redacted: false });
    // The member's text inside a value is no member: quotes in values are escaped.
    expect(redactedLeafVerdict('{"event_id":"e-1","details":"x,\\"redaction\\":{"}', LEAF, true)).to.deep.equal({ redacted: false });
  });

  it('accepts a recorded redaction carrying its leaf’s hash, giving the document without its member', () => {
    expect(redactedLeafVerdict(SERVED, LEAF, true)).to.deep.equal({
      redacted: true,
      unredacted: '{"event_id":"e-1","justification":"[redacted]"}',
    });
  });

  it('fails one with another leaf’s hash, or that no redaction record produced', () => {
    expect(redactedLeafVerdict(SERVED, 'ef'.repeat(32), true)).to.deep.equal({
      redacted: true,
      problem: 'it is served as redacted with a leaf hash that is not its leaf',
    });
    expect(redactedLeafVerdict(SERVED, LEAF, false)).to.deep.equal({
      redacted: true,
      problem: 'it is served as redacted, but no redaction record produced this form',
    });
  });

  it('fails a redaction member whose fields do not hold the marker', () => {
    const altered = SERVED.replace('"justification":"[redacted]"', '"justification":"changed"');
    expect(redactedLeafVerdict(altered, LEAF, true)).to.deep.equal({
      redacted: true,
      problem: 'it is served as redacted, but it claims justification is redacted but does not hold the marker there',
    });
  });
});
