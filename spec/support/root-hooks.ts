/**
 * Root hooks for every spec: a test that leaves an HTTP server listening fails,
 * so each test that starts a server must also stop it.
 */
import type { Context } from 'mocha';

function listeningServers(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'TCPServerWrap').length;
}

export const mochaHooks = {
  afterEach(this: Context): void {
    const open = listeningServers();
    if (open > 0) {
      throw new Error(`${open} server(s) still listening after "${this.currentTest?.fullTitle() ?? 'a test'}": stop every server a test starts`);
    }
  },
};
