// Preloaded into a compiled Herald service by the endpoints bench (`node --import`; worker
// threads inherit it): every 100 ms each thread writes its V8 heap figures as JSON to
// `heap-<threadId>.json` in the service's working folder (thread 0 is the main thread), where
// the bench reads them. Plain JavaScript: the service runs no loader.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';

const FILE = join(process.cwd(), `heap-${threadId}.json`);
const EVERY_MS = 100;

setInterval(() => {
  const { heapUsed, heapTotal, external } = process.memoryUsage();
  writeFileSync(FILE, JSON.stringify({ heapUsed, heapTotal, external }));
}, EVERY_MS).unref();
