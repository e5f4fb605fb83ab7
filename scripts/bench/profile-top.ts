/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): self time by
 * function, and total (inclusive) time of the hottest frames.
 *
 *   tsx scripts/bench/profile-top.ts <file.cpuprofile> [count]
 */
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
  children?: number[];
}

const [file, countArg] = process.argv.slice(2);
if (file === undefined) {
  console.error('usage: tsx scripts/bench/profile-top.ts <file.cpuprofile> [count]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Node[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] };
const count = Number(countArg ?? 25);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const sampleUs = new Map<number, number>();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i]!;
  sampleUs.set(id, (sampleUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
const label = (n: Node): string => {
  const url = n.callFrame.url.replace(/^.*\/(node_modules\/)?/, (m) => (m.includes('node_modules') ? 'nm/' : ''));
  return `${n.callFrame.functionName || '(anonymous)'} ${url}:${n.callFrame.lineNumber + 1}`;
};
const self = new Map<string, number>();
const total = new Map<string, number>();
let all = 0;
for (const [id, us] of sampleUs) {
  all += us;
  const node = byId.get(id)!;
  self.set(label(node), (self.get(label(node)) ?? 0) + us);
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const l = label(byId.get(cur)!);
    if (seen.has(l)) continue;
    seen.add(l);
    total.set(l, (total.get(l) ?? 0) + us);
  }
}
const pct = (us: number): string => `${((100 * us) / all).toFixed(1).padStart(5)} %`;
console.log(`${(all / 1e6).toFixed(2)} s sampled`);
console.log('\nself time');
for (const [l, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, count)) console.log(`${pct(us)}  ${l}`);
console.log('\ntotal time');
for (const [l, us] of [...total].sort((a, b) => b[1] - a[1]).slice(0, count)) console.log(`${pct(us)}  ${l}`);
