/**
 * Runs one scenario in this (forked) process and sends its result to the
 * runner: `tsx scripts/bench/scenario-child.ts <name> [--quick]`. Run alone,
 * it prints the result as JSON (handy under `node --cpu-prof --import tsx`).
 */
import type { ScenarioOptions, ScenarioResult } from './harness.ts';

const [name, ...flags] = process.argv.slice(2);
const options: ScenarioOptions = { quick: flags.includes('--quick') };

const scenario = (await import(`./scenarios/${name}.ts`)) as { run(options: ScenarioOptions): Promise<ScenarioResult> };
try {
  const result = await scenario.run(options);
  if (process.send !== undefined) process.send({ type: 'result', result }, () => process.exit(0));
  else {
    console.log(JSON.stringify(result, null, 2));
    process.exit(0);
  }
} catch (error) {
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
  if (process.send !== undefined) process.send({ type: 'error', message }, () => process.exit(1));
  else {
    console.error(message);
    process.exit(1);
  }
}
