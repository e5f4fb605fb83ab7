/**
 * `herald event-types list|show|create|update|deprecate|undeprecate|delete`: the event-type catalog
 * over the admin API (`/v1/event-types`). A schema is given as a JSON file (`--schema order.json`);
 * `--schema none` removes the check (a new version without schema).
 */
import { readFileSync } from 'node:fs';
import { AdminClient } from './admin-client.ts';
import { connectionOf, parseCommand, UsageError, writeJson, type CliIo } from './cli-io.ts';
import { keyValues, table, time } from './table.ts';
import { EVENT_TYPES_USAGE } from './usage.ts';

interface EventTypeView {
  readonly name: string;
  readonly description: string;
  readonly versions: ReadonlyArray<{ readonly version: number; readonly schema: unknown; readonly createdAt: number }>;
  readonly deprecated: boolean;
  readonly deprecatedAt: number | null;
  readonly deprecationNote: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

const OPTIONS = {
  description: { type: 'string' },
  schema: { type: 'string' },
  note: { type: 'string' },
} as const;

const ACTIONS = ['list', 'show', 'create', 'update', 'deprecate', 'undeprecate', 'delete'] as const;

export async function runEventTypes(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, OPTIONS);
  if (values.help === true) {
    io.stdout.write(`${EVENT_TYPES_USAGE}\n`);
    return 0;
  }
  const [action = 'list', name, ...extra] = positionals;
  if (!(ACTIONS as readonly string[]).includes(action)) throw new UsageError(`event-types: unknown action '${action}' (${ACTIONS.join(', ')})`);
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  if (action === 'list' ? name !== undefined : name === undefined) {
    throw new UsageError(action === 'list' ? `unexpected argument '${name}'` : `event-types ${action}: the event type's name is required`);
  }
  if (values.note !== undefined && action !== 'deprecate') throw new UsageError('--note belongs to event-types deprecate');
  const editing = action === 'create' || action === 'update';
  if (!editing && (values.description !== undefined || values.schema !== undefined)) {
    throw new UsageError('--description and --schema belong to event-types create and update');
  }
  const path = `/v1/event-types/${encodeURIComponent(name ?? '')}`;
  const client = new AdminClient(connectionOf(values, io.env));
  try {
    let shown: EventTypeView;
    switch (action) {
      case 'list': {
        const { data } = await client.get<{ data: EventTypeView[] }>('/v1/event-types');
        if (values.json === true) writeJson(io, data);
        else if (data.length === 0) io.stdout.write('No event types: every type publishes unchecked.\n');
        else io.stdout.write(table(['NAME', 'VERSION', 'SCHEMA', 'DEPRECATED', 'DESCRIPTION'], data.map(rowOf)));
        return 0;
      }
      case 'delete':
        await client.delete(path);
        if (values.json === true) writeJson(io, { deleted: name });
        else io.stdout.write(`Deleted ${name}: its events publish unchecked from now on; events stored are kept.\n`);
        return 0;
      case 'show':
        shown = await client.get<EventTypeView>(path);
        break;
      case 'create':
        shown = await client.post<EventTypeView>('/v1/event-types', { name, ...changesOf(values) });
        break;
      case 'update': {
        const body = changesOf(values);
        if (Object.keys(body).length === 0) throw new UsageError('event-types update: give --description or --schema');
        shown = await client.patch<EventTypeView>(path, body);
        break;
      }
      case 'deprecate':
        shown = await client.patch<EventTypeView>(path, { deprecated: true, ...(values.note === undefined ? {} : { deprecationNote: values.note }) });
        break;
      default:
        shown = await client.patch<EventTypeView>(path, { deprecated: false });
    }
    if (values.json === true) writeJson(io, shown);
    else io.stdout.write(show(shown));
    return 0;
  } finally {
    await client.close();
  }
}

function changesOf(values: { readonly description?: string | undefined; readonly schema?: string | undefined }): Record<string, unknown> {
  return {
    ...(values.description === undefined ? {} : { description: values.description }),
    ...(values.schema === undefined ? {} : { schema: values.schema === 'none' ? null : schemaFile(values.schema) }),
  };
}

/** The JSON Schema in a file; the API checks that it compiles. */
function schemaFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`--schema: cannot read ${file}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError(`--schema: ${file} is not JSON: ${(error as Error).message}`);
  }
}

function rowOf(type: EventTypeView): unknown[] {
  const newest = type.versions.at(-1);
  return [type.name, newest?.version ?? '', newest?.schema === null || newest === undefined ? 'none' : 'yes', type.deprecated ? 'yes' : '', type.description];
}

function show(type: EventTypeView): string {
  const newest = type.versions.at(-1);
  const lines = keyValues([
    ['Name', type.name],
    ['Description', type.description],
    ['Version', `${newest?.version ?? ''} of ${type.versions.length}${newest?.schema === null ? ' (no schema: payloads unchecked)' : ''}`],
    ['Deprecated', type.deprecated ? `since ${time(type.deprecatedAt)}${type.deprecationNote === null ? '' : `: ${type.deprecationNote}`}` : 'no'],
    ['Created', time(type.createdAt)],
    ['Updated', time(type.updatedAt)],
  ]);
  const schema = newest?.schema === null || newest === undefined ? '' : `Schema:\n${JSON.stringify(newest.schema, null, 2)}\n`;
  return `${lines}${schema}`;
}
