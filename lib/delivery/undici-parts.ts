/**
 * The parts of undici the sender uses, loaded from their own files: `Pool`,
 * `buildConnector` and the error classes. undici's entry module loads all of
 * undici (fetch, WebSocket, the cache, the mock agent, …) and keeps about
 * four times the heap these parts need, for a node that only sends POSTs
 * (docs/PERFORMANCE.md, Memory).
 *
 * undici publishes no `exports` map, so these paths are reachable; they are
 * not its documented API, and `spec/delivery/undici-parts.spec.ts` checks each
 * is the very object undici's entry exports, so an upgrade that moves one
 * fails the tests rather than a running node.
 */
import { createRequire } from 'node:module';
import type * as Undici from 'undici';

const load = createRequire(import.meta.url);

export const Pool: typeof Undici.Pool = load('undici/lib/dispatcher/pool.js');
export type Pool = Undici.Pool;
export const buildConnector: typeof Undici.buildConnector = load('undici/lib/core/connect.js');
export const undiciErrors: typeof Undici.errors = load('undici/lib/core/errors.js');
