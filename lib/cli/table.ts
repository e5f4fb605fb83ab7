/**
 * Plain-text output for people: aligned tables and `key: value` blocks.
 * Cells are cut at `maxCell` characters so one long error keeps a table readable.
 */
import { isoTime } from '../clock.ts';

export function table(headers: readonly string[], rows: ReadonlyArray<readonly unknown[]>, maxCell = 60): string {
  const text = rows.map((row) => row.map((cell) => cut(cellText(cell), maxCell)));
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((row) => row[i]?.length ?? 0)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...text.map(line)].join('\n') + '\n';
}

export function keyValues(entries: ReadonlyArray<readonly [string, unknown]>): string {
  const width = Math.max(...entries.map(([key]) => key.length));
  return entries.map(([key, value]) => `${`${key}:`.padEnd(width + 1)} ${cellText(value)}`).join('\n') + '\n';
}

/** Epoch milliseconds as `2026-01-31 12:00:00`, or `-`. */
export function time(epochMs: number | null | undefined): string {
  return epochMs === null || epochMs === undefined ? '-' : isoTime(epochMs).slice(0, 19).replace('T', ' ');
}

function cellText(cell: unknown): string {
  if (cell === null || cell === undefined || cell === '') return '-';
  if (Array.isArray(cell)) return cell.length === 0 ? '-' : cell.join(',');
  if (typeof cell === 'object') return JSON.stringify(cell);
  return String(cell).replace(/\s+/g, ' ');
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
