/**
 * The notice a Herald write sends other processes when it makes work
 * available that they could not otherwise know of (deliveries fanned out
 * into their slots, a replay, a resumed endpoint), on the channel the outbox
 * trigger uses (migration 2). Sent at commit, and only then. The payload
 * names the schema and this connection's `application_name`, so the
 * process that wrote it can ignore it.
 */
import { WORK_CHANNEL } from './schema.ts';

/** A select list item that notifies; a statement selects it where it should fire (notices fold per transaction). */
export function workNotice(schema: string): string {
  return `pg_notify('${WORK_CHANNEL}', '${schema} ' || current_setting('application_name'))`;
}
