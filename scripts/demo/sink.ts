/**
 * A local webhook sink that misbehaves on a schedule, for the demo and for
 * trying Herald by hand. Each phase lasts `forMs` and answers every request
 * the same way: `ok` (200), `error` (500), `throttle` (429 with Retry-After),
 * `gone` (410) or `down` (the port is closed: connection refused). It
 * verifies every request's Standard Webhooks signature with `verify()`.
 *
 * Run alone: `npx tsx scripts/demo/sink.ts [port] [secret]` answers 200 forever.
 */
import { createServer, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { verify } from '../../lib/signing/verify.ts';

export type SinkBehaviour = 'ok' | 'error' | 'throttle' | 'gone' | 'down';

export interface SinkPhase {
  readonly behaviour: SinkBehaviour;
  readonly forMs: number;
  /** For `throttle`: the Retry-After seconds. */
  readonly retryAfterSec?: number;
}

export interface SinkRequest {
  readonly at: number;
  readonly webhookId: string;
  readonly path: string;
  readonly answered: number;
  readonly signatureValid: boolean | null;
}

export interface Sink {
  readonly url: string;
  /** The behaviour now, and a function to stop. */
  behaviour(): SinkBehaviour;
  close(): Promise<void>;
}

export async function startSink(options: {
  port: number;
  phases: readonly SinkPhase[];
  secrets?: () => readonly string[];
  onRequest?: (request: SinkRequest) => void;
  onPhase?: (phase: SinkPhase) => void;
}): Promise<Sink> {
  const startedAt = Date.now();
  let server: Server | undefined;
  let closed = false;

  const phaseAt = (now: number): SinkPhase => {
    let offset = now - startedAt;
    for (const phase of options.phases) {
      if (offset < phase.forMs) return phase;
      offset -= phase.forMs;
    }
    return options.phases[options.phases.length - 1] ?? { behaviour: 'ok', forMs: Infinity };
  };

  const listen = async (): Promise<void> => {
    const s = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const phase = phaseAt(Date.now());
        const body = Buffer.concat(chunks).toString('utf8');
        let signatureValid: boolean | null = null;
        const secrets = options.secrets?.() ?? [];
        if (secrets.length > 0) {
          try {
            verify({ payload: body, headers: req.headers, secret: secrets });
            signatureValid = true;
          } catch {
            signatureValid = false;
          }
        }
        const status = phase.behaviour === 'error' ? 500 : phase.behaviour === 'throttle' ? 429 : phase.behaviour === 'gone' ? 410 : 200;
        const headers: Record<string, string> = {};
        if (phase.behaviour === 'throttle') headers['retry-after'] = String(phase.retryAfterSec ?? 2);
        res.writeHead(status, headers);
        res.end();
        options.onRequest?.({
          at: Date.now(),
          webhookId: String(req.headers['webhook-id'] ?? ''),
          path: req.url ?? '/',
          answered: status,
          signatureValid,
        });
      });
    });
    await new Promise<void>((resolve) => s.listen(options.port, '127.0.0.1', () => resolve()));
    server = s;
  };

  const stop = async (): Promise<void> => {
    const s = server;
    server = undefined;
    if (s === undefined) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  // Follow the schedule: close the port while `down`, reopen it afterwards.
  let last: SinkPhase | undefined;
  const follow = async (): Promise<void> => {
    if (closed) return;
    const phase = phaseAt(Date.now());
    if (phase !== last) {
      last = phase;
      options.onPhase?.(phase);
      if (phase.behaviour === 'down') await stop();
      else if (server === undefined) await listen();
    }
  };
  await follow();
  const timer = setInterval(() => void follow(), 100);

  return {
    url: `http://127.0.0.1:${options.port}`,
    behaviour: () => phaseAt(Date.now()).behaviour,
    async close() {
      closed = true;
      clearInterval(timer);
      await stop();
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.argv[2] ?? 9099);
  const secret = process.argv[3];
  const sink = await startSink({
    port,
    phases: [{ behaviour: 'ok', forMs: Infinity }],
    ...(secret === undefined ? {} : { secrets: () => [secret] }),
    onRequest: (r) => console.log(`${new Date(r.at).toISOString()} ${r.path} webhook-id=${r.webhookId} → ${r.answered} signature=${r.signatureValid ?? 'not checked'}`),
  });
  console.log(`sink listening on ${sink.url}; Ctrl-C to stop`);
}
