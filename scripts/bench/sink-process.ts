/**
 * The benchmark sink: a tiny node:http server in its own process (forked by
 * {@link startSinkProcess}), answering every POST once its body has arrived.
 *
 * Controlled over IPC:
 *   → {type: 'configure', status?, delayMs?, record?, capacity?}
 *                                                         answer with `status` after `delayMs`; what to record;
 *                                                         `capacity` (null: none) requests held at once at most
 *   → {type: 'take'}                                      reply {type: 'taken', count, times, ids, load} and reset
 *   ← {type: 'listening', port}                            once, at start
 *
 * `record`: 'count' counts only; 'times' keeps each request's arrival time;
 * 'ids' keeps arrival time and `webhook-id`. Arrival is when the request's
 * headers have been parsed (the first byte seen by a consumer's handler), on
 * the machine's monotonic clock (`machineNowMs`), so it compares with the
 * bench process's times to a fraction of a millisecond.
 *
 * `capacity`: a consumer that copes with so many requests at once. One that
 * arrives while `capacity` are being held (for `delayMs`) is answered 503 at
 * once and not held. `load` says how it went since the last take: requests
 * accepted and refused, and the time integral of the requests held (so their
 * mean over the span).
 */
import { createServer } from 'node:http';
import { machineNowMs } from './machine-clock.ts';

type Record = 'count' | 'times' | 'ids';

interface Config {
  status: number;
  delayMs: number;
  record: Record;
  capacity: number | null;
}

const config: Config = {
  status: 200,
  delayMs: 0,
  record: 'count',
  capacity: null,
  ...(JSON.parse(process.argv[2] ?? '{}') as Partial<Config>),
};
let count = 0;
let times: number[] = [];
let ids: string[] = [];

/** Requests held now, and their time integral (request-milliseconds) since `loadSince`. */
let held = 0;
let heldMs = 0;
let heldChangedAt = machineNowMs();
let loadSince = heldChangedAt;
let accepted = 0;
let refused = 0;

function changeHeld(by: number): void {
  const now = machineNowMs();
  heldMs += held * (now - heldChangedAt);
  heldChangedAt = now;
  held += by;
}

function takeLoad(): { accepted: number; refused: number; heldMs: number; spanMs: number } {
  changeHeld(0);
  const load = { accepted, refused, heldMs, spanMs: heldChangedAt - loadSince };
  loadSince = heldChangedAt;
  heldMs = 0;
  accepted = 0;
  refused = 0;
  return load;
}

const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
  const at = machineNowMs();
  count++;
  if (config.record !== 'count') {
    times.push(at);
    if (config.record === 'ids') ids.push(String(req.headers['webhook-id'] ?? ''));
  }
  const status = config.status;
  const delayMs = config.delayMs;
  const over = config.capacity !== null && held >= config.capacity;
  if (config.capacity !== null) {
    if (over) refused++;
    else {
      accepted++;
      changeHeld(1);
      // Answered, or the client went away first: either way no longer held.
      res.once('close', () => changeHeld(-1));
    }
  }
  req.on('data', () => {});
  req.on('end', () => {
    const answer = (): void => {
      res.writeHead(over ? 503 : status, { 'content-length': '0' });
      res.end();
    };
    if (delayMs > 0 && !over) setTimeout(answer, delayMs);
    else answer();
  });
});
server.headersTimeout = 60_000;
server.requestTimeout = 0;

process.on('message', (message: { type: string } & Partial<Config>) => {
  if (message.type === 'configure') {
    if (message.status !== undefined) config.status = message.status;
    if (message.delayMs !== undefined) config.delayMs = message.delayMs;
    if (message.record !== undefined) config.record = message.record;
    if (message.capacity !== undefined) config.capacity = message.capacity;
  } else if (message.type === 'take') {
    process.send?.({ type: 'taken', count, times, ids, load: takeLoad() });
    count = 0;
    times = [];
    ids = [];
  } else if (message.type === 'close') {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  }
});
// The bench process went away: never outlive it.
process.on('disconnect', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ type: 'listening', port: typeof address === 'object' && address !== null ? address.port : 0 });
});
