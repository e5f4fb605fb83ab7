/**
 * `herald publish`: publishes one event over the admin API (`POST /v1/events`),
 * for producers outside the database and for trying an endpoint out.
 */
import { readFileSync } from 'node:fs';
import { ValidationError } from '../errors.ts';
import { JsonText } from '../producer/json-text.ts';
import { AdminClient } from './admin-client.ts';
import { connectionOf, parseCommand, UsageError, writeJson, type CliIo } from './cli-io.ts';
import { PUBLISH_USAGE } from './usage.ts';

export async function runPublish(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(
    args,
    { tenant: { type: 'string' }, type: { type: 'string' }, payload: { type: 'string' }, endpoint: { type: 'string' }, id: { type: 'string' },
      'ordering-key': { type: 'string' } },
    false,
  );
  if (values.help === true) {
    io.stdout.write(`${PUBLISH_USAGE}\n`);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  if (values.tenant === undefined || values.type === undefined || values.payload === undefined) {
    throw new UsageError('publish: --tenant, --type and --payload are required');
  }
  const text = values.payload === '-' ? await io.readStdin() : values.payload.startsWith('@') ? readPayloadFile(values.payload.slice(1)) : values.payload;
  let payload: JsonText;
  try {
    payload = JsonText.parse(text, '--payload');
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    throw new UsageError(`${error.message} (quote it for the shell: --payload '{"n":1}')`);
  }
  const envelope = JSON.stringify({
    tenantId: values.tenant,
    type: values.type,
    ...(values.endpoint === undefined ? {} : { endpointId: values.endpoint }),
    ...(values.id === undefined ? {} : { id: values.id }),
    ...(values['ordering-key'] === undefined ? {} : { orderingKey: values['ordering-key'] }),
  });
  // The payload's text goes into the body as it is, so it is delivered byte for byte as given.
  const body = `${envelope.slice(0, -1)},"payload":${payload.text}}`;
  const client = new AdminClient(connectionOf(values, io.env));
  try {
    const event = await client.postJsonText<{ id: string; type: string; tenantId: string }>('/v1/events', body);
    if (values.json === true) writeJson(io, event);
    else io.stdout.write(`Published ${event.type} as ${event.id} (tenant ${event.tenantId}).\n`);
    return 0;
  } finally {
    await client.close();
  }
}

function readPayloadFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--payload: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}
