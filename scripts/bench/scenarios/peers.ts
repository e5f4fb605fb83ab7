/** The peers scenario (Herald on SQLite and PostgreSQL, BullMQ, graphile-worker) lives in scripts/bench/peers/. */
export { run } from '../peers/peers-scenario.ts';
