/**
 * Logs: pino, JSON lines with scoped fields (endpointId, eventId, deliveryId,
 * attempt). Secrets and signatures are never passed to the logger; URLs are
 * logged without their query string, which may carry tokens.
 */
import { pino, type Logger } from 'pino';
import type { LogLevel } from './config/config.ts';
import type { Herald } from './herald.ts';

export function createLogger(level: LogLevel): Logger {
  return pino({ level, base: { service: 'herald' } });
}

/** Logs the engine's events: failures and operational events at warn, attempts at info or debug. */
export function logEngineEvents(herald: Herald, logger: Logger): void {
  herald.events.on('attempt', (e) => {
    const fields = { endpointId: e.endpointId, eventId: e.eventId, deliveryId: e.deliveryId, attempt: e.attempt, durationMs: e.durationMs };
    if (e.settlement.kind === 'delivered') logger.debug(fields, e.summary);
    else logger.info(fields, e.summary);
  });
  herald.events.on('breaker', (e) => logger.warn({ endpointId: e.endpointId, probeAt: e.probeAt }, `breaker ${e.state}`));
  herald.events.on('paused', (e) => logger.warn({ endpointId: e.endpointId, until: e.until }, 'mailbox paused by 429'));
  herald.events.on('operational', (e) => logger.warn({ endpointId: e.endpointId, tenantId: e.tenantId, deliveryId: e.deliveryId, operational: e.type }, `${e.type}: ${e.detail}`));
  herald.events.on('failure', (e) => logger.error({ where: e.where, err: e.error }, 'engine failure'));
}
