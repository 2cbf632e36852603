import { readFileSync, readdirSync } from 'node:fs';

/**
 * The commands of docs/*.md that a reader runs against a service as written: each `curl` to `$BASE` or
 * `$INTERNAL_URL` and each `npx audit-trail ...` of their shell blocks (continuation lines joined, comments
 * dropped). A `make run` service is such a service; test/docs/make-run.test.ts runs them all against one.
 * What cannot run there is left out by a rule that says why, so that a command added to the docs is run
 * unless one of these rules names it.
 */
const NOT_LOCAL: ReadonlyArray<[pattern: RegExp, why: string]> = [
  [/^(kubectl|helm|docker|aws)\b/, 'needs a cluster, a registry or a cloud account'],
  [/^curl -sN /, 'a live stream: it runs until Ctrl-C (test/http/live-events.test.ts follows one)'],
  [/\$AUDIT_KEY\b|\s\.\.\.\s/, "integrity.md's scripts keep heads and exports in files; the banner runs that flow as pasted"],
  [/^npx audit-trail (import|verify)\b/, 'reads a file of the reader’s own'],
  [/^npx openapi-typescript\b/, 'fetches a package from the registry'],
];

export interface DocCommand {
  readonly doc: string;
  readonly text: string;
}

/** A block's commands: continuation lines joined, a quoted argument kept whole across lines, comments dropped. */
function commandsOf(block: string): string[] {
  const commands: string[] = [];
  let current = '';
  const inQuote = (text: string) => (text.match(/'/g)?.length ?? 0) % 2 === 1;
  for (const raw of block.split('\n')) {
    if (inQuote(current)) {
      current += `\n${raw}`;
    } else {
      const line = raw.replace(/\s+#\s.*$/, '').trim();
      if (current === '' && (line === '' || line.startsWith('#'))) continue;
      current += current === '' ? line : ` ${line}`;
    }
    if (inQuote(current)) continue;
    if (current.endsWith('\\')) {
      current = current.slice(0, -1).trimEnd();
      continue;
    }
    commands.push(current);
    current = '';
  }
  return commands;
}

/** Every command of the docs' shell blocks that talks to a running service. */
export function serviceCommands(directory = 'docs'): { run: DocCommand[]; left: Array<DocCommand & { why: string }> } {
  const run: DocCommand[] = [];
  const left: Array<DocCommand & { why: string }> = [];
  for (const doc of readdirSync(directory).filter((name) => name.endsWith('.md'))) {
    const text = readFileSync(`${directory}/${doc}`, 'utf8');
    for (const block of text.matchAll(/```(?:sh|bash)\n([\s\S]*?)```/g)) {
      for (const command of commandsOf(block[1]!)) {
        const talks = /^curl .*\$(BASE|INTERNAL_URL)\b/.test(command) || command.startsWith('npx audit-trail ');
        if (!talks && !/\$AUDIT_KEY\b/.test(command)) continue;
        const rule = NOT_LOCAL.find(([pattern]) => pattern.test(command));
        if (rule) left.push({ doc, text: command, why: rule[1] });
        else run.push({ doc, text: command });
      }
    }
  }
  return { run, left };
}

/**
 * A command as a reader adapts it to their own service: the docs' example ids become ids of this service,
 * the example tenant its tenant, and a usage line's optional flags (`[--all]`) are left out.
 */
export function localised(command: string, ids: { endpoint: string; stream: string; event: string; tenant: string }): string {
  return command
    .replace(/\s\[--[^\]]*\]/g, '')
    .replaceAll('wh_…', ids.endpoint)
    .replaceAll('str_…', ids.stream)
    .replaceAll('0190f3c2-...', ids.event)
    .replace(/\bacme\b/g, ids.tenant);
}
