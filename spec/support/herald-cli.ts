/**
 * `herald` (the CLI) as a real child process, for tests of the whole service:
 * start it, read its banner, call its status port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface HeraldProcess {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
  readonly exited: Promise<Exit>;
}

/** How to run the CLI: a Node entry (with its flags) and the folder it runs in. */
export interface HeraldEntry {
  readonly nodeArgs: readonly string[];
  readonly cwd: string;
}

/** The CLI from this checkout's sources, under tsx. */
const SOURCE_ENTRY: HeraldEntry = { nodeArgs: ['--import', 'tsx', 'lib/cli/main.ts'], cwd: ROOT };

/** `herald <args>` as a real child process, with no HERALD_* variable from this process leaking in. */
export function runHerald(args: readonly string[], env: Readonly<Record<string, string>> = {}, entry: HeraldEntry = SOURCE_ENTRY): HeraldProcess {
  const cleanEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !key.startsWith('HERALD_')) cleanEnv[key] = value;
  }
  const child = spawn(process.execPath, [...entry.nodeArgs, ...args], {
    cwd: entry.cwd,
    env: { ...cleanEnv, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc: HeraldProcess = {
    child,
    stdout: '',
    stderr: '',
    exited: once(child, 'close').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null })),
  };
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    proc.stdout += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    proc.stderr += chunk;
  });
  return proc;
}

/** Resolves with the match once stdout matches `pattern`; rejects if the process exits first. */
export function stdoutMatching(proc: HeraldProcess, pattern: RegExp): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = (): boolean => {
      const match = proc.stdout.match(pattern);
      if (match === null) return false;
      proc.child.stdout?.off('data', onData);
      proc.child.off('close', onExit);
      resolve(match);
      return true;
    };
    // Listeners run after the accumulating one registered in runHerald, so proc.stdout is up to date.
    const onData = (): void => void check();
    const onExit = (code: number | null): void => {
      proc.child.stdout?.off('data', onData);
      reject(new Error(`herald exited (${code}) before printing ${pattern}; stdout: ${proc.stdout} stderr: ${proc.stderr}`));
    };
    if (check()) return;
    proc.child.stdout?.on('data', onData);
    proc.child.once('close', onExit);
  });
}

/** Waits for the start banner; returns the URL and the token line. */
export async function banner(proc: HeraldProcess): Promise<{ url: string; port: number; tokenLine: string }> {
  const [, url, port] = await stdoutMatching(proc, /listening on (http:\/\/127\.0\.0\.1:(\d+))\b.*\n.*\n/);
  const tokenLine = proc.stdout.split('\n').find((line) => line.startsWith('Admin token:')) ?? '';
  return { url: url ?? '', port: Number(port), tokenLine };
}

export async function get(url: string, token?: string): Promise<{ status: number; body: string }> {
  const response = await request(url, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  return { status: response.statusCode, body: await response.body.text() };
}
