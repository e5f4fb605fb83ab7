/** The peers scenario (BullMQ, graphile-worker) lives in scripts/bench/peers/. */
export { run } from '../peers/peers-scenario.ts';
