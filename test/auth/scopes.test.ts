import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { isScope, SCOPES } from '../../src/auth/scopes.ts';

describe('API key scopes', () => {
  it('are the scopes docs/api.md documents, no more and no fewer', () => {
    const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const table = doc.slice(doc.indexOf('| Scope | Allows |'));
    const documented = [...table.slice(0, table.indexOf('\n\n')).matchAll(/^\| `([a-z:]+)` \|/gm)].map((match) => match[1]);
    expect([...documented].sort()).to.deep.equal([...SCOPES].sort());
  });

  it('recognises each scope exactly: no case folding, no prefixes, no wildcards', () => {
    for (const scope of SCOPES) expect(isScope(scope), scope).to.equal(true);
    for (const text of ['AUDIT:READ', 'audit:', 'audit:*', '*', 'audit:read ', 'audit:write', ''])
      expect(isScope(text), JSON.stringify(text)).to.equal(false);
  });
});
