/**
 * The `herald` command: `start` runs a node; the ops commands (`endpoints`, `event-types`,
 * `publish`, `deliveries`, `dlq`, `failures`, `tokens`, `status`) talk to a running node's admin
 * API; `secrets reencrypt` works on the store. Each command group lives in its own module.
 *
 * Exit codes: 0 done, 1 failed (API error, unreachable, bad configuration),
 * 2 bad usage (unknown command or flag, missing argument).
 */
import { isHeraldError } from '../errors.ts';
import { ApiError, CONNECTION_HELP, UsageError, type CliIo } from './cli-io.ts';
import {
  DELIVERIES_USAGE,
  DLQ_USAGE,
  ENDPOINTS_USAGE,
  EVENT_TYPES_USAGE,
  FAILURES_USAGE,
  REPLAYS_USAGE,
  PUBLISH_USAGE,
  SECRETS_USAGE,
  START_USAGE,
  STATUS_USAGE,
  TOKENS_USAGE,
} from './usage.ts';

type Command = (args: readonly string[], io: CliIo) => Promise<number>;

/** Each command's module is loaded only when it runs: the ops commands never load the engine. */
const COMMANDS: Readonly<Record<string, { load: () => Promise<Command>; usage: string }>> = {
  start: { load: async () => (await import('./start-command.ts')).runStart, usage: START_USAGE },
  endpoints: { load: async () => (await import('./endpoints-command.ts')).runEndpoints, usage: ENDPOINTS_USAGE },
  'event-types': { load: async () => (await import('./event-types-command.ts')).runEventTypes, usage: EVENT_TYPES_USAGE },
  publish: { load: async () => (await import('./publish-command.ts')).runPublish, usage: PUBLISH_USAGE },
  deliveries: { load: async () => (await import('./deliveries-command.ts')).runDeliveries, usage: DELIVERIES_USAGE },
  dlq: { load: async () => (await import('./dlq-command.ts')).runDlq, usage: DLQ_USAGE },
  failures: { load: async () => (await import('./failures-command.ts')).runFailures, usage: FAILURES_USAGE },
  replays: { load: async () => (await import('./replays-command.ts')).runReplays, usage: REPLAYS_USAGE },
  tokens: { load: async () => (await import('./tokens-command.ts')).runTokens, usage: TOKENS_USAGE },
  status: { load: async () => (await import('./status-command.ts')).runStatus, usage: STATUS_USAGE },
  secrets: { load: async () => (await import('./secrets-command.ts')).runSecrets, usage: SECRETS_USAGE },
};

const USAGE = `${START_USAGE}

Operations (against a running node's admin API; \`herald <command> --help\` for details):
  herald endpoints add|update|list|show|events|filter-test|enable|disable|rotate-secret
  herald event-types list|show|create|update|deprecate|undeprecate|delete   the catalog, its JSON Schemas checked at publish
  herald publish --tenant <id> --type <type> --payload <json>
  herald deliveries [--endpoint <id>] [--since 7d] …
  herald dlq list [--state new] | dlq ack|discard <id…> --note <why> --by <who>
  herald dlq replay [--id <id> | --endpoint <id> --since <time> --until <time>] [--dry-run]
  herald failures [--endpoint <id>] [--tenant <id>] | failures replay --endpoint <id> --kind <kind>
  herald replays list|show|cancel <id> | replays start --endpoint <id> --since <time> [--dry-run] [--wait]
  herald tokens create|list|revoke --tenant <id>
  herald status

Maintenance (on the store directly, with the configuration of \`herald start\`):
  herald secrets reencrypt   endpoint secrets under the current secret key

${CONNECTION_HELP}`;

export async function main(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '-h' || name === '--help' || name === 'help') {
    io.stdout.write(`${USAGE}\n`);
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    io.stderr.write(`herald: unknown command '${name}'\n${USAGE}\n`);
    return 2;
  }
  try {
    return await (await command.load())(rest, io);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(`herald: ${error.message}\n${command.usage}\n`);
      return 2;
    }
    if (error instanceof ApiError || isHeraldError(error)) {
      io.stderr.write(`herald: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

const processIo: CliIo = {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  async readStdin() {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin as AsyncIterable<Buffer>) chunks.push(chunk);
    return Buffer.concat(chunks).toString('utf8');
  },
};

main(process.argv.slice(2), processIo).then(
  (code) => {
    // Let stdout drain before exiting (a pipe may still hold a large --json answer).
    process.stdout.write('', () => process.exit(code));
  },
  (error: unknown) => {
    process.stderr.write(`herald: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
