/**
 * Progress of a long operation on stderr. On a terminal, one line redrawn in
 * place (`[#######.....] 700/1000 replayed`); elsewhere (logs, CI, tests) one
 * plain line per update. The total may be unknown until the end.
 */
export class ProgressBar {
  readonly #out: NodeJS.WritableStream & { readonly isTTY?: boolean };
  readonly #label: string;
  readonly #width: number;
  #drawn = false;

  constructor(out: NodeJS.WritableStream & { readonly isTTY?: boolean }, label: string, width = 30) {
    this.#out = out;
    this.#label = label;
    this.#width = width;
  }

  /** Shows `done` of `total` (`null`: not known yet). */
  update(done: number, total: number | null, note = ''): void {
    let text: string;
    if (total !== null && total > 0) {
      const filled = Math.round((Math.min(done, total) / total) * this.#width);
      text = `[${'#'.repeat(filled)}${'.'.repeat(this.#width - filled)}] ${done}/${total} ${this.#label}`;
    } else {
      text = `${done} ${this.#label}`;
    }
    if (note !== '') text += ` (${note})`;
    if (this.#out.isTTY === true) {
      this.#out.write(`\r\x1b[2K${text}`);
      this.#drawn = true;
    } else {
      this.#out.write(`${text}\n`);
    }
  }

  /** Ends the redrawn line. */
  finish(): void {
    if (this.#drawn) this.#out.write('\n');
    this.#drawn = false;
  }
}
