/**
 * What narrows the trail: the search box, always in view; the filters, folded away on a small screen (open
 * on a large one), with the tenant's actions to pick from and shortcuts for the time range; and the active
 * filters as chips, each removable, with "Clear all".
 */
import { useEffect, useState } from 'preact/hooks';
import type { PortalApi } from '../api.ts';
import { isoToLocalInput, timeZone } from '../time.ts';
import { chipsOf, familiesOf, filtersFrom, withoutEmpty, type Filters } from './filters.ts';

/** Wide enough for the filters to stay open beside the list (the stylesheet's breakpoint). */
const WIDE = '(min-width: 48rem)';

const RANGES: ReadonlyArray<[label: string, hours: number]> = [
  ['Last hour', 1],
  ['Last 24 hours', 24],
  ['Last 7 days', 24 * 7],
  ['Last 30 days', 24 * 30],
];

export function TrailFilters(props: { api: PortalApi; filters: Filters; onChange: (filters: Filters) => void }) {
  const { filters, onChange } = props;
  const [actions, setActions] = useState<string[]>([]);
  // Changed whenever the filters change from outside the form (a chip, a shortcut): the form is drawn anew
  // with their values.
  const [version, setVersion] = useState(0);
  useEffect(() => {
    props.api.listActions().then(setActions, () => undefined);
  }, [props.api]);

  const change = (next: Filters) => {
    setVersion(version + 1);
    onChange(withoutEmpty(next));
  };
  const apply = (event: Event) => {
    event.preventDefault();
    onChange(filtersFrom(event.currentTarget as HTMLFormElement, filters.q));
  };
  const search = (event: Event) => {
    event.preventDefault();
    const q = String(new FormData(event.currentTarget as HTMLFormElement).get('q') ?? '').trim();
    change({ ...filters, q: q || undefined });
  };
  const lastHours = (hours: number) =>
    change({ ...filters, since: new Date(Date.now() - hours * 3_600_000).toISOString(), until: undefined });
  const chips = chipsOf(filters);
  const typedAction =
    filters.action ?? (filters.action_prefix?.endsWith('.') ? filters.action_prefix : filters.action_prefix && `${filters.action_prefix}*`);

  return (
    <div class="finder">
      <search>
        <form class="search" onSubmit={search} key={`search-${version}`}>
          <label for="trail-q" class="visually-hidden">
            Search the trail
          </label>
          <input
            id="trail-q"
            name="q"
            type="search"
            defaultValue={filters.q ?? ''}
            placeholder="Search ids, actions, users, resources"
            autocomplete="off"
            spellcheck={false}
            maxLength={100}
          />
          <button type="submit">Search</button>
        </form>
      </search>
      <details class="fold" open={matchMedia(WIDE).matches}>
        <summary>Filters{chips.length > 0 ? ` · ${chips.length} active` : ''}</summary>
        <form class="filters" onSubmit={apply} aria-label="Filters" key={`filters-${version}`}>
          <label>
            Action (or a family: phi.)
            <input name="action" list="trail-actions" defaultValue={typedAction ?? ''} placeholder="phi.read" autocomplete="off" />
          </label>
          <datalist id="trail-actions">
            {[...familiesOf(actions), ...actions].map((action) => (
              <option key={action} value={action} />
            ))}
          </datalist>
          <label>
            Resource type
            <input name="resource_type" defaultValue={filters.resource_type ?? ''} placeholder="patient_record" autocomplete="off" />
          </label>
          <label>
            Resource id
            <input name="resource_id" defaultValue={filters.resource_id ?? ''} autocomplete="off" />
          </label>
          <label>
            User id
            <input name="user_id" defaultValue={filters.user_id ?? ''} autocomplete="off" />
          </label>
          <label>
            PHI
            <select name="phi_involved" defaultValue={filters.phi_involved ?? ''}>
              <option value="">Any</option>
              <option value="true">PHI only</option>
              <option value="false">Without PHI</option>
            </select>
          </label>
          <fieldset class="range">
            <legend>Time range, in {timeZone()}</legend>
            <label>
              From
              <input name="since" type="datetime-local" step="1" defaultValue={isoToLocalInput(filters.since)} />
            </label>
            <label>
              Until
              <input name="until" type="datetime-local" step="1" defaultValue={isoToLocalInput(filters.until)} />
            </label>
            <div class="shortcuts">
              {RANGES.map(([label, hours]) => (
                <button key={label} type="button" class="secondary small" onClick={() => lastHours(hours)}>
                  {label}
                </button>
              ))}
            </div>
          </fieldset>
          <button type="submit">Apply filters</button>
        </form>
      </details>
      {chips.length > 0 && (
        <ul class="chips" aria-label="Active filters">
          {chips.map((chip) => (
            <li key={chip.name} class="chip">
              <span>{chip.text}</span>
              <button
                type="button"
                class="chip-remove"
                aria-label={`Remove ${chip.text}`}
                onClick={() => change({ ...filters, [chip.name]: undefined })}
              >
                ×
              </button>
            </li>
          ))}
          <li>
            <button type="button" class="link" onClick={() => change({})}>
              Clear all
            </button>
          </li>
        </ul>
      )}
    </div>
  );
}
