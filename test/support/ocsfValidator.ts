import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

/**
 * A validator of OCSF events compiled from the OCSF project's own schema (test/fixtures/ocsf/<version>.json:
 * the schema's files at that release, resolved by scripts/ocsf-extract.ts), as strict as the schema is:
 *
 * - every attribute of the class and of each object (its `extends` and `$include`s resolved), and no other;
 * - types from the dictionary, down to the base type: integer and long as integers (timestamp_t included),
 *   strings with the type's pattern (`regex`), length (`max_len`), range and values;
 * - `requirement: required`, and the constraints of classes and objects (`at_least_one`, `just_one`);
 * - enums (the dictionary's merged with the class's), and a sibling's caption matching its id (as the
 *   OCSF server's validator checks, 99 Other excepted: its caption is the source's own value);
 * - profiles: an attribute a profile brings is allowed only when the record names the profile in
 *   `metadata.profiles` (and its requirement holds only then); only the class's profiles may be named;
 * - deprecations: a deprecated attribute, object or enum value is refused (a new record must not use one);
 * - `class_uid`, `category_uid`, their names, `type_uid = class_uid × 100 + activity_id`, and
 *   `metadata.version` the release's.
 */

type Json = Record<string, any>;

interface Extract {
  readonly version: string;
  readonly profiles: readonly string[];
  readonly types: Record<string, { type?: string; regex?: string; max_len?: number; range?: [number, number]; values?: unknown[] }>;
  readonly classes: Record<string, Definition & { class_uid: number; category_uid: number; category_name: string; name: string }>;
  readonly objects: Record<string, Definition>;
}

interface Definition {
  readonly caption: string;
  readonly profiles: readonly string[];
  readonly constraints?: { at_least_one?: string[]; just_one?: string[] };
  readonly deprecated?: string;
  readonly attributes: Record<string, Attribute>;
}

interface Attribute {
  readonly type: string;
  readonly is_array?: true;
  readonly requirement: string;
  readonly enum?: Record<string, { caption: string; deprecated?: string }>;
  readonly sibling?: string;
  readonly profile?: string;
  readonly deprecated?: string;
}

const FIXTURES = join(import.meta.dirname, '../fixtures/ocsf');
/** The dictionary's base types, which the derived ones (email_t, timestamp_t…) come down to. */
const BASE_TYPES: Record<string, Json> = {
  string_t: { type: 'string' },
  integer_t: { type: 'integer' },
  long_t: { type: 'integer' },
  float_t: { type: 'number' },
  boolean_t: { type: 'boolean' },
  json_t: {},
  object_t: { type: 'object' },
};

export class OcsfValidator {
  readonly version: string;
  private readonly extract: Extract;
  private readonly ajv = new Ajv2020({ allErrors: true, strict: false, unicodeRegExp: false });
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(version: string) {
    this.extract = JSON.parse(readFileSync(join(FIXTURES, `${version}.json`), 'utf8')) as Extract;
    this.version = this.extract.version;
  }

  /** The class names and uids the extract holds. */
  get classes(): Array<{ name: string; uid: number }> {
    return Object.values(this.extract.classes).map((definition) => ({ name: definition.name, uid: definition.class_uid }));
  }

  /** The problems of one record (none when it is valid), each as `path: message`. */
  problems(record: Json): string[] {
    const definition = Object.values(this.extract.classes).find((candidate) => candidate.class_uid === record.class_uid);
    if (!definition) return [`class_uid ${String(record.class_uid)} is none of the classes of OCSF ${this.version} this validator holds`];
    const declared = Array.isArray(record.metadata?.profiles) ? (record.metadata.profiles as unknown[]) : [];
    const profiles = declared.filter((profile): profile is string => typeof profile === 'string').sort();
    const validate = this.validatorOf(definition, profiles);
    if (validate(record)) return [];
    return (validate.errors ?? []).map(
      (error) => `${error.instancePath || '/'}: ${error.message}${error.params ? ` ${JSON.stringify(error.params)}` : ''}`,
    );
  }

  private validatorOf(definition: Extract['classes'][string], profiles: readonly string[]): ValidateFunction {
    const key = `${definition.name}:${profiles.join(',')}`;
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = this.ajv.compile(new SchemaCompiler(this.extract, profiles).classSchema(definition));
      this.compiled.set(key, validate);
    }
    return validate;
  }
}

/** "When the member has this value, these properties hold": ¬A ∨ B, which reads as an if/then. */
function implies(when: Record<string, number>, properties: Json): Json {
  const [[member, value]] = Object.entries(when) as [[string, number]];
  return { anyOf: [{ not: { properties: { [member]: { const: value } }, required: [member] } }, { properties }] };
}

/** The JSON Schema of a class for a record naming `profiles`, objects in $defs. */
class SchemaCompiler {
  private readonly extract: Extract;
  private readonly profiles: ReadonlySet<string>;
  private readonly defs: Record<string, Json> = {};

  constructor(extract: Extract, profiles: readonly string[]) {
    this.extract = extract;
    this.profiles = new Set(profiles);
  }

  classSchema(definition: Extract['classes'][string]): Json {
    const schema = this.definitionSchema(definition);
    const activities = Object.keys(definition.attributes.activity_id?.enum ?? {});
    schema.properties.class_uid = { const: definition.class_uid };
    schema.properties.class_name = { const: definition.caption };
    schema.properties.category_uid = { const: definition.category_uid };
    schema.properties.category_name = { const: definition.category_name };
    schema.allOf = [
      ...(schema.allOf ?? []),
      ...activities.map((activity) =>
        implies({ activity_id: Number(activity) }, { type_uid: { const: definition.class_uid * 100 + Number(activity) } }),
      ),
      {
        properties: {
          metadata: {
            properties: {
              version: { const: this.extract.version },
              profiles: { items: { enum: [...definition.profiles] } },
            },
          },
        },
      },
    ];
    return { $schema: 'https://json-schema.org/draft/2020-12/schema', ...schema, $defs: this.defs };
  }

  /** Properties, required members, constraints and enum siblings of a class or an object. */
  private definitionSchema(definition: Definition): Json & { properties: Json; allOf?: Json[] } {
    const properties: Json = {};
    const required: string[] = [];
    const allOf: Json[] = [];
    for (const [name, attribute] of Object.entries(definition.attributes)) {
      if (attribute.profile !== undefined && !this.profiles.has(attribute.profile)) continue;
      if (attribute.deprecated) {
        properties[name] = { not: {}, description: `deprecated: ${attribute.deprecated}` };
        continue;
      }
      properties[name] = this.attributeSchema(attribute);
      if (attribute.requirement === 'required') required.push(name);
      const sibling = attribute.sibling;
      for (const [value, { caption }] of Object.entries(attribute.enum ?? {})) {
        if (!sibling || value === '99' || !(sibling in definition.attributes)) continue;
        allOf.push(implies({ [name]: Number(value) }, { [sibling]: { const: caption } }));
      }
    }
    const present = (names: readonly string[]) => names.filter((name) => name in properties).map((name) => ({ required: [name] }));
    if (definition.constraints?.at_least_one) allOf.push({ anyOf: present(definition.constraints.at_least_one) });
    if (definition.constraints?.just_one) allOf.push({ oneOf: present(definition.constraints.just_one) });
    return { type: 'object', properties, required, additionalProperties: false, ...(allOf.length > 0 ? { allOf } : {}) };
  }

  private attributeSchema(attribute: Attribute): Json {
    let schema =
      attribute.type in this.extract.types || attribute.type in BASE_TYPES
        ? this.typeSchema(attribute.type)
        : this.objectRef(attribute.type);
    if (attribute.enum) {
      const allowed = Object.entries(attribute.enum)
        .filter(([, value]) => !value.deprecated)
        .map(([value]) => Number(value));
      schema = { ...schema, enum: allowed };
    }
    return attribute.is_array ? { type: 'array', items: schema } : schema;
  }

  /** A dictionary type, its base's checks gathered (the more specific type's own winning). */
  private typeSchema(name: string): Json {
    const chain: string[] = [];
    for (let type: string | undefined = name; type !== undefined && !chain.includes(type); type = this.extract.types[type]?.type)
      chain.push(type);
    const base = chain.find((type) => type in BASE_TYPES);
    const schema: Json = { ...(base ? BASE_TYPES[base] : {}) };
    for (const type of [...chain].reverse()) {
      const facts = this.extract.types[type];
      if (!facts) continue;
      if (facts.regex !== undefined) schema.pattern = facts.regex;
      if (facts.max_len !== undefined) schema.maxLength = facts.max_len;
      if (facts.range !== undefined) Object.assign(schema, { minimum: facts.range[0], maximum: facts.range[1] });
      if (facts.values !== undefined) schema.enum = facts.values;
    }
    return schema;
  }

  private objectRef(name: string): Json {
    // The schema's generic object: "to log objects that are not otherwise defined by the schema", any members.
    if (name === 'object') return { type: 'object' };
    const definition = this.extract.objects[name];
    if (!definition) throw new Error(`the extract has no object ${name}`);
    if (!(name in this.defs)) {
      this.defs[name] = {}; // a placeholder while its attributes (which may refer back to it) are compiled
      this.defs[name] = definition.deprecated
        ? { not: {}, description: `deprecated: ${definition.deprecated}` }
        : this.definitionSchema(definition);
    }
    return { $ref: `#/$defs/${name}` };
  }
}
