import { ApiError, type KubeObject } from './objectStore.ts';

/**
 * Label and field selectors of list and watch requests, with the API server's grammar and semantics
 * (k8s.io/apimachinery labels and fields): `a=b`, `a==b`, `a!=b` (also true when the label is absent),
 * `a in (x,y)`, `a notin (x,y)` (also true when absent), `a` (exists) and `!a` (does not exist), joined by
 * commas; field selectors only know `=`, `==` and `!=`, and only the fields the resource type supports —
 * any other field is refused with 400, as the real server does.
 */

export type Selector = (object: KubeObject) => boolean;

const everything: Selector = () => true;

/** Splits at commas outside parentheses. */
function requirements(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const character of text) {
    if (character === '(') depth += 1;
    if (character === ')') depth -= 1;
    if (character === ',' && depth === 0) {
      parts.push(current.trim());
      current = '';
    } else {
      current += character;
    }
  }
  parts.push(current.trim());
  return parts.filter((part) => part !== '');
}

function invalid(kind: 'label' | 'field', text: string, problem: string): ApiError {
  return new ApiError(400, 'BadRequest', `unable to parse requirement: ${kind} selector "${text}": ${problem}`);
}

export function parseLabelSelector(text: string | null): Selector {
  if (!text) return everything;
  const tests = requirements(text).map((requirement): Selector => {
    const labels = (object: KubeObject) => object.metadata.labels ?? {};
    let match = /^!\s*([\w./-]+)$/.exec(requirement);
    if (match) {
      const key = match[1]!;
      return (object) => !(key in labels(object));
    }
    match = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(requirement);
    if (match) {
      const [, key, operator, list] = match as unknown as [string, string, string, string];
      const values = new Set(
        list
          .split(',')
          .map((value) => value.trim())
          .filter(Boolean),
      );
      if (values.size === 0) throw invalid('label', text, `for '${operator}' operator, values set can't be empty`);
      return operator === 'in'
        ? (object) => key in labels(object) && values.has(labels(object)[key]!)
        : (object) => !(key in labels(object)) || !values.has(labels(object)[key]!);
    }
    match = /^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/.exec(requirement);
    if (match) {
      const [, key, operator, value] = match as unknown as [string, string, string, string];
      return operator === '!=' ? (object) => labels(object)[key] !== value : (object) => labels(object)[key] === value;
    }
    match = /^([\w./-]+)$/.exec(requirement);
    if (match) {
      const key = match[1]!;
      return (object) => key in labels(object);
    }
    throw invalid('label', text, `cannot parse "${requirement}"`);
  });
  return (object) => tests.every((test) => test(object));
}

/** Field paths every resource type supports. */
const METADATA_FIELDS: Record<string, (object: KubeObject) => string | undefined> = {
  'metadata.name': (object) => object.metadata.name,
  'metadata.namespace': (object) => object.metadata.namespace,
};

/** The extra field selectors of the built-in types the stand-in serves (their registry's GetAttrs). */
const TYPE_FIELDS: Record<string, Record<string, (object: KubeObject) => string | undefined>> = {
  Secret: { type: (object) => object.type as string | undefined },
  Event: {
    'involvedObject.kind': (object) => (object.involvedObject as Record<string, string> | undefined)?.kind,
    'involvedObject.namespace': (object) => (object.involvedObject as Record<string, string> | undefined)?.namespace,
    'involvedObject.name': (object) => (object.involvedObject as Record<string, string> | undefined)?.name,
    'involvedObject.uid': (object) => (object.involvedObject as Record<string, string> | undefined)?.uid,
    'involvedObject.apiVersion': (object) => (object.involvedObject as Record<string, string> | undefined)?.apiVersion,
    'involvedObject.resourceVersion': (object) => (object.involvedObject as Record<string, string> | undefined)?.resourceVersion,
    'involvedObject.fieldPath': (object) => (object.involvedObject as Record<string, string> | undefined)?.fieldPath,
    reason: (object) => object.reason as string | undefined,
    reportingComponent: (object) => object.reportingComponent as string | undefined,
    source: (object) => (object.source as Record<string, string> | undefined)?.component,
    type: (object) => object.type as string | undefined,
  },
};

export function parseFieldSelector(text: string | null, type: { kind: string; custom: boolean }): Selector {
  if (!text) return everything;
  const fields = type.custom ? METADATA_FIELDS : { ...METADATA_FIELDS, ...TYPE_FIELDS[type.kind] };
  const tests = requirements(text).map((requirement): Selector => {
    const match = /^([\w.]+)\s*(==|=|!=)\s*(.*)$/.exec(requirement);
    if (!match) throw invalid('field', text, `invalid field selector: '${requirement}'`);
    const [, field, operator, value] = match as unknown as [string, string, string, string];
    const read = fields[field];
    // The real server's wordings, for custom resources (no selectableFields here) and built-in types.
    if (!read && type.custom)
      throw new ApiError(400, 'BadRequest', `"${field}" is not a known field selector: only "metadata.name", "metadata.namespace"`);
    if (!read) throw new ApiError(400, 'BadRequest', `field label not supported: ${field}`);
    return operator === '!=' ? (object) => (read(object) ?? '') !== value : (object) => (read(object) ?? '') === value;
  });
  return (object) => tests.every((test) => test(object));
}
