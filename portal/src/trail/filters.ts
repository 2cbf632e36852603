/**
 * The trail's filters as the list API takes them (docs/api.md "GET /audit/events"): query parameters, each
 * optional. The form, the chips and the export all read them from here.
 */
import { formatTime, localInputToIso } from '../time.ts';

export type Filters = Readonly<Record<string, string | undefined>>;

/** Each filter a chip can show, with its label; in the order the chips appear. */
const LABELS: ReadonlyArray<[name: string, label: string]> = [
  ['q', 'Search'],
  ['action', 'Action'],
  ['action_prefix', 'Actions starting'],
  ['resource_type', 'Resource type'],
  ['resource_id', 'Resource id'],
  ['user_id', 'User id'],
  ['phi_involved', 'PHI'],
  ['since', 'From'],
  ['until', 'Until'],
];

/**
 * An action as typed: a family when it ends with a dot or a star (`phi.`, `phi.*`), matched as webhook
 * filters are (action_prefix); otherwise that exact action.
 */
function actionFilter(typed: string): { action?: string; action_prefix?: string } {
  const text = typed.trim();
  if (text === '') return {};
  if (text.endsWith('*')) return { action_prefix: text.slice(0, -1) };
  return text.endsWith('.') ? { action_prefix: text } : { action: text };
}

/** The filters of the filter form. */
export function filtersFrom(form: HTMLFormElement, q: string | undefined): Filters {
  const data = new FormData(form);
  const text = (name: string) => {
    const value = String(data.get(name) ?? '').trim();
    return value === '' ? undefined : value;
  };
  const phi = text('phi_involved');
  return withoutEmpty({
    q,
    ...actionFilter(String(data.get('action') ?? '')),
    resource_type: text('resource_type'),
    user_id: text('user_id'),
    resource_id: text('resource_id'),
    phi_involved: phi === 'true' || phi === 'false' ? phi : undefined,
    since: localInputToIso(String(data.get('since') ?? '')),
    until: localInputToIso(String(data.get('until') ?? '')),
  });
}

export function withoutEmpty(filters: Record<string, string | undefined>): Filters {
  return Object.fromEntries(Object.entries(filters).filter(([, value]) => value !== undefined && value !== ''));
}

export interface Chip {
  readonly name: string;
  readonly text: string;
}

/** The active filters as a person reads them. */
export function chipsOf(filters: Filters): Chip[] {
  return LABELS.flatMap(([name, label]) => {
    const value = filters[name];
    if (value === undefined) return [];
    if (name === 'phi_involved') return [{ name, text: value === 'true' ? 'PHI only' : 'Without PHI' }];
    if (name === 'since' || name === 'until') return [{ name, text: `${label} ${formatTime(value)}` }];
    return [{ name, text: `${label}: ${value}` }];
  });
}

/** The export takes the filters in JSON, phi_involved as a boolean; the search is the list's alone. */
export function exportBody(filters: Filters): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(filters)) {
    if (value !== undefined && name !== 'q') body[name] = name === 'phi_involved' ? value === 'true' : value;
  }
  return body;
}

/** The families an action list holds (`phi.`, `admin.user.`), for the action picker beside the actions. */
export function familiesOf(actions: readonly string[]): string[] {
  const families = new Set<string>();
  for (const action of actions) {
    const parts = action.split('.');
    for (let length = 1; length < parts.length; length += 1) families.add(`${parts.slice(0, length).join('.')}.`);
  }
  return [...families].sort();
}
