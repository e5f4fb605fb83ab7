/**
 * A started Herald (ManualClock) with a StatusServer on 127.0.0.1, and a
 * small admin API client, for the status-port specs.
 */
import { expect } from 'chai';
import { request } from 'undici';
import type { ConfigOverrides } from '../../lib/config/config.ts';
import { StatusServer } from '../../lib/api/status-server.ts';
import { startHerald, type TestHerald } from '../support/harness.ts';

export const TOKEN = 'test-admin-token-0123456789';

export interface ApiReply {
  readonly status: number;
  readonly text: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly json: any;
}

export interface StatusFixture {
  readonly t: TestHerald;
  readonly server: StatusServer;
  readonly base: string;
  api(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown, token?: string | null): Promise<ApiReply>;
  close(): Promise<void>;
}

export async function startStatus(overrides: ConfigOverrides = {}, options: { start?: boolean } = {}): Promise<StatusFixture> {
  const t = await startHerald(overrides, options);
  const server = new StatusServer(t.herald, { host: '127.0.0.1', port: 0, adminToken: TOKEN, clock: t.clock });
  const base = await server.listen();
  return {
    t,
    server,
    base,
    async api(method, path, body, token = TOKEN) {
      const headers: Record<string, string> = {};
      if (token !== null) headers.authorization = `Bearer ${token}`;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const response = await request(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      const text = await response.body.text();
      const isJson = String(response.headers['content-type'] ?? '').startsWith('application/json');
      return { status: response.statusCode, text, headers: response.headers, json: isJson ? JSON.parse(text) : undefined };
    },
    async close() {
      await server.close();
      await t.close();
    },
  };
}

/** The value of one sample in Prometheus text: `name{labels…} value`, the labels given matching. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line === '') continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const have = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v) && Object.keys(have).length === Object.keys(labels).length) {
      return Number(match[3]);
    }
  }
  return undefined;
}

export function expectOk(reply: ApiReply, status = 200): void {
  expect(reply.status, reply.text).to.equal(status);
}
