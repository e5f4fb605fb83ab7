/**
 * Headless Chromium for the browser specs (the dashboard, the portal): Debian's
 * `/usr/bin/chromium` driven by playwright-core, one persistent context in a
 * throwaway profile. When Chromium is missing or cannot start, the calling
 * suite skips, saying why in one line.
 */
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';

export interface Chromium {
  readonly browser: BrowserContext;
  close(): Promise<void>;
}

/** Call from a `before` hook with its `this`: launches Chromium, or skips the suite. */
export async function launchChromiumOrSkip(hook: Mocha.Context): Promise<Chromium> {
  if (!existsSync(CHROMIUM)) {
    console.log(`      (skipped: ${CHROMIUM} is missing; .ci/run installs it with apt-get install chromium)`);
    hook.skip();
  }
  const profile = mkdtempSync(join(tmpdir(), 'herald-chromium-'));
  let browser: BrowserContext;
  try {
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      viewport: { width: 1400, height: 1000 },
    });
  } catch (error) {
    rmSync(profile, { recursive: true, force: true });
    console.log(`      (skipped: Chromium did not launch: ${String((error as Error).message).split('\n')[0]})`);
    return hook.skip();
  }
  return {
    browser,
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
