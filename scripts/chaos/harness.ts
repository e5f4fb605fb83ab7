/**
 * What every chaos case shares: real Herald processes (`herald start`, the
 * command `npm start` runs) on a throwaway data folder, an admin API client,
 * small recording servers on loopback, and one registry of everything a case
 * started (processes, mounts, folders, closers) so that a case that fails,
 * passes its time limit or is interrupted with Ctrl-C leaves nothing behind.
 *
 * Traffic goes to 127.0.0.1 and ::1 only: Herald binds 127.0.0.1, every sink
 * listens on loopback, and a case never gives Herald an endpoint whose
 * address could leave the machine (see `leavesMachine`).
 *
 * A case's life:  registered ──run(ctx)──► checks recorded ──cleanup()──► nothing left
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConfigOverrides } from '../../lib/config/config.ts';
import { freePort } from '../../test-kit/free-port.ts';
import { sleep, type SinkProcess } from '../bench/harness.ts';

export { percentile, round, sleep, startSinkProcess, waitFor, type SinkProcess } from '../bench/harness.ts';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = join(ROOT, 'lib/cli/main.ts');

/** One admin token per run; long enough for Herald's rule (≥ 16 characters). */
export const ADMIN_TOKEN = `chaos-${randomBytes(18).toString('base64url')}`;

// Results ---------------------------------------------------------------------

export interface Check {
  readonly what: string;
  readonly pass: boolean;
  readonly detail: string;
}

export interface CaseOutcome {
  readonly checks: readonly Check[];
  readonly figures: Record<string, unknown>;
  /** Set when the case could not run here (e.g. mount refused); then it neither passes nor fails. */
  readonly skipped?: string;
}

/** What a case gets: its time-limit signal, progress lines, checks, figures and the cleanup registry. */
export class CaseContext {
  readonly name: string;
  readonly signal: AbortSignal;
  readonly checks: Check[] = [];
  readonly figures: Record<string, unknown> = {};
  skipped: string | undefined;
  readonly #say: (text: string) => void;
  readonly #cleanups: Array<() => unknown> = [];

  constructor(name: string, signal: AbortSignal, say: (text: string) => void) {
    this.name = name;
    this.signal = signal;
    this.#say = say;
  }

  progress(text: string): void {
    this.#say(text);
  }

  /** Records an assertion; the case goes on either way, and fails at the end if any check failed. */
  check(what: string, pass: boolean, detail = ''): boolean {
    this.checks.push({ what, pass, detail });
    this.#say(`${pass ? 'ok  ' : 'FAIL'} ${what}${detail === '' ? '' : ` — ${detail}`}`);
    return pass;
  }

  figure(key: string, value: unknown): void {
    this.figures[key] = value;
  }

  /** Runs `fn` when the case ends (last registered first), whatever the end. */
  defer(fn: () => unknown): void {
    this.#cleanups.push(fn);
  }

  /** Throws once the case's time limit has passed, so loops stop. */
  alive(): void {
    if (this.signal.aborted) throw new Error('time limit reached');
  }

  async sleep(ms: number): Promise<void> {
    this.alive();
    await sleep(ms);
    this.alive();
  }

  /** A fresh folder under the system temp dir, removed at the end of the case. */
  tempDir(): string {
    const dir = mkdtempSync(join(tmpdir(), `herald-chaos-${this.name}-`));
    this.defer(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  }

  async cleanup(): Promise<void> {
    for (const fn of this.#cleanups.splice(0).reverse()) {
      try {
        await fn();
      } catch (error) {
        this.#say(`cleanup: ${(error as Error).message}`);
      }
    }
  }
}

/** One case of the battery. */
export interface ChaosCase {
  /** Short name for `--only` and the table. */
  readonly name: string;
  /** What it checks, in one line for the table. */
  readonly checks: string;
  /** Past this the case is stopped and fails. */
  readonly limitMs: number;
  run(ctx: CaseContext): Promise<void>;
}

// Everything started, for the last-resort cleanup on exit or Ctrl-C ---------------

const children = new Set<ChildProcess>();
const mounts = new Set<string>();

/** Kills every child still running and unmounts every mount, synchronously (safe in an `exit` handler). */
export function killEverything(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        child.kill('SIGCONT');
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  children.clear();
  for (const dir of mounts) unmount(dir);
}

export function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Mounts a tmpfs of `sizeBytes` on `dir`; returns the refusal as text when mount is not allowed here. */
export function mountTmpfs(ctx: CaseContext, dir: string, sizeBytes: number): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes}`, 'tmpfs', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? '').trim();
    return stderr === '' ? (error as Error).message : stderr;
  }
  mounts.add(dir);
  ctx.defer(() => unmount(dir));
  return undefined;
}

function unmount(dir: string): void {
  if (!mounts.has(dir)) return;
  mounts.delete(dir);
  try {
    execFileSync('umount', [dir], { stdio: 'ignore' });
  } catch {
    // Busy (a process still holds a file): detach it now, the kernel frees it when the last file closes.
    try {
      execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
    } catch {
      process.stderr.write(`chaos: could not unmount ${dir}; run \`umount -l ${dir}\`\n`);
    }
  }
}

// HTTP --------------------------------------------------------------------------

export interface HttpAnswer {
  readonly status: number;
  readonly text: string;
  readonly json: unknown;
  readonly headers: IncomingHttpHeaders;
  readonly ms: number;
}

export interface HttpOptions {
  readonly method?: string;
  readonly headers?: Record<string, string | number>;
  /** A string or Buffer, or chunks streamed one after the other (chunked, unless content-length is given). */
  readonly body?: string | Buffer | Iterable<Buffer>;
  readonly timeoutMs?: number;
  readonly host?: string;
}

/**
 * One HTTP request on a new connection to loopback. Resolves with the answer;
 * rejects on a network error or when `timeoutMs` passes (default 15 s).
 */
export function http(port: number, path: string, options: HttpOptions = {}): Promise<HttpAnswer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    let responded = false;
    const req = httpRequest(
      { host: options.host ?? '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers ?? {}, agent: false },
      (res) => {
        responded = true;
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = text === '' ? undefined : JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, text, json, headers: res.headers, ms: performance.now() - started });
        });
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer within ${options.timeoutMs ?? 15_000} ms`));
    }, options.timeoutMs ?? 15_000);
    req.on('error', (error) => {
      // A server may answer (413) and close before the whole body is sent: the answer counts, the EPIPE does not.
      if (responded) return;
      clearTimeout(timer);
      reject(error);
    });
    const body = options.body;
    if (body === undefined) req.end();
    else if (typeof body === 'string' || Buffer.isBuffer(body)) req.end(body);
    else void streamBody(req, body);
  });
}

async function streamBody(req: ReturnType<typeof httpRequest>, chunks: Iterable<Buffer>): Promise<void> {
  for (const chunk of chunks) {
    if (req.destroyed || req.writableEnded) return;
    if (!req.write(chunk)) await new Promise<void>((resolve) => {
      req.once('drain', resolve);
      req.once('close', resolve);
    });
  }
  if (!req.destroyed) req.end();
}

/** The error body Herald answers with: `{error: {code, message, field?, rule?}}`. */
export function errorOf(answer: HttpAnswer): { code?: string; message?: string; field?: string } {
  const error = (answer.json as { error?: { code?: string; message?: string; field?: string } } | undefined)?.error;
  return error ?? {};
}

// Herald processes ----------------------------------------------------------------

export interface HeraldNodeOptions {
  /** The SQLite file; shared by nodes that form a cluster. */
  readonly dbPath: string;
  /** Where the config file and the log go. */
  readonly dir: string;
  readonly port?: number;
  /** `['127.0.0.0/8']` for cases that deliver to a local sink; `[]` keeps the SSRF guard whole. */
  readonly allowNetworks: readonly string[];
  /** Engine, delivery, breaker … keys merged into the config file. */
  readonly config?: ConfigOverrides;
  readonly label?: string;
  /** More environment for the process (e.g. libfaketime's), on top of the caller's without `HERALD_*`. */
  readonly env?: Readonly<Record<string, string>>;
}

/** A `herald start` process and a client for its admin API. */
export class HeraldNode {
  readonly port: number;
  readonly logPath: string;
  readonly label: string;
  readonly #options: HeraldNodeOptions;
  readonly #configPath: string;
  #child: ChildProcess | undefined;
  #spawnedAt = 0;

  constructor(options: HeraldNodeOptions, port: number) {
    this.#options = options;
    this.port = port;
    this.label = options.label ?? 'herald';
    this.logPath = join(options.dir, `${this.label}.log`);
    this.#configPath = join(options.dir, `${this.label}.config.json`);
    const config: ConfigOverrides = {
      store: `sqlite:${options.dbPath}`,
      dataDir: options.dir,
      port,
      host: '127.0.0.1',
      adminToken: ADMIN_TOKEN,
      allowNetworks: [...options.allowNetworks],
      logLevel: 'warn',
      logFormat: 'json',
      ...options.config,
    };
    writeFileSync(this.#configPath, `${JSON.stringify(config, null, 2)}\n`);
  }

  get child(): ChildProcess | undefined {
    return this.#child;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get running(): boolean {
    const child = this.#child;
    return child !== undefined && child.exitCode === null && child.signalCode === null;
  }

  /** Spawns `herald start --config <file>` as `npm start` runs it, from the sources (tsx), logs appended to `logPath`. */
  spawn(): void {
    if (this.running) throw new Error(`${this.label} is already running`);
    mkdirSync(this.#options.dir, { recursive: true });
    const log = openSync(this.logPath, 'a');
    // No HERALD_* from the caller's environment: the config file says everything (HERALD_ALLOW_NETWORKS above all).
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('HERALD_'))), ...this.#options.env };
    this.#spawnedAt = performance.now();
    this.#child = track(
      spawn(process.execPath, ['--import', 'tsx', CLI, 'start', '--config', this.#configPath], {
        cwd: ROOT,
        env,
        stdio: ['ignore', log, log],
      }),
    );
    closeSync(log);
  }

  /** Milliseconds from the last spawn until `/readyz` answers 200; throws past `timeoutMs` or if the process exits. */
  async waitReady(ctx: CaseContext, timeoutMs = 30_000): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      ctx.alive();
      if (!this.running) throw new Error(`${this.label} exited (${this.#child?.exitCode ?? this.#child?.signalCode}) before it was ready; see ${this.logPath}`);
      const answer = await http(this.port, '/readyz', { timeoutMs: 2_000 }).catch(() => undefined);
      if (answer?.status === 200) return performance.now() - this.#spawnedAt;
      await sleep(20);
    }
    throw new Error(`${this.label} not ready within ${timeoutMs} ms; see ${this.logPath}`);
  }

  /** Spawns and waits until ready; the process is killed when the case ends. */
  async start(ctx: CaseContext, timeoutMs = 30_000): Promise<number> {
    this.spawn();
    ctx.defer(() => this.kill('SIGKILL'));
    return this.waitReady(ctx, timeoutMs);
  }

  /** Sends a signal; for SIGKILL and SIGTERM resolves once the process has exited (SIGKILL after 10 s of SIGTERM). */
  async kill(signal: NodeJS.Signals): Promise<void> {
    const child = this.#child;
    if (child === undefined || !this.running) return;
    if (signal === 'SIGSTOP' || signal === 'SIGCONT') {
      child.kill(signal);
      return;
    }
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    if (signal === 'SIGKILL') child.kill('SIGCONT');
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }

  /** An admin API call with the token. */
  api(method: string, path: string, body?: unknown, options: HttpOptions = {}): Promise<HttpAnswer> {
    return http(this.port, path, {
      ...options,
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...options.headers },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
  }

  /** `GET /v1/status`, or undefined when it does not answer 200 in time. */
  async status(timeoutMs = 5_000): Promise<StatusView | undefined> {
    const answer = await this.api('GET', '/v1/status', undefined, { timeoutMs }).catch(() => undefined);
    return answer?.status === 200 ? (answer.json as StatusView) : undefined;
  }

  /** Creates an endpoint; throws unless 201. */
  async createEndpoint(input: Record<string, unknown>): Promise<{ id: string }> {
    const answer = await this.api('POST', '/v1/endpoints', input);
    if (answer.status !== 201) throw new Error(`POST /v1/endpoints answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    return answer.json as { id: string };
  }

  /** Publishes events over HTTP in requests of at most 1 000; returns their ids; throws unless 202. */
  async publish(events: ReadonlyArray<Record<string, unknown>>): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < events.length; i += 1_000) {
      const answer = await this.api('POST', '/v1/events', events.slice(i, i + 1_000), { timeoutMs: 30_000 });
      if (answer.status !== 202) throw new Error(`POST /v1/events answered ${answer.status}: ${answer.text.slice(0, 300)}`);
      ids.push(...(answer.json as { data: Array<{ id: string }> }).data.map((e) => e.id));
    }
    return ids;
  }

  /** Every delivery of an endpoint (walks the cursor). */
  async deliveries(query: string): Promise<DeliveryView[]> {
    const out: DeliveryView[] = [];
    let cursor: string | null = null;
    do {
      const answer = await this.api('GET', `/v1/deliveries?${query}&limit=1000${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
      if (answer.status !== 200) throw new Error(`GET /v1/deliveries answered ${answer.status}: ${answer.text.slice(0, 300)}`);
      const page = answer.json as { data: DeliveryView[]; nextCursor: string | null };
      out.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor !== null);
    return out;
  }

  async attempts(deliveryId: string): Promise<AttemptView[]> {
    const answer = await this.api('GET', `/v1/deliveries/${encodeURIComponent(deliveryId)}/attempts`);
    if (answer.status !== 200) throw new Error(`GET attempts answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    return (answer.json as { data: AttemptView[] }).data;
  }
}

/** Collects ids from the sink into `seen` until every one of `ids` has arrived; returns those still missing. */
export async function waitArrived(ctx: CaseContext, sink: SinkProcess, seen: string[], ids: readonly string[], timeoutMs: number): Promise<string[]> {
  const deadline = performance.now() + timeoutMs;
  let missing: string[] = [...ids];
  while (performance.now() < deadline) {
    ctx.alive();
    seen.push(...(await sink.take()).ids);
    const got = new Set(seen);
    missing = ids.filter((id) => !got.has(id));
    if (missing.length === 0) return [];
    await sleep(200);
  }
  return missing;
}

/**
 * Waits until the (one) delivery of an endpoint is final, delivered or dead. `final` says
 * whether it got there within `timeoutMs`; `status` and `attempts` are what was last seen.
 */
export async function finalDelivery(
  ctx: CaseContext,
  node: HeraldNode,
  endpointId: string,
  timeoutMs: number,
): Promise<{ final: boolean; status: string; attempts: AttemptView[] }> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    ctx.alive();
    const [delivery] = await node.deliveries(`endpointId=${encodeURIComponent(endpointId)}`);
    const final = delivery !== undefined && (delivery.status === 'dead' || delivery.status === 'delivered');
    if (final || performance.now() >= deadline) {
      return { final, status: delivery?.status ?? 'none', attempts: delivery === undefined ? [] : await node.attempts(delivery.id) };
    }
    await sleep(100);
  }
}

/** Starts nothing: makes a node on a free port (call `start`). */
export async function heraldNode(options: HeraldNodeOptions): Promise<HeraldNode> {
  return new HeraldNode(options, options.port ?? (await freePort()));
}

export interface StatusView {
  readonly node: string;
  readonly slotsOwned: number;
  readonly slotCount: number;
  readonly fencedWrites: number;
  readonly deliveries: Readonly<Record<string, number>>;
  readonly store: { readonly reachable: boolean; readonly available?: boolean; readonly latencyMs: number; readonly error: string | null };
  readonly cluster: { readonly liveNodes: readonly string[]; readonly leases: ReadonlyArray<{ slot: number; epoch: number }> };
  /** This node's clock offset to the store's. */
  readonly clockOffsetMs?: number;
}

export interface DeliveryView {
  readonly id: string;
  readonly eventId: string;
  readonly endpointId: string;
  readonly status: string;
  readonly attempts: number;
}

export interface AttemptView {
  readonly number: number;
  readonly startedAt: number;
  readonly durationMs: number;
  readonly error: string | null;
  readonly outcome: { kind: string; status?: number; location?: string | null; retryAfter?: string | null; body?: string; code?: string; timeoutMs?: number };
}

/** Polls `/v1/status` until no delivery is pending or in flight and `delivered + dead ≥ expected`; returns the counts. */
export async function waitSettled(ctx: CaseContext, node: HeraldNode, expected: number, timeoutMs: number): Promise<Readonly<Record<string, number>> | undefined> {
  const deadline = performance.now() + timeoutMs;
  let last: Readonly<Record<string, number>> | undefined;
  while (performance.now() < deadline) {
    ctx.alive();
    const status = await node.status();
    last = status?.deliveries ?? last;
    const d = status?.deliveries ?? {};
    if ((d.pending ?? 0) === 0 && (d.in_flight ?? 0) === 0 && (d.delivered ?? 0) + (d.dead ?? 0) >= expected) return d;
    await sleep(200);
  }
  return last;
}

// Recording servers on loopback ------------------------------------------------------

export interface Received {
  readonly at: number;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export interface RecordingServer {
  readonly port: number;
  readonly url: string;
  readonly received: Received[];
  /** TCP connections accepted (a blocked sender never opens one). */
  connections: number;
  close(): Promise<void>;
}

/**
 * A node:http server on `host` (127.0.0.1 or ::1) that records every request
 * with its body and answers 200 (or what `answer` decides). Closed at the end of the case.
 */
export async function recordingServer(
  ctx: CaseContext,
  options: { host?: '127.0.0.1' | '::1'; port?: number; answer?: (request: Received) => number } = {},
): Promise<RecordingServer> {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: Received = { at: Date.now(), path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      received.push(request);
      res.writeHead(options.answer?.(request) ?? 200, { 'content-length': '0' });
      res.end();
    });
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const out: RecordingServer = {
    port,
    url: `http://${host === '::1' ? '[::1]' : host}:${port}`,
    received,
    connections: 0,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  server.on('connection', () => {
    out.connections++;
  });
  ctx.defer(() => out.close());
  return out;
}

/** Counts what arrives per `webhook-id`: distinct ids and duplicates. */
export function tally(ids: readonly string[]): { distinct: Set<string>; duplicates: number } {
  const distinct = new Set(ids);
  return { distinct, duplicates: ids.length - distinct.size };
}

export const fmtMs = (ms: number | undefined): string => (ms === undefined || !Number.isFinite(ms) ? '—' : `${Math.round(ms)} ms`);
