/**
 * The parts of prom-client the metrics use, loaded from their own files:
 * `Counter`, `Gauge`, `Histogram` and `Registry`. prom-client's entry module
 * also loads the default process metrics, the cluster aggregator (with
 * `node:cluster`), the push gateway client and OpenTelemetry's API, none of
 * which Herald uses, at about fifteen times the heap of these four
 * (docs/PERFORMANCE.md, Memory).
 *
 * prom-client publishes no `exports` map, so these paths are reachable; they
 * are not its documented API, and `spec/status/prom-client-parts.spec.ts`
 * checks each is the very class prom-client's entry exports, so an upgrade
 * that moves one fails the tests rather than a running node.
 */
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

const load = createRequire(import.meta.url);

export const Counter: typeof PromClient.Counter = load('prom-client/lib/counter.js');
export type Counter<T extends string = string> = PromClient.Counter<T>;
export const Gauge: typeof PromClient.Gauge = load('prom-client/lib/gauge.js');
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export const Histogram: typeof PromClient.Histogram = load('prom-client/lib/histogram.js');
export type Histogram<T extends string = string> = PromClient.Histogram<T>;
export const Registry: typeof PromClient.Registry = load('prom-client/lib/registry.js');
export type Registry = PromClient.Registry;
