/**
 * Resolves the OCSF classes our `ocsf` stream format emits, from a copy of the OCSF project's schema
 * repository (ocsf/ocsf-schema at a release tag), into one JSON document the tests compile a validator from
 * (test/support/ocsfValidator.ts): the test data under test/fixtures/ocsf/.
 *
 *   node scripts/ocsf-extract.ts <ocsf-schema directory at tag X.Y.Z> > test/fixtures/ocsf/X.Y.Z.json
 *   node scripts/ocsf-extract.ts --check <directory> test/fixtures/ocsf/X.Y.Z.json   # exit 1 when they differ
 *
 * The resolution is the schema's own, as its server compiles it: a class extends its category's event, which
 * extends `base_event`; `$include` brings in shared attribute files and profiles (a profile's attributes are
 * marked with its name, unless the including definition says `"profile": null`); an attribute's definition
 * is the dictionary's entry with the class's or object's own merged over it (enums merged member by member);
 * objects extend objects; `@deprecated` is kept wherever it is written (class, object, attribute, enum value).
 * Nothing is judged here: the extract is the schema's facts for the classes named below and every object
 * reachable from them, ready to compile.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The classes the `ocsf` format emits (src/streams/ocsf.ts), by name (their files moved between releases). */
const CLASS_NAMES = ['authentication', 'account_change', 'entity_management', 'api_activity', 'datastore_activity', 'base_event'] as const;

// biome-ignore lint/suspicious/noExplicitAny: the schema's files are JSON of many shapes, read member by member.
type Json = Record<string, any>;

interface Attribute {
  type: string;
  is_array?: true;
  requirement: string;
  enum?: Record<string, { caption: string; deprecated?: string }>;
  sibling?: string;
  profile?: string;
  deprecated?: string;
}

interface Resolved {
  caption: string;
  profiles: string[];
  constraints?: Json;
  deprecated?: string;
  attributes: Record<string, Attribute>;
}

function deepMerge(base: Json | undefined, over: Json | undefined): Json {
  if (base === undefined) return structuredClone(over ?? {});
  if (over === undefined) return structuredClone(base);
  const merged: Json = structuredClone(base);
  for (const [key, value] of Object.entries(over)) {
    const current = merged[key];
    merged[key] =
      value !== null &&
      typeof value === 'object' &&
      !Array.isArray(value) &&
      current !== null &&
      typeof current === 'object' &&
      !Array.isArray(current)
        ? deepMerge(current, value)
        : structuredClone(value);
  }
  return merged;
}

function deprecation(definition: Json | undefined): string | undefined {
  const mark = definition?.['@deprecated'];
  return mark === undefined ? undefined : `${mark.message ?? 'deprecated'} (since ${mark.since ?? '?'})`;
}

export class OcsfSource {
  private readonly root: string;
  private readonly dictionary: Json;

  constructor(root: string) {
    this.root = root;
    this.dictionary = this.read('dictionary.json');
  }

  read(path: string): Json {
    return JSON.parse(readFileSync(join(this.root, path), 'utf8')) as Json;
  }

  get version(): string {
    return this.read('version.json').version as string;
  }

  /** A definition's own attributes with its `$include`s resolved (profiles marked), before the dictionary. */
  private ownAttributes(definition: Json): Record<string, Json> {
    const { $include: includes, ...own } = (definition.attributes ?? {}) as Json;
    let attributes: Record<string, Json> = {};
    for (const path of (includes ?? []) as string[]) {
      const included = this.read(path);
      const profile = included.meta === 'profile' ? (included.name as string) : undefined;
      for (const [name, attribute] of Object.entries(this.ownAttributes(included))) {
        attributes[name] = deepMerge(attributes[name], profile === undefined ? attribute : { ...attribute, profile });
      }
    }
    // The definition's own entries go over what it included; `"profile": null` makes a profile's attribute its own.
    attributes = deepMerge(attributes, own);
    return attributes;
  }

  /** A class or object definition resolved through `extends`, in its file's form (not yet the dictionary's). */
  private resolvedDefinition(definition: Json, parentOf: (name: string) => Json): Json {
    const own = { ...definition, attributes: this.ownAttributes(definition) };
    if (!definition.extends) return own;
    const parent = this.resolvedDefinition(parentOf(definition.extends as string), parentOf);
    return {
      ...own,
      profiles: [...new Set([...((parent.profiles as string[]) ?? []), ...((definition.profiles as string[]) ?? [])])],
      constraints: definition.constraints ?? parent.constraints,
      attributes: deepMerge(parent.attributes, own.attributes),
    };
  }

  /** The attributes as the schema means them: the dictionary's entry, the definition's merged over it. */
  private finalAttributes(attributes: Record<string, Json>): Record<string, Attribute> {
    const result: Record<string, Attribute> = {};
    for (const [name, local] of Object.entries(attributes)) {
      const entry = deepMerge(this.dictionary.attributes[name], local);
      if (entry.type === undefined) throw new Error(`attribute ${name} has no type in the dictionary`);
      const attribute: Attribute = { type: entry.type as string, requirement: (entry.requirement as string) ?? 'optional' };
      if (entry.is_array) attribute.is_array = true;
      if (entry.sibling) attribute.sibling = entry.sibling as string;
      if (typeof entry.profile === 'string') attribute.profile = entry.profile;
      const deprecated = deprecation(entry);
      if (deprecated) attribute.deprecated = deprecated;
      if (entry.enum) {
        attribute.enum = {};
        for (const [key, value] of Object.entries(entry.enum as Json)) {
          const valueDeprecated = deprecation(value);
          attribute.enum[key] = { caption: value.caption as string, ...(valueDeprecated ? { deprecated: valueDeprecated } : {}) };
        }
      }
      result[name] = attribute;
    }
    return result;
  }

  /** The files under events/<category>/ defining the named classes. */
  classFiles(names: readonly string[]): string[] {
    const found = new Map<string, string>([['base_event', 'events/base_event.json']]);
    for (const category of readdirSync(join(this.root, 'events'))) {
      if (!existsSync(join(this.root, 'events', category, `${category}.json`))) continue;
      for (const file of readdirSync(join(this.root, 'events', category))) {
        const path = join('events', category, file);
        const name = this.read(path).name as string;
        if (names.includes(name)) found.set(name, path);
      }
    }
    const missing = names.filter((name) => !found.has(name));
    if (missing.length > 0) throw new Error(`no class file for ${missing.join(', ')}`);
    return names.map((name) => found.get(name)!);
  }

  objectFile(name: string): Json {
    const path = join('objects', `${name}.json`);
    if (!existsSync(join(this.root, path))) throw new Error(`no object file for ${name}`);
    return this.read(path);
  }

  resolveObject(name: string): Resolved {
    const resolved = this.resolvedDefinition(this.objectFile(name), (parent) => this.objectFile(parent));
    return {
      caption: resolved.caption as string,
      profiles: (resolved.profiles as string[]) ?? [],
      ...(resolved.constraints ? { constraints: resolved.constraints as Json } : {}),
      ...(deprecation(resolved) ? { deprecated: deprecation(resolved) } : {}),
      attributes: this.finalAttributes(resolved.attributes as Record<string, Json>),
    };
  }

  resolveClass(path: string): Resolved & { name: string; class_uid: number; category_uid: number; category_name: string } {
    const file = this.read(path);
    const categoryEventPath = join(path, '..', `${path.split('/')[1]}.json`);
    const parentOf = (parent: string) => (parent === 'base_event' ? this.read('events/base_event.json') : this.read(categoryEventPath));
    const resolved = this.resolvedDefinition(file, parentOf);
    // The base event is class 0 of category 0, as its own enums of class_uid and category_uid say.
    const category =
      file.name === 'base_event'
        ? { uid: 0, caption: resolved.attributes.category_uid.enum['0'].caption as string }
        : (this.read('categories.json').attributes as Json)[this.read(categoryEventPath).category as string];
    return {
      name: file.name as string,
      caption: file.caption as string,
      class_uid: file.name === 'base_event' ? 0 : (category.uid as number) * 1000 + (file.uid as number),
      category_uid: category.uid as number,
      category_name: category.caption as string,
      profiles: (resolved.profiles as string[]) ?? [],
      ...(resolved.constraints ? { constraints: resolved.constraints as Json } : {}),
      ...(deprecation(file) ? { deprecated: deprecation(file) } : {}),
      attributes: this.finalAttributes(resolved.attributes as Record<string, Json>),
    };
  }

  /** The dictionary's types: what each `_t` is made of (its base type, pattern, length, range, values). */
  types(): Json {
    const types: Json = {};
    for (const [name, type] of Object.entries(this.dictionary.types.attributes as Json)) {
      types[name] = Object.fromEntries(
        Object.entries(type as Json).filter(([key]) => ['type', 'regex', 'max_len', 'range', 'values'].includes(key)),
      );
    }
    return types;
  }
}

/** The extract: the classes, every object they reach, the types, the profiles that exist. */
export function extract(root: string): Json {
  const source = new OcsfSource(root);
  const classes: Json = {};
  const objects: Json = {};
  const types = source.types();
  const pending: string[] = [];
  const reach = (attributes: Record<string, Attribute>) => {
    for (const attribute of Object.values(attributes))
      if (!(attribute.type in types) && !(attribute.type in objects) && !pending.includes(attribute.type)) pending.push(attribute.type);
  };
  for (const path of source.classFiles(CLASS_NAMES)) {
    const resolved = source.resolveClass(path);
    classes[resolved.name] = resolved;
    reach(resolved.attributes);
  }
  while (pending.length > 0) {
    const name = pending.shift()!;
    objects[name] = source.resolveObject(name);
    reach(objects[name].attributes);
  }
  const profiles = readdirSync(join(root, 'profiles'))
    .filter((file) => file.endsWith('.json'))
    .map((file) => file.replace(/\.json$/, ''))
    .sort();
  return {
    $comment: `OCSF ${source.version} (ocsf/ocsf-schema, Apache-2.0), resolved by scripts/ocsf-extract.ts: the classes the ocsf format emits and the objects they reach.`,
    version: source.version,
    profiles,
    types,
    classes,
    objects: Object.fromEntries(Object.entries(objects).sort(([a], [b]) => (a < b ? -1 : 1))),
  };
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  if (args[0] === '--check') {
    const expected = `${JSON.stringify(extract(args[1]!), null, 1)}\n`;
    const actual = readFileSync(args[2]!, 'utf8');
    if (expected !== actual) {
      process.stderr.write(`${args[2]} is not what ${args[1]} resolves to\n`);
      process.exit(1);
    }
    process.stdout.write(`${args[2]}: as ${args[1]} resolves\n`);
  } else if (args.length === 1) {
    process.stdout.write(`${JSON.stringify(extract(args[0]!), null, 1)}\n`);
  } else {
    process.stderr.write('usage: node scripts/ocsf-extract.ts [--check] <ocsf-schema directory> [extract file]\n');
    process.exit(2);
  }
}
