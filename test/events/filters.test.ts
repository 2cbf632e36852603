import { expect } from 'chai';
import { canonicalFilters, filterFieldsSchema, toEventFilters, type FilterFields } from '../../src/events/eventFilters.ts';

describe('the canonical form of the filters, which binds a cursor to them', () => {
  it("keeps the text today's filters have always had, so that cursors in flight survive a deploy", () => {
    expect(canonicalFilters({})).to.equal('[null,null,null,null,null]');
    expect(canonicalFilters({ action: 'phi.read', resourceType: 'claim', phiInvolved: false, sinceMs: 1, untilMs: 2 })).to.equal(
      '["phi.read","claim",false,1,2]',
    );
  });

  it('changes with every filter of the schema, so a new filter cannot be left out of it', () => {
    const unfiltered = canonicalFilters({});
    const forms = Object.entries(filterFieldsSchema).map(([name, schema]) => {
      // Each filter documents an example value (the OpenAPI document shows it); a new one must too.
      const example = schema.meta()?.example;
      expect(example, `filter ${name} has no example`).not.to.equal(undefined);
      const canonical = canonicalFilters(toEventFilters({ [name]: example } as FilterFields));
      expect(canonical, `filter ${name} is missing from the canonical form`).not.to.equal(unfiltered);
      return canonical;
    });
    expect(new Set(forms).size).to.equal(Object.keys(filterFieldsSchema).length);
  });

  it('writes the filters added later only when given, so that cursors issued before them keep working', () => {
    expect(canonicalFilters({ action: 'phi.read' })).to.equal('["phi.read",null,null,null,null]');
    expect(canonicalFilters({ userId: 'u-1' })).to.equal('[null,null,null,null,null,"u-1"]');
    expect(canonicalFilters({ resourceId: 'u-1' })).to.equal('[null,null,null,null,null,null,"u-1"]');
    expect(canonicalFilters({ userId: 'u-1', resourceId: 'r-1' })).to.equal('[null,null,null,null,null,"u-1","r-1"]');
    expect(canonicalFilters({ actionPrefix: 'phi.' })).to.equal('[null,null,null,null,null,null,null,"phi."]');
  });

  it("binds a cursor to the list's search too, apart from every filter", () => {
    expect(canonicalFilters({ search: 'u-1' })).to.equal('[null,null,null,null,null,null,null,null,"u-1"]');
    expect(canonicalFilters({ search: 'u-1' })).not.to.equal(canonicalFilters({ userId: 'u-1' }));
  });

  it('tells false from an absent boolean filter', () => {
    expect(canonicalFilters({ phiInvolved: false })).not.to.equal(canonicalFilters({}));
  });
});
