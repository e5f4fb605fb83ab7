/**
 * Fails when modules under lib/ import each other in a cycle (run by `npm test`).
 * Follows relative static imports, type-only ones included: a type cycle is
 * still a design cycle.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'lib');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

const graph = new Map<string, string[]>();
for (const file of files(root)) {
  const text = readFileSync(file, 'utf8');
  const targets = [...text.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]/gm)].map((m) => resolve(dirname(file), m[1] ?? ''));
  graph.set(file, targets);
}

const state = new Map<string, 'visiting' | 'done'>();
const cycles: string[][] = [];
function visit(node: string, path: string[]): void {
  if (state.get(node) === 'done') return;
  if (state.get(node) === 'visiting') {
    cycles.push([...path.slice(path.indexOf(node)), node]);
    return;
  }
  state.set(node, 'visiting');
  for (const next of graph.get(node) ?? []) if (graph.has(next)) visit(next, [...path, node]);
  state.set(node, 'done');
}
for (const node of graph.keys()) visit(node, []);

if (cycles.length > 0) {
  for (const cycle of cycles) console.error(`import cycle: ${cycle.map((f) => relative(root, f)).join(' -> ')}`);
  process.exit(1);
}
console.log(`no import cycles among ${graph.size} modules in lib/`);
