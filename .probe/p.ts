import { SigningPool } from '../lib/signing/signing-pool.ts';
import { secretKey, generateSecret } from '../lib/signing/secret.ts';
const before = process.getActiveResourcesInfo();
const pool = new SigningPool({});
const keys = [secretKey(generateSecret())];
const r = await Promise.all(Array.from({ length: 40 }, (_, i) => pool.sign({ keys, id: `m${i}`, timestampSec: 1, body: 'x'.repeat(8192) })));
console.log(r.length, pool.stats, process.getActiveResourcesInfo());
await pool.close();
console.log(before, process.getActiveResourcesInfo());
