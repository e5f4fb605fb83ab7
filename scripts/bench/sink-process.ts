/**
 * The benchmark sink: a tiny node:http server in its own process (forked by
 * {@link startSinkProcess}), answering every POST once its body has arrived.
 *
 * Controlled over IPC:
 *   → {type: 'configure', status?, delayMs?, record?}   answer with `status` after `delayMs`; what to record
 *   → {type: 'take'}                                      reply {type: 'taken', count, times, ids} and reset
 *   ← {type: 'listening', port}                            once, at start
 *
 * `record`: 'count' counts only; 'times' keeps each request's arrival time;
 * 'ids' keeps arrival time and `webhook-id`. Arrival is when the request's
 * headers have been parsed (the first byte seen by a consumer's handler), on
 * the machine's monotonic clock (`machineNowMs`), so it compares with the
 * bench process's times to a fraction of a millisecond.
 */
import { createServer } from 'node:http';
import { machineNowMs } from './machine-clock.ts';

type Record = 'count' | 'times' | 'ids';

interface Config {
  status: number;
  delayMs: number;
  record: Record;
}

const config: Config = { status: 200, delayMs: 0, record: 'count', ...(JSON.parse(process.argv[2] ?? '{}') as Partial<Config>) };
let count = 0;
let times: number[] = [];
let ids: string[] = [];

const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
  const at = machineNowMs();
  count++;
  if (config.record !== 'count') {
    times.push(at);
    if (config.record === 'ids') ids.push(String(req.headers['webhook-id'] ?? ''));
  }
  const status = config.status;
  const delayMs = config.delayMs;
  req.on('data', () => {});
  req.on('end', () => {
    const answer = (): void => {
      res.writeHead(status, { 'content-length': '0' });
      res.end();
    };
    if (delayMs > 0) setTimeout(answer, delayMs);
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
  } else if (message.type === 'take') {
    process.send?.({ type: 'taken', count, times, ids });
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
