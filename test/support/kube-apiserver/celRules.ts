import { Environment } from '@marcbachmann/cel-js';
import ipaddr from 'ipaddr.js';

/**
 * `x-kubernetes-validations` of a CRD schema, evaluated as the API server does on create and update:
 * each rule with `self` bound to the value at its schema node, and, for transition rules (those naming
 * `oldSelf`), `oldSelf` bound to the stored value — transition rules are skipped on create. The IP/CIDR
 * and URL library functions of Kubernetes that the CRDs use are provided here.
 */

interface SchemaNode {
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  'x-kubernetes-validations'?: Array<{ rule: string; message?: string }>;
}

export interface RuleViolation {
  readonly field: string;
  readonly message: string;
}

const environment = new Environment({ unlistedVariablesAreDyn: true })
  .registerFunction('isIP(string): bool', (value: string) => ipaddr.isValid(value))
  .registerFunction('isCIDR(string): bool', (value: string) => ipaddr.isValidCIDR(value))
  .registerFunction('isURL(string): bool', (value: string) => {
    try {
      return new URL(value).protocol.length > 0;
    } catch {
      return false;
    }
  });

export function violatedRules(schema: SchemaNode, value: unknown, oldValue: unknown, path = ''): RuleViolation[] {
  if (value === undefined || value === null) return [];
  const violations: RuleViolation[] = [];
  for (const { rule, message } of schema['x-kubernetes-validations'] ?? []) {
    const transition = /\boldSelf\b/.test(rule);
    if (transition && (oldValue === undefined || oldValue === null)) continue;
    let passed: unknown;
    try {
      passed = environment.evaluate(rule, transition ? { self: value, oldSelf: oldValue } : { self: value });
    } catch (error) {
      passed = false;
      violations.push({ field: path || '<root>', message: `rule ${rule} could not be evaluated: ${(error as Error).message}` });
      continue;
    }
    if (passed !== true) violations.push({ field: path || '<root>', message: message ?? `failed rule: ${rule}` });
  }
  if (schema.properties && typeof value === 'object') {
    for (const [name, child] of Object.entries(schema.properties)) {
      violations.push(
        ...violatedRules(
          child,
          (value as Record<string, unknown>)[name],
          (oldValue as Record<string, unknown> | undefined)?.[name],
          path ? `${path}.${name}` : name,
        ),
      );
    }
  }
  if (schema.items && Array.isArray(value)) {
    // Items are not correlated with the old list (that needs list-type map keys), so item rules see no oldSelf.
    for (const [index, item] of value.entries()) violations.push(...violatedRules(schema.items!, item, undefined, `${path}[${index}]`));
  }
  return violations;
}
