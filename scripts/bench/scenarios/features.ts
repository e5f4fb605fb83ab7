/**
 * Features: what the platform features of issue 29 cost, in process, each against its own
 * baseline measured in the same run — the four measurements of scripts/bench/schema-check.ts,
 * payload-filter.ts, signature-kinds.ts and tracing-cost.ts, at smaller sizes under `--quick`.
 *
 * The target is that an unused feature costs nothing (the hot path unchanged for endpoints that
 * use none of them), each ratio ≤ 1.05:
 *
 * - tracing on with no OpenTelemetry SDK registered, against tracing off (the attempt path);
 * - a SQLite `publish()` of a type without a schema while the catalog holds another's, against
 *   no catalog at all;
 * - today's `planDeliveries` with no filters, against the one of before filters.
 *
 * What a feature costs when used (a schema checked, a filter present, ed25519 instead of HMAC,
 * an SDK recording a span per attempt) is reported, not targeted: it is the price of the feature.
 *
 * Tracing runs last: it registers a global tracer provider for its SDK modes, and the others
 * must measure without one.
 */
import { progress, round, type ScenarioOptions, type ScenarioResult } from '../harness.ts';
import { measurePayloadFilter, type PayloadFilterResult } from '../payload-filter.ts';
import { measureSchemaCheck, type SchemaCatalog, type SchemaCheckResult } from '../schema-check.ts';
import { measureSignatureKinds, SignatureRow } from '../signature-kinds.ts';
import { measureTracingCost, TracingMode, type TracingCostResult } from '../tracing-cost.ts';

/** The most an unused feature may cost, as a ratio to its baseline of the same run. */
const UNUSED_MAX_RATIO = 1.05;

/**
 * Sizes per run: quick near 20 s on 2 cores, full near 70 s. The full run has more rounds than the
 * scripts' defaults: its ratios are held to 1.05, and noise on a shared machine is of that order.
 */
const SIZES = {
  quick: {
    schemaCheck: { publishes: 5_000, rounds: 7 },
    payloadFilter: { events: 100_000, rounds: 7 },
    signatureKinds: { rounds: 3 },
    tracingCost: { deliveries: 10_000, rounds: 11 },
  },
  full: {
    schemaCheck: { publishes: 10_000, rounds: 11 },
    payloadFilter: { events: 500_000, rounds: 11 },
    signatureKinds: { rounds: 7 },
    tracingCost: { deliveries: 20_000, rounds: 21 },
  },
} as const;

interface UnusedCost {
  readonly what: string;
  readonly micros: number;
  readonly baselineMicros: number;
  readonly ratio: number;
  readonly target: number;
  readonly met: boolean;
}

const unused = (what: string, micros: number, baselineMicros: number, ratio: number): UnusedCost => ({
  what,
  micros: round(micros, 3),
  baselineMicros: round(baselineMicros, 3),
  ratio: round(ratio, 3),
  target: UNUSED_MAX_RATIO,
  met: ratio <= UNUSED_MAX_RATIO,
});

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const sizes = SIZES[options.quick ? 'quick' : 'full'];

  progress(`schema check at publish: ${sizes.schemaCheck.publishes} publishes × ${sizes.schemaCheck.rounds} rounds per catalog`);
  const schema = await measureSchemaCheck(sizes.schemaCheck);
  progress(`payload filters in planDeliveries: ${sizes.payloadFilter.events} events per case in ${sizes.payloadFilter.rounds} rounds`);
  const filter = await measurePayloadFilter(sizes.payloadFilter);
  progress(`signature schemes: ${sizes.signatureKinds.rounds} rounds per figure`);
  const signatures = await measureSignatureKinds(sizes.signatureKinds);
  progress(`tracing on the attempt path: ${sizes.tracingCost.deliveries} deliveries × ${sizes.tracingCost.rounds} rounds per mode`);
  const tracing = await measureTracingCost(sizes.tracingCost);

  const publishOf = (catalog: SchemaCatalog): SchemaCheckResult['rows'][number] => schema.rows.find((row) => row.catalog === catalog)!;
  const planOf = (name: string): PayloadFilterResult['rows'][number] => filter.rows.find((row) => row.name === name)!;
  const modeOf = (mode: TracingMode): TracingCostResult['rows'][number] => tracing.rows.find((row) => row.mode === mode)!;
  const signatureOf = (what: SignatureRow) => {
    const row = signatures.rows.find((r) => r.what === what)!;
    return { hmacUs: round(row.hmacMicros, 2), ed25519Us: round(row.ed25519Micros, 2), ratio: round(row.ratio, 1) };
  };

  // Each "unused" ratio is the one its script prints: medians of interleaved rounds for the
  // publish and the plan, the median of the rounds' ratios for tracing (CPU time, less noisy).
  const unusedCosts = {
    tracingNoSdk: unused('attempt path, CPU µs per delivery: tracing on without an SDK / tracing off', modeOf(TracingMode.api).microsPerDelivery, modeOf(TracingMode.off).microsPerDelivery, modeOf(TracingMode.api).ratio),
    schemaWithoutType: unused('SQLite publish(), µs: a type without a schema (another has one) / no catalog', publishOf('unchecked').microsPerPublish, publishOf('none').microsPerPublish, publishOf('unchecked').ratioToNone),
    filterNone: unused('planDeliveries, µs per event, 5 endpoints: no filters / the planDeliveries of before filters', planOf('none').microsPerEvent, planOf('before').microsPerEvent, planOf('none').ratioToBefore),
  };

  const inUse = {
    schemaChecked: {
      publishUs: round(publishOf('checked').microsPerPublish, 2),
      ratioToNoCatalog: round(publishOf('checked').ratioToNone, 3),
      checkAloneUs: round(schema.checkAloneMicrosPerEvent, 2),
    },
    payloadFilter: Object.fromEntries(
      ['one', 'all', 'all, 10 KB'].map((name) => [name, { planUs: round(planOf(name).microsPerEvent, 3), ratioToBefore: round(planOf(name).ratioToBefore, 3) }]),
    ),
    ed25519: {
      sign1KiB: signatureOf(SignatureRow.sign1KiB),
      sign16KiB: signatureOf(SignatureRow.sign16KiB),
      verify1KiB: signatureOf(SignatureRow.verify1KiB),
      poolCpuPerRequest: signatureOf(SignatureRow.poolCpu),
    },
    tracing: {
      storedContextNoSdk: { us: round(modeOf(TracingMode.apiStored).microsPerDelivery, 2), ratioToOff: round(modeOf(TracingMode.apiStored).ratio, 3) },
      sdk: {
        us: round(modeOf(TracingMode.sdk).microsPerDelivery, 2),
        offWithSdkUs: round(modeOf(TracingMode.offWithSdk).microsPerDelivery, 2),
        ratio: round(modeOf(TracingMode.sdk).ratio, 3),
      },
    },
  };

  return {
    sizes,
    unused: unusedCosts,
    inUse,
    // The scripts' rows as they measured them, for whoever wants the whole table.
    rows: {
      schemaCheck: schema.rows.map((row) => ({ ...row, microsPerPublish: round(row.microsPerPublish, 2), ratioToNone: round(row.ratioToNone, 3) })),
      payloadFilter: filter.rows.map((row) => ({ ...row, microsPerEvent: round(row.microsPerEvent, 3), ratioToBefore: round(row.ratioToBefore, 3), deliveriesPerEvent: round(row.deliveriesPerEvent, 2) })),
      signatureKinds: signatures.rows.map((row) => ({ ...row, hmacMicros: round(row.hmacMicros, 2), ed25519Micros: round(row.ed25519Micros, 2), ratio: round(row.ratio, 2) })),
      tracingCost: tracing.rows.map((row) => ({ ...row, microsPerDelivery: round(row.microsPerDelivery, 2), ratio: round(row.ratio, 3) })),
    },
    target: `unused costs nothing: tracing without an SDK, a publish of a type without a schema, planDeliveries without filters each <= ${UNUSED_MAX_RATIO}x its baseline; costs in use reported`,
    met: Object.values(unusedCosts).every((cost) => cost.met),
  };
}
