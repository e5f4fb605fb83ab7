/**
 * Checks the shape of lib/ (run by `npm test`; `--graph` prints the room graph):
 *
 * - no two modules import each other, directly or around a cycle;
 * - no two rooms do: a room is a folder directly under lib/ (`engine/`) or a module standing
 *   alone at its top (`herald`), and an import from one room into another is an arrow between
 *   them. Type-only imports count: a type cycle is still a cycle of meaning;
 * - no module is longer than MAX_LINES.
 *
 *   tsx scripts/tools/check-layout.ts [--graph] [--root <dir>]   (default root: lib/ of this repository)
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const MAX_LINES = 600;

const { values } = parseArgs({ options: { graph: { type: 'boolean', default: false }, root: { type: 'string' } } });
const root = resolve(values.root ?? join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'lib'));

function modulesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? modulesUnder(path) : /\.c?ts$/.test(path) ? [path] : [];
  });
}

/** Relative static imports and re-exports, type-only ones included. */
function importsOf(file: string, text: string): string[] {
  return [...text.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]/gm)].map((m) => resolve(dirname(file), m[1] ?? ''));
}

function roomOf(file: string): string {
  const [first = '', ...rest] = relative(root, file).split(sep);
  return rest.length > 0 ? `${first}/` : first.replace(/\.c?ts$/, '');
}

/** Every cycle found by a depth-first walk, each as the path that closes it (the first node repeated last). */
function cyclesOf(graph: ReadonlyMap<string, Iterable<string>>): string[][] {
  const state = new Map<string, 'visiting' | 'done'>();
  const cycles: string[][] = [];
  const visit = (node: string, path: string[]): void => {
    if (state.get(node) === 'done') return;
    if (state.get(node) === 'visiting') {
      cycles.push([...path.slice(path.indexOf(node)), node]);
      return;
    }
    state.set(node, 'visiting');
    for (const next of graph.get(node) ?? []) if (graph.has(next)) visit(next, [...path, node]);
    state.set(node, 'done');
  };
  for (const node of graph.keys()) visit(node, []);
  return cycles;
}

const modules = new Map<string, string[]>();
const rooms = new Map<string, Map<string, string>>(); // room → room it imports → one import that shows it
const problems: string[] = [];
for (const file of modulesUnder(root)) {
  const text = readFileSync(file, 'utf8');
  const targets = importsOf(file, text);
  modules.set(file, targets);
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_LINES) problems.push(`too long: ${relative(root, file)} has ${lines} lines (at most ${MAX_LINES})`);
  const from = roomOf(file);
  if (!rooms.has(from)) rooms.set(from, new Map());
  for (const target of targets) {
    const to = roomOf(target);
    if (to !== from && !rooms.get(from)?.has(to)) rooms.get(from)?.set(to, `${relative(root, file)} -> ${relative(root, target)}`);
  }
}
for (const cycle of cyclesOf(modules)) problems.push(`module cycle: ${cycle.map((f) => relative(root, f)).join(' -> ')}`);
const roomGraph = new Map([...rooms].map(([room, arrows]) => [room, [...arrows.keys()]] as const));
for (const cycle of cyclesOf(roomGraph)) {
  const arrows = cycle.slice(1).map((to, i) => `${rooms.get(cycle[i] ?? '')?.get(to)}`);
  problems.push(`room cycle: ${cycle.join(' -> ')}\n    ${arrows.join('\n    ')}`);
}

if (values.graph) {
  for (const [room, arrows] of [...roomGraph].sort(([a], [b]) => a.localeCompare(b))) console.log(`${room} -> ${[...arrows].sort().join(', ') || '(nothing)'}`);
}
if (problems.length > 0) {
  for (const problem of problems) console.error(problem);
  process.exit(1);
}
console.log(`lib/ in one direction: ${modules.size} modules in ${rooms.size} rooms, no module or room cycle, none over ${MAX_LINES} lines`);
