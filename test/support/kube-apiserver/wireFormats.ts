import { ApiError, type KubeObject } from './objectStore.ts';

/**
 * What the real API server refuses at the wire, for every object the stand-in stores, answered as it answers:
 * - 400 BadRequest when the body cannot be decoded into the Go type: a metav1.MicroTime that does not match the
 *   layout 2006-01-02T15:04:05.000000Z07:00 (exactly six fractional digits), a metav1.Time that time.Parse
 *   refuses with time.RFC3339, Secret data that is not base64. A Lease whose renewTime has three fractional
 *   digits is refused here as on a cluster.
 * - 422 Invalid, with details.causes, for what k8s.io/apimachinery's validation refuses: names (a DNS-1123
 *   subdomain for most kinds, a DNS-1123 label for Namespaces, a path segment for core Events), label keys and
 *   values (63 characters, alphanumeric at both ends), annotation keys and total size (256 KiB), and the rules of
 *   the built-in kinds the controller writes (Lease durations, Secret keys and size, Event fields).
 * Only regular expressions and lengths: cheap enough to run on every write.
 */

export interface ServedType {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly custom: boolean;
}

type Cause = { field: string; message: string; reason?: string };

const MICRO_TIME_LAYOUT = '2006-01-02T15:04:05.000000Z07:00';
const RFC3339_LAYOUT = '2006-01-02T15:04:05Z07:00';
/** Go's time.Parse with RFC3339Micro: the fraction is exactly the layout's six digits. */
const MICRO_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{6}(Z|[+-](\d{2}):(\d{2}))$/;
/** Go's time.Parse with RFC3339: a fraction of any length may follow the seconds although the layout has none. */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:[.,]\d+)?(Z|[+-](\d{2}):(\d{2}))$/;

/** The MicroTime and Time fields of the kinds that have any, by `group/Kind` (core: `/Kind`). */
const TIME_FIELDS: Record<string, { readonly micro: readonly string[]; readonly time: readonly string[] }> = {
  'coordination.k8s.io/Lease': { micro: ['spec.acquireTime', 'spec.renewTime'], time: [] },
  '/Event': { micro: ['eventTime', 'series.lastObservedTime'], time: ['firstTimestamp', 'lastTimestamp'] },
  'events.k8s.io/Event': {
    micro: ['eventTime', 'series.lastObservedTime'],
    time: ['deprecatedFirstTimestamp', 'deprecatedLastTimestamp'],
  },
};
const METADATA_TIMES = ['metadata.creationTimestamp', 'metadata.deletionTimestamp'];

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const SUBDOMAIN_RULE =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_RULE =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const LABEL_VALUE_RULE =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_RULE =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const ANNOTATIONS_MAX_BYTES = 256 * 1024;
const SECRET_MAX_BYTES = 1024 * 1024;
/** What the name generator keeps of metadata.generateName before its five random characters (names.SimpleNameGenerator). */
export const GENERATED_NAME_BASE_MAX = 63 - 5;

const typeKey = (type: ServedType) => `${type.group}/${type.kind}`;
/** How the server names a kind in messages: `Lease.coordination.k8s.io`, `Secret`. */
const qualifiedKind = (type: ServedType) => (type.group ? `${type.kind}.${type.group}` : type.kind);

function read(object: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], object);
}

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** Why Go's time.Parse refuses `value` with the pattern's layout, or undefined when it accepts it. */
function timeProblem(value: unknown, pattern: RegExp, layout: string): string | undefined {
  if (value === null || value === undefined) return undefined; // null decodes to the zero time
  if (typeof value !== 'string') return `json: cannot unmarshal ${typeof value} into Go value of type string`;
  const match = pattern.exec(value);
  const refused = `parsing time ${JSON.stringify(value)} as ${JSON.stringify(layout)}: cannot parse`;
  if (!match) return refused;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const zoneHour = match[8] === undefined ? 0 : Number(match[8]);
  const zoneMinute = match[9] === undefined ? 0 : Number(match[9]);
  if (month < 1 || month > 12) return `${refused}: month out of range`;
  if (day < 1 || day > daysIn(year, month)) return `${refused}: day out of range`;
  if (hour > 23 || minute > 59 || second > 59 || zoneHour > 23 || zoneMinute > 59) return `${refused}: value out of range`;
  return undefined;
}

/**
 * Decodes the object as the Go types would: the first field that cannot be decoded is a 400, with the
 * message `<Kind> in version "<v>" cannot be handled as a <Kind>: <why>`.
 */
export function decodeAsTheServerDoes(type: ServedType, object: KubeObject): void {
  const fields = TIME_FIELDS[typeKey(type)];
  const problems = [
    ...(fields?.micro ?? []).map((path) => timeProblem(read(object, path), MICRO_TIME, MICRO_TIME_LAYOUT)),
    ...[...(fields?.time ?? []), ...METADATA_TIMES].map((path) => timeProblem(read(object, path), RFC3339, RFC3339_LAYOUT)),
  ];
  if (!type.custom && type.kind === 'Secret') {
    for (const value of Object.values((object.data as Record<string, unknown> | undefined) ?? {}))
      if (typeof value !== 'string' || !BASE64.test(value)) problems.push('illegal base64 data at input byte 0');
  }
  const problem = problems.find((found) => found !== undefined);
  if (problem) {
    throw new ApiError(400, 'BadRequest', `${type.kind} in version "${type.version}" cannot be handled as a ${type.kind}: ${problem}`);
  }
}

function nameCauses(field: string, value: string, kind: 'subdomain' | 'label' | 'pathSegment'): Cause[] {
  const invalid = (message: string): Cause => ({ field, message: `Invalid value: ${JSON.stringify(value)}: ${message}` });
  if (kind === 'pathSegment') {
    if (value === '.' || value === '..') return [invalid(`may not be '${value}'`)];
    const bad = ['/', '%'].find((character) => value.includes(character));
    return bad ? [invalid(`may not contain '${bad}'`)] : [];
  }
  const [pattern, max, rule] = kind === 'label' ? [DNS_LABEL, 63, LABEL_RULE] : [DNS_SUBDOMAIN, 253, SUBDOMAIN_RULE];
  return [
    ...(value.length > max ? [invalid(`must be no more than ${max} characters`)] : []),
    ...(pattern.test(value) ? [] : [invalid(rule)]),
  ];
}

/** A label or annotation key: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters. */
function qualifiedNameCauses(field: string, key: string): Cause[] {
  const invalid = (message: string): Cause => ({ field, message: `Invalid value: ${JSON.stringify(key)}: ${message}` });
  const parts = key.split('/');
  if (parts.length > 2) return [invalid('a qualified name must consist of a name part and an optional prefix')];
  const [prefix, name] = parts.length === 2 ? parts : [undefined, parts[0]!];
  const causes: Cause[] = [];
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)))
    causes.push(invalid(`prefix part ${SUBDOMAIN_RULE}`));
  if (name!.length === 0 || name!.length > 63) causes.push(invalid('name part must be non-empty and no more than 63 characters'));
  else if (!QUALIFIED_NAME.test(name!)) causes.push(invalid(QUALIFIED_NAME_RULE));
  return causes;
}

function metadataCauses(type: ServedType, object: KubeObject): Cause[] {
  const { name, namespace, labels, annotations } = object.metadata;
  const causes: Cause[] = [];
  if (!name)
    causes.push({ field: 'metadata.name', message: 'Required value: name or generateName is required', reason: 'FieldValueRequired' });
  else {
    const kind =
      type.kind === 'Namespace' ? 'label' : !type.custom && type.group === '' && type.kind === 'Event' ? 'pathSegment' : 'subdomain';
    causes.push(...nameCauses('metadata.name', name, kind));
  }
  if (type.namespaced && namespace !== undefined) causes.push(...nameCauses('metadata.namespace', namespace, 'label'));
  for (const [key, value] of Object.entries(labels ?? {})) {
    causes.push(...qualifiedNameCauses('metadata.labels', key));
    const invalid = (message: string) => ({ field: 'metadata.labels', message: `Invalid value: ${JSON.stringify(value)}: ${message}` });
    if (typeof value !== 'string') causes.push(invalid('must be a string'));
    else if (value.length > 63) causes.push(invalid('must be no more than 63 characters'));
    else if (!LABEL_VALUE.test(value)) causes.push(invalid(LABEL_VALUE_RULE));
  }
  let annotationBytes = 0;
  for (const [key, value] of Object.entries(annotations ?? {})) {
    causes.push(...qualifiedNameCauses('metadata.annotations', key));
    annotationBytes += Buffer.byteLength(key) + Buffer.byteLength(String(value));
  }
  if (annotationBytes > ANNOTATIONS_MAX_BYTES)
    causes.push({
      field: 'metadata.annotations',
      message: `Too long: must have at most ${ANNOTATIONS_MAX_BYTES} bytes`,
      reason: 'FieldValueTooLong',
    });
  return causes;
}

function required(object: unknown, path: string, max?: number): Cause[] {
  const value = read(object, path);
  if (value === undefined || value === null || value === '')
    return [{ field: path, message: 'Required value', reason: 'FieldValueRequired' }];
  if (max !== undefined && String(value).length > max)
    return [{ field: path, message: `Invalid value: "": can have at most ${max} characters` }];
  return [];
}

/** The validation of the built-in kinds the stand-in serves (k8s.io/kubernetes pkg/apis/.../validation). */
function kindCauses(type: ServedType, object: KubeObject): Cause[] {
  const causes: Cause[] = [];
  switch (typeKey(type)) {
    case 'coordination.k8s.io/Lease': {
      const spec = (object.spec ?? {}) as { leaseDurationSeconds?: number; leaseTransitions?: number };
      if (spec.leaseDurationSeconds !== undefined && spec.leaseDurationSeconds <= 0)
        causes.push({ field: 'spec.leaseDurationSeconds', message: `Invalid value: ${spec.leaseDurationSeconds}: must be greater than 0` });
      if (spec.leaseTransitions !== undefined && spec.leaseTransitions < 0)
        causes.push({
          field: 'spec.leaseTransitions',
          message: `Invalid value: ${spec.leaseTransitions}: must be greater than or equal to 0`,
        });
      break;
    }
    case '/Secret': {
      let size = 0;
      for (const [key, value] of Object.entries((object.data as Record<string, string> | undefined) ?? {})) {
        if (key.length > 253 || !SECRET_KEY.test(key))
          causes.push({
            field: 'data',
            message: `Invalid value: ${JSON.stringify(key)}: a valid config key must consist of alphanumeric characters, '-', '_' or '.'`,
          });
        size += Buffer.from(value, 'base64').length;
      }
      if (size > SECRET_MAX_BYTES)
        causes.push({ field: 'data', message: `Too long: must have at most ${SECRET_MAX_BYTES} bytes`, reason: 'FieldValueTooLong' });
      break;
    }
    case '/Event': {
      const involvedNamespace = read(object, 'involvedObject.namespace') as string | undefined;
      if (!object.eventTime) {
        // An Event of the old kind: its namespace and its object's agree.
        if (involvedNamespace && involvedNamespace !== object.metadata.namespace)
          causes.push({
            field: 'involvedObject.namespace',
            message: `Invalid value: ${JSON.stringify(involvedNamespace)}: does not match event.namespace`,
          });
      } else {
        causes.push(
          ...required(object, 'reportingComponent'),
          ...required(object, 'reportingInstance', 128),
          ...required(object, 'action', 128),
          ...required(object, 'reason', 128),
        );
        if (String(object.message ?? '').length > 1024)
          causes.push({ field: 'message', message: 'Invalid value: "": can have at most 1024 characters' });
      }
      break;
    }
    case 'events.k8s.io/Event':
      causes.push(
        ...required(object, 'eventTime'),
        ...required(object, 'reportingController'),
        ...required(object, 'reportingInstance', 128),
        ...required(object, 'action', 128),
        ...required(object, 'reason', 128),
      );
      if (String(object.note ?? '').length > 1024)
        causes.push({ field: 'note', message: 'Invalid value: "": can have at most 1024 characters' });
      break;
  }
  return causes;
}

/** 422 Invalid for everything validation refuses of the object, all causes in one Status, as the server answers. */
export function validateAsTheServerDoes(type: ServedType, object: KubeObject): void {
  const causes = [...metadataCauses(type, object), ...(type.custom ? [] : kindCauses(type, object))];
  if (causes.length > 0) throw invalidObject(type, object.metadata.name, causes);
}

/** The 422 the server answers for an object that fails validation. */
export function invalidObject(type: ServedType, name: string, causes: Cause[]): ApiError {
  const summary = causes.map((cause) => `${cause.field}: ${cause.message}`);
  const listed = summary.length === 1 ? summary[0] : `[${summary.join(', ')}]`;
  return new ApiError(422, 'Invalid', `${qualifiedKind(type)} ${JSON.stringify(name ?? '')} is invalid: ${listed}`, causes, {
    name: name ?? '',
    group: type.group,
    kind: type.kind,
  });
}
