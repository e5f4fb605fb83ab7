/**
 * `npm run chaos [-- --only=lock,sigkill]`: the hostile battery. Runs each
 * case against real Herald processes (`herald start`), one after the other,
 * each under its own time limit (past it the case is stopped and reported as
 * failed, not left hanging), prints a progress line per step and a summary
 * table, writes `chaos-results.json` at the repository root and exits 1 if
 * any case failed. Traffic goes to 127.0.0.1 and ::1 only.
 *
 * Every process, mount and folder a case starts is removed when the case
 * ends, and on exit or Ctrl-C (see harness.ts). See docs/RELIABILITY.md.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describeMachine } from '../bench/harness.ts';
import { CaseContext, killEverything, type ChaosCase, type Check } from './harness.ts';
import { CLUSTER_FAULT_CASES } from './cluster-faults.ts';
import { CONSUMER_CASES } from './consumers.ts';
import { HOSTILE_INPUT_CASES } from './hostile-input.ts';
import { PROCESS_FAULT_CASES } from './process-faults.ts';
import { STORE_FAULT_CASES } from './store-faults.ts';

const CASES: readonly ChaosCase[] = [...STORE_FAULT_CASES, ...PROCESS_FAULT_CASES, ...HOSTILE_INPUT_CASES, ...CONSUMER_CASES, ...CLUSTER_FAULT_CASES];
const ORDER = ['lock', 'disk', 'sigkill', 'sigstop', 'outage', 'ssrf', 'input', 'tokens', 'consumers', 'changes', 'partition', 'skew'];
const sorted = [...CASES].sort((a, b) => ORDER.indexOf(a.name) - ORDER.indexOf(b.name));

const args = process.argv.slice(2);
const only = args.find((arg) => arg.startsWith('--only='))?.slice('--only='.length).split(',').map((s) => s.trim()).filter(Boolean);
const unknown = (only ?? []).filter((name) => !CASES.some((c) => c.name === name));
if (unknown.length > 0) {
  console.error(`unknown case ${unknown.join(', ')}; the cases are ${sorted.map((c) => c.name).join(', ')}`);
  process.exit(2);
}
const chosen = sorted.filter((c) => only === undefined || only.includes(c.name));
const OUT = fileURLToPath(new URL('../../chaos-results.json', import.meta.url));

// Leave nothing behind: on a normal exit, an uncaught error, Ctrl-C or SIGTERM.
process.on('exit', killEverything);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    console.log(`\n${signal}: stopping every Herald process and sink, unmounting`);
    killEverything();
    process.exit(130);
  });
}
process.on('unhandledRejection', (reason) => {
  // A case stopped by its time limit may leave promises that fail later; they must not end the run.
  console.log(`  (late rejection ignored: ${(reason as Error)?.message ?? String(reason)})`);
});

const t0 = Date.now();
const stamp = (): string => `[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s]`;

type Result = 'PASS' | 'FAIL' | 'SKIPPED';
interface CaseReport {
  readonly name: string;
  readonly checks: string;
  readonly result: Result;
  readonly seconds: number;
  readonly figures: Record<string, unknown>;
  readonly assertions: readonly Check[];
  readonly error?: string;
  readonly skipped?: string;
}

async function runCase(chaos: ChaosCase): Promise<CaseReport> {
  const started = Date.now();
  const controller = new AbortController();
  const ctx = new CaseContext(chaos.name, controller.signal, (text) => console.log(`${stamp()} ${chaos.name}: ${text}`));
  let error: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<'limit'>((resolve) => {
    timer = setTimeout(() => resolve('limit'), chaos.limitMs);
  });
  const running = chaos.run(ctx).then(
    () => 'done' as const,
    (e: unknown) => {
      error = e instanceof Error ? e.message : String(e);
      return 'done' as const;
    },
  );
  if ((await Promise.race([running, limit])) === 'limit') {
    controller.abort();
    error = `time limit of ${chaos.limitMs / 1000} s reached`;
    ctx.progress(`over its time limit (${chaos.limitMs / 1000} s): stopped`);
  }
  clearTimeout(timer);
  await ctx.cleanup();
  if (error !== undefined) ctx.progress(`error: ${error}`);
  const failed = error !== undefined || ctx.checks.some((c) => !c.pass) || (ctx.skipped === undefined && ctx.checks.length === 0);
  const result: Result = ctx.skipped !== undefined && error === undefined ? 'SKIPPED' : failed ? 'FAIL' : 'PASS';
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  console.log(`${stamp()} ${chaos.name}: ${result} in ${seconds} s`);
  return {
    name: chaos.name,
    checks: chaos.checks,
    result,
    seconds,
    figures: ctx.figures,
    assertions: ctx.checks,
    ...(error === undefined ? {} : { error }),
    ...(ctx.skipped === undefined ? {} : { skipped: ctx.skipped }),
  };
}

/** The code under test: HEAD, and the files under lib/ that differ from it (others may be editing them). */
function codeState(): { head: string; uncommittedInLib: string[] } {
  const git = (...a: string[]): string => {
    try {
      return execFileSync('git', a, { cwd: fileURLToPath(new URL('../../', import.meta.url)), encoding: 'utf8' }).trim();
    } catch {
      return '';
    }
  };
  return { head: git('rev-parse', '--short', 'HEAD'), uncommittedInLib: git('status', '--porcelain', '--', 'lib').split('\n').filter(Boolean) };
}

const machine = {
  ...describeMachine(),
  startedAt: new Date().toISOString(),
  code: codeState(),
};
console.log(
  `Herald chaos: ${chosen.map((c) => c.name).join(', ')}\n${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, load ${machine.loadAverage.join(' ')}\n` +
    `code: ${machine.code.head}${machine.code.uncommittedInLib.length > 0 ? ` + ${machine.code.uncommittedInLib.length} uncommitted file(s) under lib/` : ''}\n`,
);

const reports: CaseReport[] = [];
for (const chaos of chosen) {
  console.log(`${stamp()} ${chaos.name}: starting (limit ${chaos.limitMs / 1000} s)`);
  reports.push(await runCase(chaos));
}
const seconds = Math.round((Date.now() - t0) / 1000);
writeFileSync(OUT, `${JSON.stringify({ machine, seconds, cases: reports }, null, 2)}\n`);

// The table: one row per case; its figures, and the checks that failed.
const figuresText = (figures: Record<string, unknown>): string =>
  Object.entries(figures)
    .filter(([, v]) => v === null || ['number', 'string', 'boolean'].includes(typeof v))
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(', ');
const rows = reports.map((r) => {
  const failedChecks = r.assertions.filter((c) => !c.pass).map((c) => c.what);
  const why = r.error ?? r.skipped ?? (failedChecks.length > 0 ? `failed: ${failedChecks.join('; ')}` : '');
  return [r.name, r.checks, r.result, `${figuresText(r.figures)}${why === '' ? '' : ` | ${why}`}`];
});
const header = ['case', 'what was checked', 'result', 'figures'];
const widths = header.map((h, i) => Math.min(i === 3 ? 400 : 90, Math.max(h.length, ...rows.map((row) => row[i]!.length))));
const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
console.log(`\n${line(header)}\n| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`);
for (const row of rows) console.log(line(row));
const failed = reports.filter((r) => r.result === 'FAIL');
console.log(
  `\n${reports.filter((r) => r.result === 'PASS').length} passed, ${failed.length} failed, ${reports.filter((r) => r.result === 'SKIPPED').length} skipped in ${seconds} s; written to chaos-results.json`,
);
process.exit(failed.length > 0 ? 1 : 0);
