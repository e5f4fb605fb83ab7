/**
 * Root hooks for every spec: a test that leaves an HTTP server listening fails,
 * so each test that starts a server must also stop it. After the last spec, the
 * shared PostgreSQL test server (if a spec started one) is stopped.
 */
import type { Context } from 'mocha';
import { stopTestServer } from '../../test-kit/postgres-server.ts';

function listeningServers(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'TCPServerWrap').length;
}

export const mochaHooks = {
  async afterAll(this: Context): Promise<void> {
    // The server's shutdown checkpoint writes every spec's database out: seconds on a busy machine.
    this.timeout(120_000);
    await stopTestServer();
  },
  afterEach(this: Context): void {
    const open = listeningServers();
    if (open > 0) {
      throw new Error(`${open} server(s) still listening after "${this.currentTest?.fullTitle() ?? 'a test'}": stop every server a test starts`);
    }
  },
};
