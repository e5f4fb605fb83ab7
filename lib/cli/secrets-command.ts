/**
 * `herald secrets reencrypt`: rewrites every endpoint secret that is plain or
 * sealed under a previous key under the current one, so the previous keys can
 * be dropped (docs/OPERATING.md, "Secrets at rest"). It works on the store directly, with
 * the configuration `herald start` would use (`--config`, `HERALD_*`, flags),
 * and may run while nodes are running.
 *
 * Exit codes: 0 every endpoint's secrets are under the current key; 1 some
 * could not be opened (each listed with its key id), or no key is configured.
 */
import { parseArgs } from 'node:util';
import { configFromEnv, readConfigFile, resolveConfig, type ConfigOverrides } from '../config/config.ts';
import { Herald } from '../herald.ts';
import { SecretKeyOrigin } from '../signing/secret-key-source.ts';
import { UsageError, type CliIo } from './cli-io.ts';
import { ProgressBar } from './progress-bar.ts';
import { SECRETS_USAGE } from './usage.ts';

function parseSecretsArgs(args: readonly string[]) {
  try {
    return parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        config: { type: 'string' },
        store: { type: 'string' },
        'data-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export async function runSecrets(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseSecretsArgs(args);
  if (values.help === true) {
    io.stdout.write(`${SECRETS_USAGE}\n`);
    return 0;
  }
  if (positionals.length !== 1 || positionals[0] !== 'reencrypt') {
    throw new UsageError(positionals.length === 0 ? 'missing subcommand: reencrypt' : `unknown subcommand '${positionals.join(' ')}'`);
  }
  const flags: ConfigOverrides = {};
  if (values.store !== undefined) flags.store = values.store;
  if (values['data-dir'] !== undefined) flags.dataDir = values['data-dir'];
  const config = resolveConfig(values.config === undefined ? {} : readConfigFile(values.config), configFromEnv(io.env), flags, {
    logLevel: 'silent',
  });
  const herald = await Herald.open(config);
  try {
    const keys = herald.secretKeys;
    for (const warning of keys.warnings) io.stderr.write(`herald: warning: ${warning}\n`);
    if (keys.origin === SecretKeyOrigin.NONE) {
      io.stderr.write('herald: no secret key is configured: nothing to re-encrypt under\n');
      return 1;
    }
    io.stdout.write(`Re-encrypting endpoint secrets under key ${keys.box.currentKeyId} (${keys.origin}${keys.path === null ? '' : ` ${keys.path}`})\n`);
    const bar = new ProgressBar(io.stderr, 'endpoints checked');
    const outcome = await herald.reencryptSecrets((done, total) => bar.update(done, total));
    bar.finish();
    io.stdout.write(`${outcome.checked} endpoints checked, ${outcome.rewritten} rewritten, ${outcome.unreadable.length} unreadable\n`);
    for (const { error } of outcome.unreadable) io.stderr.write(`herald: ${error.message}\n`);
    return outcome.unreadable.length === 0 ? 0 : 1;
  } finally {
    await herald.close();
  }
}
