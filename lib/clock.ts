/**
 * Time and randomness, injected.
 *
 * This is the only module in `lib/` that touches `Date`, the global timers or
 * `Math.random`. Everything else receives a {@link Clock} and a {@link Random},
 * so a 31-hour retry schedule runs in milliseconds under a {@link ManualClock}.
 */

/** A cancellable timer. Cancelling twice is harmless. */
export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Runs `fn` once after `delayMs`. Real timers are `unref()`ed: they never keep the process alive. */
  setTimeout(fn: () => void, delayMs: number): TimerHandle;
  /** Runs `fn` every `periodMs`. Missed periods are not replayed (as with Node's own intervals). */
  setInterval(fn: () => void, periodMs: number): TimerHandle;
}

/** A source of uniformly distributed numbers in [0, 1). */
export type Random = () => number;

export const systemClock: Clock = Object.freeze({
  now: () => Date.now(),
  setTimeout(fn: () => void, delayMs: number): TimerHandle {
    const timer = setTimeout(fn, Math.max(0, delayMs));
    timer.unref();
    return { cancel: () => clearTimeout(timer) };
  },
  setInterval(fn: () => void, periodMs: number): TimerHandle {
    const timer = setInterval(fn, Math.max(1, periodMs));
    timer.unref();
    return { cancel: () => clearInterval(timer) };
  },
});

export const systemRandom: Random = () => Math.random();

/**
 * Keeps the process running until the returned function is called. The clock's timers
 * never do (a library must not hold its host open), so a service starting up, whose store
 * may be waiting for a lock on such a timer, holds the process with this until it serves.
 */
export function holdProcessOpen(): () => void {
  const timer = setInterval(() => undefined, 60_000);
  return () => clearInterval(timer);
}

/** A deterministic generator (mulberry32) for tests and simulations. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Formats epoch milliseconds as an ISO-8601 string. */
export function isoTime(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** Largest first: a duration shows the first that fits and the one after it. */
const UNITS = [[DAY, 'd'], [HOUR, 'h'], [MINUTE, 'min'], [SECOND, 's']] as const;

/**
 * A duration for people, in every message, log line and table that shows one:
 * `250 ms`, `1.5 s` (one decimal below 10 s), `30 s`, `2 min`, `2 min 30 s`,
 * `1 h`, `1 h 30 min`, `2 d`, `1 d 3 h`: its two largest units, rounded down
 * (so a wait of 59 min 59 s never reads `1 h`; a limit of 1 h is `1 h`). A
 * negative duration is `0 ms` (an age across a clock step); one that is not
 * finite is shown as the number.
 */
export function durationText(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  const whole = Math.floor(Math.max(0, ms));
  if (whole < SECOND) return `${whole} ms`;
  if (whole < 10 * SECOND) return `${Math.floor(whole / 100) / 10} s`;
  const i = UNITS.findIndex(([unitMs]) => whole >= unitMs);
  const [largeMs, largeName] = UNITS[i]!;
  const text = `${Math.floor(whole / largeMs)} ${largeName}`;
  const small = UNITS[i + 1];
  const rest = small === undefined ? 0 : Math.floor((whole % largeMs) / small[0]);
  return rest > 0 && small !== undefined ? `${text} ${rest} ${small[1]}` : text;
}

/**
 * `2026-01-31`, or `2026-01-31T10:00Z`, `2026-01-31T10:00:00.250+02:00`: a
 * date, or a date and time with optional seconds and fraction and a required
 * `Z` or `±hh:mm` offset (a time without one would depend on the server's zone).
 */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:Z|([+-])(\d{2}):(\d{2})))?$/;

/** What {@link parseDate} accepts, in words, for error messages. */
export const ISO_TIME_RULE =
  'must be an ISO-8601 date (2026-01-31, midnight UTC) or date-time with Z or an offset ' +
  '(2026-01-31T09:30:00Z, 2026-01-31T09:30:00.5+02:00) that exists in the calendar';

/**
 * Parses an ISO-8601 date or date-time strictly ({@link ISO_TIME_RULE}): every
 * calendar field must exist (`2026-02-29`, month 13, `24:00` and leap seconds
 * are refused, where `Date.parse` would roll `2026-02-30` over to 2 March). A
 * date alone is midnight UTC. `undefined` when the text is not such a time.
 */
export function parseDate(text: string): number | undefined {
  const m = ISO_TIME.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = [m[1], m[2], m[3], m[4], m[5], m[6]].map((part) => Number(part ?? 0)) as [
    number, number, number, number, number, number,
  ];
  const fractionMs = Math.floor(Number(`0.${m[7] ?? '0'}`) * 1_000);
  const offsetMinutes = m[8] === undefined ? 0 : (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 60 + Number(m[10]));
  const exists =
    month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth(year, month) &&
    hour <= 23 && minute <= 59 && second <= 59 && Number(m[9] ?? 0) <= 23 && Number(m[10] ?? 0) <= 59;
  if (!exists) return undefined;
  const date = new Date(0);
  // setUTCFullYear, unlike Date.UTC, does not read years 0–99 as 1900–1999.
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, fractionMs);
  return date.getTime() - offsetMinutes * 60_000;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * Parses an HTTP date (RFC 9110 §5.6.7) whose shape the caller has checked;
 * `undefined` when `Date.parse` cannot read it.
 */
export function parseHttpDate(text: string): number | undefined {
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : ms;
}

interface PendingTimer {
  readonly seq: number;
  due: number;
  readonly periodMs: number | undefined;
  readonly fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only when told to.
 *
 * `advance()` fires one-shot timers in due order, setting `now()` to each
 * timer's due time before calling it. Intervals are coalesced: an interval that
 * fell due any number of times during an advance fires once, just before the
 * next one-shot timer (or at the end), like a real interval on a busy event
 * loop. Components driven by intervals must therefore read `now()` rather than
 * count ticks, which is what the timer wheel does.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #timers = new Set<PendingTimer>();

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, delayMs: number): TimerHandle {
    return this.#add(fn, Math.max(0, delayMs), undefined);
  }

  setInterval(fn: () => void, periodMs: number): TimerHandle {
    return this.#add(fn, Math.max(1, periodMs), Math.max(1, periodMs));
  }

  /** Moves time forward by `ms`, firing what falls due. */
  advance(ms: number): void {
    this.advanceTo(this.#now + ms);
  }

  /** Moves time forward to `epochMs` (never backwards), firing what falls due. */
  advanceTo(epochMs: number): void {
    const target = Math.max(this.#now, epochMs);
    for (;;) {
      const next = this.#earliestOneShot(target);
      if (next === undefined) break;
      this.#fireIntervals(next.due);
      if (next.cancelled) continue;
      this.#timers.delete(next);
      next.cancelled = true;
      next.fn();
    }
    this.#fireIntervals(target);
  }

  /** The number of live timers (one-shot and interval). */
  get pendingTimerCount(): number {
    return this.#timers.size;
  }

  /** The due time of the earliest one-shot timer, if any. */
  nextTimerAt(): number | undefined {
    let best: number | undefined;
    for (const t of this.#timers) {
      if (t.periodMs === undefined && (best === undefined || t.due < best)) best = t.due;
    }
    return best;
  }

  #add(fn: () => void, delayMs: number, periodMs: number | undefined): TimerHandle {
    const timer: PendingTimer = { seq: this.#seq++, due: this.#now + delayMs, periodMs, fn, cancelled: false };
    this.#timers.add(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
        this.#timers.delete(timer);
      },
    };
  }

  #earliestOneShot(limit: number): PendingTimer | undefined {
    let best: PendingTimer | undefined;
    for (const t of this.#timers) {
      if (t.periodMs !== undefined || t.due > limit) continue;
      if (best === undefined || t.due < best.due || (t.due === best.due && t.seq < best.seq)) best = t;
    }
    return best;
  }

  #fireIntervals(at: number): void {
    this.#now = Math.max(this.#now, at);
    for (const t of [...this.#timers]) {
      if (t.periodMs === undefined || t.cancelled || t.due > this.#now) continue;
      t.due = this.#now + t.periodMs;
      t.fn();
    }
  }
}
