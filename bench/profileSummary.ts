/**
 * Where a process's CPU went, from a V8 CPU profile (`node --cpu-prof`, passed to a benchmark's measured
 * process through BENCH_*_NODE_OPTIONS): self time grouped by where the code lives (a dependency of
 * node_modules, a folder of the service's build, Node's own internals, garbage collection, the program
 * outside JavaScript), and the functions with the most self time. Idle time is left out of the shares.
 * With a divisor, each line is also CPU µs per unit (a delivery, an event, a request) of the profiled run.
 *
 *   node bench/profileSummary.ts PROFILE.cpuprofile [UNITS] [TOP]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}

interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** The group a frame's self time counts in: a dependency, a folder of the build, or one of V8's pseudo-frames. */
function groupOf(frame: ProfileNode['callFrame']): string {
  if (frame.url === '') return `(${frame.functionName.replace(/[()]/g, '')})`;
  const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(frame.url);
  if (dependency) return dependency[1]!;
  if (frame.url.startsWith('node:')) return `node:${frame.url.slice(5).split('/')[0]}`;
  const built = /\/dist\/([^/]+)\//.exec(frame.url) ?? /\/src\/([^/]+)\//.exec(frame.url);
  if (built) return `service ${built[1]}/`;
  return frame.url.replace(/^file:\/\/.*\//, '');
}

function nameOf(frame: ProfileNode['callFrame']): string {
  const file = frame.url.replace(/^file:\/\/.*\/(node_modules\/)?/, '');
  return `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
}

const [path, unitsText, topText] = process.argv.slice(2);
if (!path) {
  console.error('usage: node bench/profileSummary.ts PROFILE.cpuprofile [UNITS] [TOP]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(path, 'utf8')) as Profile;
const units = unitsText ? Number(unitsText) : undefined;
const top = Number(topText ?? 25);
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const selfUs = new Map<number, number>();
profile.samples.forEach((id, index) => {
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0));
});

const groups = new Map<string, number>();
const functions = new Map<string, number>();
let busyUs = 0;
for (const [id, us] of selfUs) {
  const frame = byId.get(id)!.callFrame;
  if (frame.url === '' && frame.functionName === '(idle)') continue;
  busyUs += us;
  groups.set(groupOf(frame), (groups.get(groupOf(frame)) ?? 0) + us);
  functions.set(nameOf(frame), (functions.get(nameOf(frame)) ?? 0) + us);
}

// Inclusive time of the service's own functions (each counted once per sample however deep it recurses):
// what a part of the path costs with everything it calls, the libraries' and Node's work included.
const parentOf = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
const inclusive = new Map<string, number>();
for (const [id, us] of selfUs) {
  const frame = byId.get(id)!.callFrame;
  if (frame.url === '' && frame.functionName === '(idle)') continue;
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const caller = byId.get(at)!.callFrame;
    if (!groupOf(caller).startsWith('service ')) continue;
    const name = nameOf(caller);
    if (seen.has(name)) continue;
    seen.add(name);
    inclusive.set(name, (inclusive.get(name) ?? 0) + us);
  }
}

const line = (label: string, us: number) =>
  `${((us / busyUs) * 100).toFixed(1).padStart(5)} %  ${(us / 1e6).toFixed(2).padStart(7)} s` +
  `${units ? `  ${(us / units).toFixed(1).padStart(7)} µs/unit` : ''}  ${label}`;
const sorted = (entries: Map<string, number>) => [...entries].sort(([, a], [, b]) => b - a);
console.log(`${path}: ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s profiled, ${(busyUs / 1e6).toFixed(2)} s busy`);
console.log('\nby where the code lives (self time):');
for (const [group, us] of sorted(groups)) if (us / busyUs >= 0.005) console.log(line(group, us));
console.log(`\nthe ${top} functions with the most self time:`);
for (const [name, us] of sorted(functions).slice(0, top)) console.log(line(name, us));
console.log(`\nthe ${top} functions of the service with the most time, with what they call:`);
for (const [name, us] of sorted(inclusive).slice(0, top)) console.log(line(name, us));
