/**
 * `herald start`: starts one Herald node with its status port (metrics,
 * admin API, dashboard) and, when configured, the operator webhook.
 *
 * Flags override the environment, which overrides `--config`, which overrides
 * `config/default.json`. SIGINT/SIGTERM shut down in order: status port →
 * Herald (see lib/herald.ts) → operator webhook, and exit 0.
 */
import { parseArgs } from 'node:util';
import { holdProcessOpen, systemClock } from '../clock.ts';
import { configFromEnv, readConfigFile, resolveConfig, type ConfigOverrides, type LogLevel } from '../config/config.ts';
import { ConfigError } from '../errors.ts';
import { Herald } from '../herald.ts';
import { createLogger, logEngineEvents, logOperatorWebhook } from '../logging.ts';
import { SecretKeyOrigin } from '../signing/secret-key-source.ts';
import { resolveAdminToken } from '../api/admin-token.ts';
import { HeraldMetrics } from '../status/metrics.ts';
import { StatusServer } from '../api/status-server.ts';
import { redactUri } from '../store/open-store.ts';
import { UsageError, type CliIo } from './cli-io.ts';
import { START_USAGE } from './usage.ts';

/** The flags of `herald start`; an unknown or malformed flag is a UsageError. */
function parseStartArgs(args: readonly string[]) {
  try {
    return parseArgs({
      args: [...args],
      options: {
        config: { type: 'string' },
        store: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'data-dir': { type: 'string' },
        'allow-networks': { type: 'string' },
        'log-level': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export async function runStart(args: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseStartArgs(args);
  if (values.help === true) {
    io.stdout.write(`${START_USAGE}\n`);
    return 0;
  }
  const flags: ConfigOverrides = {};
  if (values.store !== undefined) flags.store = values.store;
  if (values.port !== undefined) flags.port = /^\d+$/.test(values.port) ? Number(values.port) : (values.port as unknown as number);
  if (values.host !== undefined) flags.host = values.host;
  if (values['data-dir'] !== undefined) flags.dataDir = values['data-dir'];
  if (values['allow-networks'] !== undefined) flags.allowNetworks = values['allow-networks'].split(',').map((s) => s.trim()).filter(Boolean);
  if (values['log-level'] !== undefined) flags.logLevel = values['log-level'] as LogLevel;

  const config = resolveConfig(values.config === undefined ? {} : readConfigFile(values.config), configFromEnv(io.env), flags);
  const logger = createLogger(config.logLevel, { format: config.logFormat });
  const admin = resolveAdminToken(config.adminToken, config.dataDir);
  // Listen for the signals before anything starts: a SIGTERM that arrives during
  // start-up or just after the banner still shuts down in order and exits 0.
  const stopped = new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  // Until the status port listens, nothing else keeps the process running while the store waits
  // (a producer holding SQLite's write lock at start-up).
  const release = holdProcessOpen();
  let herald: Herald;
  try {
    herald = await Herald.open(config);
  } finally {
    release();
  }
  logEngineEvents(herald, logger);
  for (const warning of herald.secretKeys.warnings) logger.warn(warning);
  const metrics = new HeraldMetrics(herald);
  const { operator } = config;
  // Loaded only when configured: it brings undici's whole entry module (see lib/delivery/undici-parts.ts).
  const webhook =
    operator.webhookUrl === null || operator.secret === null
      ? undefined
      : new (await import('../status/operator-webhook.ts')).OperatorWebhook(
          {
            url: operator.webhookUrl,
            secret: operator.secret,
            maxAttempts: operator.maxAttempts,
            backoffMs: operator.backoffMs,
            timeoutMs: operator.timeoutMs,
            node: herald.nodeId,
          },
          systemClock,
        ).attach(herald.events);
  if (webhook !== undefined) {
    metrics.observeOperatorWebhook(webhook);
    logOperatorWebhook(webhook, logger);
  }
  const server = new StatusServer(herald, { host: config.host, port: config.port, adminToken: admin.token, metrics });
  let url: string;
  try {
    url = await server.listen();
  } catch (error) {
    await herald.close();
    await webhook?.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      throw new ConfigError('port', config.port, `cannot be bound on ${config.host} (${code})`);
    }
    throw error;
  }
  await herald.start();

  const keys = herald.secretKeys;
  const keyLine =
    keys.origin === SecretKeyOrigin.NONE
      ? 'Secret key: none, endpoint secrets are stored plain (set HERALD_SECRET_KEY)'
      : `Secret key: ${keys.box.currentKeyId} from ${keys.origin === SecretKeyOrigin.CONFIG ? 'HERALD_SECRET_KEY / config' : keys.path}` +
        (keys.origin === SecretKeyOrigin.GENERATED ? '  (generated now: back it up with the database)' : '');
  const tokenLine =
    admin.source === 'config' ? 'Admin token: from HERALD_ADMIN_TOKEN / config' : `Admin token: ${admin.token}  (kept in ${admin.path})`;
  io.stdout.write(
    [
      `Herald ${herald.nodeId} listening on ${url}  (store ${redactUri(config.store)})`,
      tokenLine,
      keyLine,
      `Dashboard: ${url}/   Metrics: ${url}/metrics`,
      `Try: curl -H "Authorization: Bearer <token>" ${url}/v1/status`,
      '',
    ].join('\n'),
  );

  logger.info({ signal: await stopped }, 'shutting down');
  await server.close();
  await herald.close();
  await webhook?.close();
  metrics.close();
  return 0;
}
