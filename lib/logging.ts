/**
 * Logs: pino, JSON lines by default and short human-readable lines on a
 * terminal (`logFormat`), with scoped fields (endpointId, eventId,
 * deliveryId, attempt). Full ids and durations in milliseconds go in fields
 * for machines; a message says a duration in human units (`durationText`).
 *
 * Secrets and signatures are never written: fields named like secrets,
 * tokens, authorization or `webhook-signature` are censored, and any text
 * (message, error, field) is scrubbed of `whsec_…` secrets, `v1,…`
 * signatures, bearer tokens and URL query strings (which may carry tokens).
 */
import { pino, stdSerializers, type DestinationStream, type Logger } from 'pino';
import { durationText, isoTime } from './clock.ts';
import type { LogFormat, LogLevel } from './config/config.ts';
import { OperationalEventType, type EngineEvents } from './engine/engine-events.ts';
import type { EventEmitter } from 'node:events';
import type { OperatorWebhookEvents } from './status/operator-webhook.ts';

export interface LoggerOptions {
  /** @default 'auto' (pretty when `destination` is stdout on a terminal) */
  readonly format?: LogFormat;
  /** Where lines go. @default process.stdout */
  readonly destination?: NodeJS.WritableStream & { readonly isTTY?: boolean };
}

const CENSOR = '[redacted]';

/** Field paths pino censors wherever a caller passes them. */
const REDACT_PATHS = [
  'secret',
  'secrets',
  'token',
  'adminToken',
  'authorization',
  'signature',
  '*.secret',
  '*.secrets',
  '*.token',
  '*.adminToken',
  '*.authorization',
  '*.signature',
  'headers["webhook-signature"]',
  '*.headers["webhook-signature"]',
  'headers.authorization',
  '*.headers.authorization',
];

const SCRUBS: ReadonlyArray<readonly [RegExp, string]> = [
  [/whsec_[A-Za-z0-9+/=]+/g, `whsec_${CENSOR}`],
  [/\bv1,[A-Za-z0-9+/=]{16,}/g, `v1,${CENSOR}`],
  [/\b(Bearer\s+)[^\s"',]+/gi, `$1${CENSOR}`],
  [/(\bhttps?:\/\/[^\s?#"']+)\?[^\s#"']*/g, `$1?${CENSOR}`],
];

/** The text with secrets, signatures, bearer tokens and URL queries censored. */
export function scrubText(text: string): string {
  let out = text;
  for (const [pattern, replacement] of SCRUBS) out = out.replace(pattern, replacement);
  return out;
}

function scrubValue(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => scrubValue(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) out[key] = scrubValue(inner, depth + 1);
  return out;
}

export function createLogger(level: LogLevel, options: LoggerOptions = {}): Logger {
  const destination = options.destination ?? process.stdout;
  const format = options.format ?? 'auto';
  const pretty = format === 'pretty' || (format === 'auto' && destination.isTTY === true);
  const stream: DestinationStream = pretty ? prettyStream(destination) : (destination as DestinationStream);
  return pino(
    {
      level,
      base: { service: 'herald' },
      redact: { paths: REDACT_PATHS, censor: CENSOR },
      serializers: { err: (error: Error) => scrubValue(stdSerializers.err(error)) },
      formatters: { log: (object) => scrubValue(object) as Record<string, unknown> },
      hooks: {
        logMethod(args, method) {
          method.apply(this, args.map((arg) => (typeof arg === 'string' ? scrubText(arg) : arg)) as Parameters<typeof method>);
        },
      },
    },
    stream,
  );
}

const LEVEL_NAMES: Readonly<Record<number, string>> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const OMITTED = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service']);

/** A tiny pretty-printer: `12:00:01.234 WARN  message key=value …` (no pino-pretty needed). */
function prettyStream(out: NodeJS.WritableStream): DestinationStream {
  return {
    write(line: string): void {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      const time = typeof record.time === 'number' ? isoTime(record.time).slice(11, 23) : '';
      const level = (LEVEL_NAMES[record.level as number] ?? String(record.level)).padEnd(5);
      const fields = Object.entries(record)
        .filter(([key]) => !OMITTED.has(key))
        .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
        .join(' ');
      out.write(`${time} ${level} ${String(record.msg ?? '')}${fields === '' ? '' : `  ${fields}`}\n`);
    },
  };
}

/** Logs the engine's events: failures and operational events at warn, attempts at info or debug. */
export function logEngineEvents(herald: { readonly events: EventEmitter<EngineEvents> }, logger: Logger): void {
  const log = logger.child({ component: 'engine' });
  herald.events.on('attempt', (e) => {
    const fields = { endpointId: e.endpointId, eventId: e.eventId, deliveryId: e.deliveryId, attempt: e.attempt, durationMs: e.durationMs };
    if (!e.applied) log.warn(fields, `settle refused (fenced): the slot's lease moved on; the new owner delivers it (${e.summary})`);
    else if (e.settlement.kind === 'delivered') log.debug(fields, e.summary);
    else log.info(fields, e.summary);
  });
  herald.events.on('breaker', (e) => log.warn({ endpointId: e.endpointId, probeAt: e.probeAt }, `breaker ${e.state}`));
  herald.events.on('paused', (e) => log.warn({ endpointId: e.endpointId, until: e.until }, 'mailbox paused by 429'));
  herald.events.on('operational', (e) =>
    log.warn(
      e.type === OperationalEventType.DEAD_LETTERS_UNREVIEWED
        ? { count: e.count, oldestAgeMs: e.oldestAgeMs, reviewWithinMs: e.reviewWithinMs, operational: e.type }
        : {
            endpointId: e.endpointId,
            tenantId: e.tenantId,
            deliveryId: e.deliveryId,
            ...(e.type === OperationalEventType.ENDPOINT_FAILING ? { windowMs: e.windowMs } : {}),
            operational: e.type,
          },
      `${e.type}: ${e.detail}`,
    ),
  );
  herald.events.on('feedRestart', (e) => log.warn({ reason: e.reason }, 'change feed restarted'));
  herald.events.on('predecessorReaped', (e) =>
    log.warn({ nodeId: e.nodeId, pid: e.pid, slots: e.slots.length }, `released the leases of a dead process on this host: ${e.why}`),
  );
  herald.events.on('clockSkew', (e) => {
    const offsetMs = Math.round(e.offsetMs);
    const offset = durationText(Math.abs(offsetMs));
    const ahead = offsetMs < 0;
    log.warn(
      { clockOffsetMs: offsetMs, thresholdMs: e.thresholdMs },
      e.skewed
        ? `this node's clock is ${offset} ${ahead ? 'ahead of' : 'behind'} the store's: the cluster runs on the corrected clock, but fix this host's time (NTP)`
        : `this node's clock is back within ${durationText(e.thresholdMs)} of the store's (${offset} ${ahead ? 'ahead' : 'behind'})`,
    );
  });
  herald.events.on('failure', (e) => log.error({ where: e.where, err: e.error }, 'engine failure'));
}

/** Logs what the operator webhook could not deliver. */
export function logOperatorWebhook(webhook: EventEmitter<OperatorWebhookEvents>, logger: Logger): void {
  const log = logger.child({ component: 'operator-webhook' });
  webhook.on('retrying', (e) => log.debug({ messageId: e.message.id, operational: e.message.type, attempt: e.attempt }, `retrying: ${e.error}`));
  webhook.on('failed', (e) =>
    log.warn({ messageId: e.message.id, operational: e.message.type, attempts: e.attempts }, `operator webhook failed: ${e.error}`),
  );
  webhook.on('dropped', (e) => log.warn({ messageId: e.message.id, operational: e.message.type }, 'operator webhook queue full: dropped'));
}
