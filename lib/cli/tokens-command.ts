/**
 * `herald tokens create|list|revoke --tenant <id>`: the tenant tokens a tenant's developers use
 * for the API and the portal (`POST|GET /v1/tenants/:tenantId/tokens`,
 * `DELETE /v1/tenants/:tenantId/tokens/:id`). A token is printed once, when created.
 */
import { systemClock } from '../clock.ts';
import { AdminClient } from './admin-client.ts';
import { connectionOf, parseCommand, UsageError, writeJson, type CliIo } from './cli-io.ts';
import { table, time } from './table.ts';
import { TOKENS_USAGE } from './usage.ts';

interface TokenRecord {
  readonly id: string;
  readonly tenantId: string;
  readonly name: string;
  readonly createdAt: number;
  readonly expiresAt: number | null;
}

const OPTIONS = {
  tenant: { type: 'string' },
  name: { type: 'string' },
  expires: { type: 'string' },
} as const;

const ACTIONS = ['create', 'list', 'revoke'] as const;

/** A duration ahead of now: `90d`, `12h`, `2w`. */
const DURATION = /^(\d+)([mhdw])$/;
const UNIT_MS: Readonly<Record<string, number>> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 7 * 86_400_000 };

export async function runTokens(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, OPTIONS);
  if (values.help === true) {
    io.stdout.write(`${TOKENS_USAGE}\n`);
    return 0;
  }
  const [action, ...rest] = positionals;
  if (action === undefined || !(ACTIONS as readonly string[]).includes(action)) {
    throw new UsageError(`tokens: ${action === undefined ? 'an action is required' : `unknown action '${action}'`} (${ACTIONS.join(', ')})`);
  }
  const tenant = values.tenant;
  if (tenant === undefined || tenant === '') throw new UsageError(`tokens ${action}: --tenant is required`);
  if (action !== 'create' && (values.name !== undefined || values.expires !== undefined)) {
    throw new UsageError(`tokens ${action}: --name and --expires belong to tokens create`);
  }
  const expected = action === 'revoke' ? 1 : 0;
  if (rest.length < expected) throw new UsageError('tokens revoke: the token id (htk_…) is required');
  if (rest.length > expected) throw new UsageError(`unexpected argument '${rest[expected]}'`);
  const base = `/v1/tenants/${encodeURIComponent(tenant)}/tokens`;
  const client = new AdminClient(connectionOf(values, io.env));
  try {
    if (action === 'create') {
      const body = {
        ...(values.name === undefined ? {} : { name: values.name }),
        ...(values.expires === undefined ? {} : { expiresAt: expiryOf(values.expires, systemClock.now()) }),
      };
      const created = await client.post<TokenRecord & { token: string }>(base, body);
      if (values.json === true) writeJson(io, created);
      else {
        io.stdout.write(`${created.token}\n`);
        io.stderr.write(
          `Token ${created.id} for tenant ${created.tenantId}${created.expiresAt === null ? '' : `, until ${time(created.expiresAt)}`}. ` +
            'It is shown only now: hand it over by a private channel; revoke it with herald tokens revoke.\n',
        );
      }
      return 0;
    }
    if (action === 'list') {
      const { data } = await client.get<{ data: TokenRecord[] }>(base);
      if (values.json === true) writeJson(io, data);
      else if (data.length === 0) io.stdout.write(`No tokens for tenant ${tenant}.\n`);
      else io.stdout.write(table(['ID', 'NAME', 'CREATED', 'EXPIRES'], data.map((t) => [t.id, t.name, time(t.createdAt), t.expiresAt === null ? 'never' : time(t.expiresAt)])));
      return 0;
    }
    const id = rest[0] ?? '';
    await client.delete(`${base}/${encodeURIComponent(id)}`);
    if (values.json === true) writeJson(io, { revoked: id });
    else io.stdout.write(`Revoked ${id}: it is refused from now on.\n`);
    return 0;
  } finally {
    await client.close();
  }
}

/** `90d` (from now), or a time the API reads: epoch milliseconds or an ISO-8601 date-time. */
function expiryOf(text: string, now: number): number | string {
  const duration = DURATION.exec(text);
  if (duration !== null) return now + Number(duration[1]) * (UNIT_MS[duration[2] ?? 'd'] ?? 0);
  return /^\d+$/.test(text) ? Number(text) : text;
}
