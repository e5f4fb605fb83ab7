/**
 * `herald start`: starts one Herald node with its status port.
 *
 * Flags override the environment, which overrides `--config`, which overrides
 * `config/default.json`. SIGINT/SIGTERM shut down in order (see lib/herald.ts)
 * and exit 0.
 */
import { parseArgs } from 'node:util';
import { configFromEnv, readConfigFile, resolveConfig, type ConfigOverrides, type LogLevel } from '../config/config.ts';
import { ConfigError, isHeraldError } from '../errors.ts';
import { Herald } from '../herald.ts';
import { createLogger, logEngineEvents } from '../logging.ts';
import { resolveAdminToken } from '../status/admin-token.ts';
import { StatusServer } from '../status/status-server.ts';
import { redactUri } from '../store/open-store.ts';

const USAGE = `Usage: herald start [options]

Options:
  --config <file>          JSON file overriding config/default.json
  --store <setting>        sqlite:<path>                (HERALD_STORE)
  --port <n>               status port                  (HERALD_PORT)
  --host <address>         address to bind              (HERALD_HOST)
  --data-dir <dir>         where the admin token is kept (HERALD_DATA_DIR)
  --allow-networks <cidrs> comma-separated CIDRs the sender may reach (HERALD_ALLOW_NETWORKS)
  --log-level <level>      fatal|error|warn|info|debug|trace|silent (HERALD_LOG_LEVEL)
  -h, --help               this text`;

/** The flags of `herald start`; throws a TypeError (ERR_PARSE_ARGS_*) on an unknown or malformed flag. */
function parseStartArgs(args: readonly string[]) {
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
}

export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '-h' || command === '--help') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined ? 2 : 0;
  }
  if (command !== 'start') {
    process.stderr.write(`herald: unknown command '${command}'\n${USAGE}\n`);
    return 2;
  }
  let parsed: ReturnType<typeof parseStartArgs>;
  try {
    parsed = parseStartArgs(rest);
  } catch (error) {
    // An unknown or malformed flag is a usage error, like an unknown command.
    process.stderr.write(`herald: ${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const { values } = parsed;
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const flags: ConfigOverrides = {};
  if (values.store !== undefined) flags.store = values.store;
  if (values.port !== undefined) flags.port = /^\d+$/.test(values.port) ? Number(values.port) : (values.port as unknown as number);
  if (values.host !== undefined) flags.host = values.host;
  if (values['data-dir'] !== undefined) flags.dataDir = values['data-dir'];
  if (values['allow-networks'] !== undefined) flags.allowNetworks = values['allow-networks'].split(',').map((s) => s.trim()).filter(Boolean);
  if (values['log-level'] !== undefined) flags.logLevel = values['log-level'] as LogLevel;

  const config = resolveConfig(values.config === undefined ? {} : readConfigFile(values.config), configFromEnv(process.env), flags);
  const logger = createLogger(config.logLevel);
  const admin = resolveAdminToken(config.adminToken, config.dataDir);
  // Listen for the signals before anything starts: a SIGTERM that arrives during
  // start-up or just after the banner still shuts down in order and exits 0.
  const stopped = new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  const herald = await Herald.open(config);
  logEngineEvents(herald, logger);
  const server = new StatusServer(herald, { host: config.host, port: config.port, adminToken: admin.token });
  let url: string;
  try {
    url = await server.listen();
  } catch (error) {
    await herald.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      throw new ConfigError('port', config.port, `cannot be bound on ${config.host} (${code})`);
    }
    throw error;
  }
  await herald.start();

  const tokenLine =
    admin.source === 'config' ? 'Admin token: from HERALD_ADMIN_TOKEN / config' : `Admin token: ${admin.token}  (kept in ${admin.path})`;
  process.stdout.write(
    [
      `Herald ${herald.nodeId} listening on ${url}  (store ${redactUri(config.store)})`,
      tokenLine,
      `Try: curl -H "Authorization: Bearer <token>" ${url}/v1/status`,
      '',
    ].join('\n'),
  );

  logger.info({ signal: await stopped }, 'shutting down');
  await server.close();
  await herald.close();
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (isHeraldError(error)) process.stderr.write(`herald: ${error.message}\n`);
    else process.stderr.write(`herald: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
