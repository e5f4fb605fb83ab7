/**
 * The package as a user gets it: `npm pack` (which builds dist/ through `prepare`), then the
 * tarball installed into a fresh project in a temporary folder outside the repository, where
 * nothing of the checkout (sources, tsx, dev dependencies) can be reached. Each test runs a
 * consumer there with plain Node: the ES module and CommonJS entries, the shipped
 * declarations, the `herald` binary, and a node started from the package.
 *
 * The consumer is an application on SQLite only, written in TypeScript: it installs Herald
 * and the type packages its own code uses (Node's, better-sqlite3's), and not the optional
 * peers of the other stores (`pg`, `mongodb`, `mongodb-memory-server-core`), which npm leaves
 * out unless asked for. Herald must import, run and type-check without them.
 *
 * The install is offline, from the npm cache that `npm ci` filled: the consumer gets a lock
 * file made of the repository's (the production packages, and the consumer's own type
 * packages, so the versions are the ones the suite tests), and `npm ci --offline` takes every
 * package from the cache. It runs with
 * `--ignore-scripts`, so better-sqlite3 is not compiled again (a minute here): the entries
 * load its addon only when a database is opened, and the one test that opens one borrows
 * the repository's build, made by `npm ci` for this very Node and the same version.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { banner, get, runHerald, type HeraldProcess } from '../support/herald-cli.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc');

interface LockEntry {
  readonly version?: string;
  readonly license?: string;
  readonly dev?: boolean;
  readonly dependencies?: Record<string, string>;
  readonly peerDependencies?: Record<string, string>;
  readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }>;
  readonly bin?: Record<string, string>;
  readonly engines?: Record<string, string>;
}

/** The packages of the stores the consumer does not use, and the type packages Herald's declarations once needed. */
const ABSENT_PACKAGES = ['pg', 'mongodb', 'mongodb-memory-server-core', '@types/opossum', '@types/pg'];

/** The consumer's own development packages: the types of what its TypeScript files use themselves. */
const CONSUMER_TYPE_PACKAGES = ['@types/node', '@types/better-sqlite3'];

interface PackResult {
  readonly filename: string;
  readonly integrity: string;
  readonly files: readonly { readonly path: string }[];
}

/** The environment for the consumer's processes: no loader this process may carry (tsx) reaches them. */
function plainEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  return env;
}

/** The repository's lock file. */
function repositoryLock(): Record<string, LockEntry> {
  return (JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> }).packages;
}

/** The consumer's package.json: Herald from the tarball, and its own type packages at the repository's versions. */
function consumerManifest(tarball: string): object {
  const lock = repositoryLock();
  return {
    name: 'herald-consumer',
    version: '1.0.0',
    private: true,
    dependencies: { herald: `file:${tarball}` },
    devDependencies: Object.fromEntries(CONSUMER_TYPE_PACKAGES.map((name) => [name, lock[`node_modules/${name}`]?.version])),
  };
}

/**
 * A lock file for the consumer, from the repository's own: Herald's production packages, and the
 * consumer's type packages with what they depend on. Nothing of Herald's optional peers.
 */
function consumerLock(tarball: string, integrity: string): object {
  const lock = repositoryLock();
  const herald = lock[''] ?? {};
  const manifest = consumerManifest(tarball) as { devDependencies: Record<string, string> };
  const packages: Record<string, unknown> = {
    '': { name: 'herald-consumer', version: '1.0.0', dependencies: { herald: `file:${tarball}` }, devDependencies: manifest.devDependencies },
    'node_modules/herald': {
      version: herald.version,
      resolved: `file:${tarball}`,
      integrity,
      license: herald.license,
      dependencies: herald.dependencies,
      peerDependencies: herald.peerDependencies,
      peerDependenciesMeta: herald.peerDependenciesMeta,
      bin: herald.bin,
      engines: herald.engines,
    },
  };
  // Herald's dependencies sit where they sat under the repository: at the top of node_modules.
  for (const [path, entry] of Object.entries(lock)) if (path !== '' && entry.dev !== true) packages[path] = entry;
  // The consumer's type packages and theirs, found as Node finds them: nested first, then at the top.
  const queue = CONSUMER_TYPE_PACKAGES.map((name) => `node_modules/${name}`);
  for (let path = queue.shift(); path !== undefined; path = queue.shift()) {
    if (packages[path] !== undefined) continue;
    const entry = lock[path];
    if (entry === undefined) throw new Error(`${path} is not in the repository's package-lock.json`);
    packages[path] = entry;
    for (const name of Object.keys(entry.dependencies ?? {})) {
      queue.push(lock[`${path}/node_modules/${name}`] === undefined ? `node_modules/${name}` : `${path}/node_modules/${name}`);
    }
  }
  return { name: 'herald-consumer', version: '1.0.0', lockfileVersion: 3, requires: true, packages };
}

/** Signs like any Standard Webhooks sender (node:crypto, not Herald), then checks it with Herald's `verify`. */
const SIGN_AND_VERIFY = `
const key = randomBytes(32);
const secret = 'whsec_' + key.toString('base64');
const id = 'msg_packaging';
const timestamp = String(Math.floor(Date.now() / 1000));
const body = '{"orderId":42}';
const signature = createHmac('sha256', key).update(id + '.' + timestamp + '.' + body).digest('base64');
const headers = { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': 'v1,' + signature };
verify({ payload: body, headers, secret });
let tampered = 'verified';
try {
  verify({ payload: body + ' ', headers, secret });
} catch (error) {
  tampered = error instanceof WebhookVerificationError ? error.code : String(error);
}
const result = { publish: typeof publish, verified: true, tampered };
`;

const ESM_CONSUMER = `import { createHmac, randomBytes } from 'node:crypto';
import { publish, verify, WebhookVerificationError } from 'herald';
${SIGN_AND_VERIFY}
console.log(JSON.stringify(result));
`;

const CJS_CONSUMER = `const { createHmac, randomBytes } = require('node:crypto');
const herald = require('herald');
const { publish, verify, WebhookVerificationError } = herald;
${SIGN_AND_VERIFY}
import('herald').then((esm) => {
  console.log(JSON.stringify({ ...result, sameModuleAsImport: esm.verify === verify && esm.HeraldError === herald.HeraldError }));
});
`;

/** Compiles only if the declarations type these calls (an `any` would leave each @ts-expect-error unused). */
const TS_ESM_CONSUMER = `import Database from 'better-sqlite3';
import { publish, verify, isHeraldError, type OutboxEvent } from 'herald';

const events: OutboxEvent[] = publish(new Database(':memory:'), { tenantId: 'acme', type: 'order.created', payload: { orderId: 42 } });
export const ids: string[] = events.map((event) => event.id);
try {
  verify({ payload: '{}', headers: { 'webhook-id': 'msg_1' }, secret: 'whsec_AAAA', toleranceSec: 60 });
} catch (error) {
  if (isHeraldError(error)) console.log(error.code);
}
// @ts-expect-error publish takes a better-sqlite3 Database, not a path
publish('herald.db', { tenantId: 'acme', type: 'order.created', payload: {} });
// @ts-expect-error verify takes one options object
verify('{}', {}, 'whsec_AAAA');
`;

const TS_CJS_CONSUMER = `import Database = require('better-sqlite3');
import herald = require('herald');

const events: herald.OutboxEvent[] = herald.publish(new Database(':memory:'), [{ tenantId: 'acme', type: 'order.created', payload: {} }]);
// @ts-expect-error tenantId is required
herald.publish(new Database(':memory:'), { type: 'order.created', payload: {} });
export = events;
`;

/** A NestJS-style project: compiled to CommonJS, resolved the classic way (`main`, `types`, no `exports`). */
const TS_COMMONJS_CONSUMER = `import Database from 'better-sqlite3';
import { publish, verify, type OutboxEvent } from 'herald';

export const events: OutboxEvent[] = publish(new Database(':memory:'), { tenantId: 'acme', type: 'order.created', payload: {} });
// @ts-expect-error verify takes one options object
verify('{}');
`;

const TS_CONFIG = {
  compilerOptions: {
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2022',
    strict: true,
    noEmit: true,
    // The declarations Herald ships, and the ones they import, are checked too.
    skipLibCheck: false,
    types: ['node'],
  },
  files: ['consumer.mts', 'consumer.cts'],
};

const TS_COMMONJS_CONFIG = {
  compilerOptions: {
    module: 'commonjs',
    moduleResolution: 'node10',
    target: 'es2022',
    strict: true,
    esModuleInterop: true,
    noEmit: true,
    // The declarations are checked by the project above; this one checks what resolution finds.
    skipLibCheck: true,
    types: ['node'],
  },
  files: ['consumer-commonjs.ts'],
};

/** The package a module path lies in (the innermost node_modules folder names it). */
const PACKAGE_OF_PATH = String.raw`(path) => /node_modules\/((?:@[^/]+\/)?[^/]+)\/(?!.*node_modules)/.exec(path)?.[1]`;

/** Imports the entry, then lists the packages whose CommonJS modules are loaded (every store driver is CommonJS). */
const ESM_LOADED = `import { createRequire } from 'node:module';
const herald = await import('herald');
const packages = new Set(Object.keys(createRequire(import.meta.url).cache).map(${PACKAGE_OF_PATH}));
console.log(JSON.stringify({ Herald: typeof herald.Herald, packages: [...packages].filter(Boolean).sort() }));
`;

const CJS_LOADED = `const herald = require('herald');
const packages = new Set(Object.keys(require.cache).map(${PACKAGE_OF_PATH}));
console.log(JSON.stringify({ Herald: typeof herald.Herald, packages: [...packages].filter(Boolean).sort() }));
`;

/** Asks for each store whose driver is not installed, and publishes into MongoDB: each failure as the application sees it. */
const OTHER_STORES = `import { Herald, publishMongo, resolveConfig } from 'herald';
const failures = {};
const failure = (error) => ({ name: error.name, code: error.code, message: error.message });
for (const store of ['postgres://herald:s3cret@127.0.0.1:1/herald', 'mongodb://herald:s3cret@127.0.0.1:1/herald?replicaSet=rs0', 'mongodb-memory-server']) {
  try {
    const herald = await Herald.open(resolveConfig({ store, dataDir: process.argv[2], logLevel: 'silent' }));
    await herald.close();
    failures[store] = 'opened';
  } catch (error) {
    failures[store] = failure(error);
  }
}
const session = { inTransaction: () => true, withTransaction: (fn) => fn() };
try {
  await publishMongo(session, { tenantId: 'acme', type: 'order.created', payload: {} }, { db: { collection: () => { throw new Error('touched the database'); } } });
  failures.publishMongo = 'published';
} catch (error) {
  failures.publishMongo = failure(error);
}
console.log(JSON.stringify(failures));
`;

/**
 * An application on SQLite, from the library: Herald on a file, an endpoint on a 127.0.0.1 sink,
 * an event published on the application's own better-sqlite3 connection (its transaction), and
 * the delivery the sink receives, checked with Herald's verify.
 */
const SQLITE_APPLICATION = `import { createServer } from 'node:http';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Herald, publish, resolveConfig, verify } from 'herald';

const dir = process.argv[2];
let received;
const arrived = new Promise((resolve) => (received = resolve));
const sink = createServer((request, response) => {
  let body = '';
  request.on('data', (chunk) => (body += chunk));
  request.on('end', () => {
    response.end();
    received({ headers: request.headers, body });
  });
});
await new Promise((resolve) => sink.listen(0, '127.0.0.1', resolve));
const herald = await Herald.open(resolveConfig({ store: 'sqlite:' + join(dir, 'herald.db'), dataDir: dir, allowNetworks: ['127.0.0.0/8'], logLevel: 'silent' }));
const { secret } = await herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:' + sink.address().port + '/hooks' });
await herald.start();
const db = new Database(join(dir, 'herald.db'));
const [event] = db.transaction(() => publish(db, { tenantId: 'acme', type: 'order.created', payload: { orderId: 42 } }))();
db.close();
const delivery = await arrived;
const verified = verify({ payload: delivery.body, headers: delivery.headers, secret });
await herald.close();
await new Promise((resolve) => sink.close(resolve));
console.log(JSON.stringify({ sameEvent: verified.id === event.id, body: JSON.parse(delivery.body) }));
`;

/** The same application's TypeScript, checked against Herald's declarations alone (it imports nothing else). */
const TS_SQLITE_APPLICATION = `import { ConfigError, Herald, MongoStore, publish, publishMongo, resolveConfig, systemClock, type OutboxEvent, type SqliteConnection } from 'herald';

export async function publishOrder(connection: SqliteConnection): Promise<string[]> {
  const herald = await Herald.open(resolveConfig({ store: 'sqlite:./data/herald.db', dataDir: './data' }));
  await herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/hooks' });
  const events: OutboxEvent[] = publish(connection, { tenantId: 'acme', type: 'order.created', payload: { orderId: 42 } });
  await herald.close();
  return events.map((event) => event.id);
}

// The MongoDB names are still the package's, typed without the driver installed.
export const store = new MongoStore({ uri: 'mongodb://db.example/herald?replicaSet=rs0', clock: systemClock });
export const published: Promise<OutboxEvent[]> = publishMongo(
  { inTransaction: () => false, withTransaction: (fn) => fn() },
  { tenantId: 'acme', type: 'order.created', payload: {} },
  { db: { collection: () => ({}) } },
);
export const missing = (error: unknown): boolean => error instanceof ConfigError;
// @ts-expect-error publish takes the application's connection, not a path
publish('herald.db', { tenantId: 'acme', type: 'order.created', payload: {} });
`;

const TS_SQLITE_APPLICATION_CONFIG = {
  compilerOptions: { ...TS_CONFIG.compilerOptions, skipLibCheck: false },
  files: ['application.mts'],
};

describe('the npm package', function () {
  let dir: string;
  let consumer: string;
  let packed: PackResult;

  before(async function () {
    // npm pack builds (tsc) and npm ci unpacks ≈ 130 packages: tens of seconds on a busy machine.
    this.timeout(240_000);
    dir = mkdtempSync(join(tmpdir(), 'herald-package-'));
    expect(relative(ROOT, dir).startsWith('..'), `${dir} must be outside the repository`).to.equal(true);
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
    [packed] = JSON.parse(stdout) as [PackResult];

    consumer = join(dir, 'consumer');
    mkdirSync(consumer);
    const tarball = `../${packed.filename}`;
    writeFileSync(join(consumer, 'package.json'), JSON.stringify(consumerManifest(tarball)));
    writeFileSync(join(consumer, 'package-lock.json'), JSON.stringify(consumerLock(tarball, packed.integrity)));
    try {
      await run('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: consumer, env: plainEnv() });
    } catch (error) {
      throw new Error(`installing the tarball offline failed (run \`npm ci\` in the repository first: it fills the npm cache): ${(error as { stderr?: string }).stderr ?? error}`);
    }
  });

  after(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs `node <args>` in the consumer project. */
  async function node(args: readonly string[]): Promise<string> {
    const { stdout } = await run(process.execPath, [...args], { cwd: consumer, env: plainEnv() });
    return stdout;
  }

  it('holds the compiled build in both formats, the default configuration, the bin, the README and the manual its links reach; no sources, specs or scripts', () => {
    const paths = packed.files.map((file) => file.path);
    expect(paths).to.include.members([
      'dist/index.js',
      'dist/index.d.ts',
      'dist/index.cjs',
      'dist/index.d.cts',
      'dist/cli/main.js',
      'dist/signing/sign-worker.js',
      'dist/store/sqlite/store-thread.js',
      'config/default.json',
      'scripts/bin/herald.mjs',
      'README.md',
      'docs/CONFIGURATION.md',
      'docs/DELIVERY.md',
      'package.json',
    ]);
    expect(paths.filter((path) => !/^(dist\/|config\/default\.json$|scripts\/bin\/herald\.mjs$|README\.md$|CONTRIBUTING\.md$|docs\/[A-Z-]+\.md$|package\.json$)/.test(path))).to.deep.equal([]);
    expect(paths.filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts'))).to.deep.equal([]);
  });

  it('installs without tsx: nothing in the package needs a TypeScript loader', () => {
    expect(existsSync(join(consumer, 'node_modules', 'herald', 'dist', 'index.js'))).to.equal(true);
    expect(existsSync(join(consumer, 'node_modules', 'tsx'))).to.equal(false);
  });

  context('when the application uses only SQLite', () => {
    it('installs without the optional peers of the other stores and without type packages for Herald', async () => {
      const manifest = JSON.parse(readFileSync(join(consumer, 'node_modules', 'herald', 'package.json'), 'utf8')) as {
        dependencies: Record<string, string>;
        peerDependenciesMeta: Record<string, { optional?: boolean }>;
      };
      expect(manifest.peerDependenciesMeta).to.deep.equal({ mongodb: { optional: true }, 'mongodb-memory-server-core': { optional: true }, pg: { optional: true } });
      expect(Object.keys(manifest.dependencies).filter((name) => name.startsWith('@types/') || ABSENT_PACKAGES.includes(name))).to.deep.equal([]);
      // npm ls exits non-zero on any problem in the tree: an optional peer left out is none (it lists it without a version).
      const listing = await run('npm', ['ls', '--all', '--json', '--offline'], { cwd: consumer, env: plainEnv(), maxBuffer: 16 * 1024 * 1024 });
      interface Listed {
        readonly version?: string;
        readonly dependencies?: Record<string, Listed>;
      }
      const installed = new Set<string>();
      const walk = (tree: Listed): void => {
        for (const [name, child] of Object.entries(tree.dependencies ?? {})) {
          if (child.version !== undefined) installed.add(name);
          walk(child);
        }
      };
      walk(JSON.parse(listing.stdout) as Listed);
      expect(installed.has('herald') && installed.has('better-sqlite3'), 'npm ls lists the tree').to.equal(true);
      expect(ABSENT_PACKAGES.filter((name) => installed.has(name) || existsSync(join(consumer, 'node_modules', name)))).to.deep.equal([]);
    });

    it('loads no store driver when it imports Herald, as an ES module or with require()', async () => {
      writeFileSync(join(consumer, 'loaded.mjs'), ESM_LOADED);
      writeFileSync(join(consumer, 'loaded.cjs'), CJS_LOADED);
      for (const script of ['loaded.mjs', 'loaded.cjs']) {
        const { Herald, packages } = JSON.parse(await node([script])) as { Herald: string; packages: string[] };
        expect(Herald, script).to.equal('function');
        // better-sqlite3's JavaScript is loaded with the entry (its addon only when a database opens): the list sees CommonJS.
        expect(packages, script).to.include('better-sqlite3');
        expect(packages.filter((name) => ['pg', 'mongodb', 'bson', 'mongodb-memory-server-core'].includes(name)), script).to.deep.equal([]);
      }
    });

    it('fails with a ConfigError naming the package to install when it asks for a PostgreSQL or MongoDB store, or publishes into MongoDB', async () => {
      writeFileSync(join(consumer, 'other-stores.mjs'), OTHER_STORES);
      const failures = JSON.parse(await node(['other-stores.mjs', join(dir, 'other-stores')])) as Record<string, { name: string; code: string; message: string }>;
      const needs = (name: string) => ({ name: 'ConfigError', code: 'HERALD_INVALID_CONFIG', needs: `needs the package "${name}", not installed: npm install ${name}` });
      const seen = Object.fromEntries(
        Object.entries(failures).map(([asked, f]) => [asked, { name: f.name, code: f.code, needs: f.message.slice(f.message.indexOf('needs the package')) }]),
      );
      expect(seen).to.deep.equal({
        'postgres://herald:s3cret@127.0.0.1:1/herald': needs('pg'),
        'mongodb://herald:s3cret@127.0.0.1:1/herald?replicaSet=rs0': needs('mongodb'),
        'mongodb-memory-server': needs('mongodb'),
        publishMongo: needs('mongodb'),
      });
      expect(failures['postgres://herald:s3cret@127.0.0.1:1/herald']?.message).to.match(/^config store="postgres:\/\/herald:[^s]*@127\.0\.0\.1:1\/herald": needs the package "pg"/);
      expect(Object.values(failures).map((f) => f.message).join('\n')).not.to.include('s3cret');
    });

    it('type-checks against the declarations alone (skipLibCheck off): no type package of opossum, better-sqlite3 or a store driver in the program', async function () {
      this.timeout(120_000);
      writeFileSync(join(consumer, 'application.mts'), TS_SQLITE_APPLICATION);
      writeFileSync(join(consumer, 'tsconfig.application.json'), JSON.stringify(TS_SQLITE_APPLICATION_CONFIG));
      let files: string[];
      try {
        files = (await node([TSC, '-p', 'tsconfig.application.json', '--listFiles'])).split('\n');
      } catch (error) {
        throw new Error(`the application does not type-check: ${(error as { stdout?: string }).stdout ?? error}`);
      }
      expect(files.some((file) => file.includes('/node_modules/herald/dist/index.d.ts')), 'Herald\'s declarations are in the program').to.equal(true);
      expect(files.filter((file) => /\/node_modules\/(@types\/(opossum|better-sqlite3|pg)|pg|mongodb|opossum|better-sqlite3)\//.test(file))).to.deep.equal([]);
    });
  });

  it('gives an ES module publish and verify; verify accepts a Standard Webhooks signature and rejects a tampered body', async () => {
    writeFileSync(join(consumer, 'consumer.mjs'), ESM_CONSUMER);
    expect(JSON.parse(await node(['consumer.mjs']))).to.deep.equal({ publish: 'function', verified: true, tampered: 'HERALD_INVALID_SIGNATURE' });
  });

  it('gives CommonJS the same through require(), the very module import gives (one copy of every class)', async () => {
    writeFileSync(join(consumer, 'consumer.cjs'), CJS_CONSUMER);
    expect(JSON.parse(await node(['consumer.cjs']))).to.deep.equal({
      publish: 'function',
      verified: true,
      tampered: 'HERALD_INVALID_SIGNATURE',
      sameModuleAsImport: true,
    });
  });

  it('ships declarations a TypeScript consumer type-checks against: module nodenext (ES module and CommonJS files) and module commonjs', async function () {
    this.timeout(120_000);
    writeFileSync(join(consumer, 'consumer.mts'), TS_ESM_CONSUMER);
    writeFileSync(join(consumer, 'consumer.cts'), TS_CJS_CONSUMER);
    writeFileSync(join(consumer, 'tsconfig.json'), JSON.stringify(TS_CONFIG));
    writeFileSync(join(consumer, 'consumer-commonjs.ts'), TS_COMMONJS_CONSUMER);
    writeFileSync(join(consumer, 'tsconfig.commonjs.json'), JSON.stringify(TS_COMMONJS_CONFIG));
    const typeCheck = async (project: string): Promise<string> => {
      try {
        await node([TSC, '-p', project]);
        return `${project}: ok`;
      } catch (error) {
        return `${project}: ${(error as { stdout?: string }).stdout ?? error}`;
      }
    };
    expect(await Promise.all([typeCheck('tsconfig.json'), typeCheck('tsconfig.commonjs.json')])).to.deep.equal([
      'tsconfig.json: ok',
      'tsconfig.commonjs.json: ok',
    ]);
  });

  it('has a `herald` binary: `npx herald --help` prints the usage and exits 0', async () => {
    const { stdout } = await run('npx', ['--offline', 'herald', '--help'], { cwd: consumer, env: plainEnv() });
    expect(stdout).to.match(/^Usage: herald start/);
    expect(stdout).to.include('herald endpoints add');
  });

  context('when a node runs from the package', () => {
    let proc: HeraldProcess | undefined;

    before(() => {
      // The consumer's better-sqlite3 is the repository's version, installed without its build
      // step: it gets the repository's addon, which `npm ci` (or CI's rebuild) made for this Node.
      const addon = join(dirname(createRequire(import.meta.url).resolve('better-sqlite3/package.json')), 'build', 'Release', 'better_sqlite3.node');
      const target = join(consumer, 'node_modules', 'better-sqlite3', 'build', 'Release');
      mkdirSync(target, { recursive: true });
      copyFileSync(addon, join(target, 'better_sqlite3.node'));
    });

    afterEach(async () => {
      if (proc !== undefined && proc.child.exitCode === null && proc.child.signalCode === null) {
        proc.child.kill('SIGKILL');
        await proc.exited;
      }
      proc = undefined;
    });

    it('starts with `herald start`: the default configuration is found, the SQLite store thread runs compiled, /readyz answers', async () => {
      const data = join(dir, 'data');
      proc = runHerald(
        ['start', '--port', '0', '--data-dir', data, '--store', `sqlite:${join(data, 'herald.db')}`, '--log-level', 'silent'],
        { NODE_OPTIONS: '' },
        { nodeArgs: [join(consumer, 'node_modules', '.bin', 'herald')], cwd: consumer },
      );
      const { url } = await banner(proc);
      const ready = await get(`${url}/readyz`);
      expect(ready.status, ready.body).to.equal(200);
      proc.child.kill('SIGTERM');
      expect(await proc.exited).to.deep.equal({ code: 0, signal: null });
      expect(proc.stderr).to.equal('');
    });

    it('runs Herald on SQLite from the library: an event published in the application\'s transaction is delivered to a 127.0.0.1 sink, signed', async function () {
      this.timeout(60_000);
      writeFileSync(join(consumer, 'application.mjs'), SQLITE_APPLICATION);
      const data = join(dir, 'application');
      mkdirSync(data);
      expect(JSON.parse(await node(['application.mjs', data]))).to.deep.equal({ sameEvent: true, body: { orderId: 42 } });
    });

    it('signs on the signing pool worker thread, compiled', async () => {
      // The pool is internal (not exported): the test reaches its compiled file by path.
      const script = `import { SigningPool } from './node_modules/herald/dist/signing/signing-pool.js';
import { verify } from 'herald';
const key = Buffer.alloc(32, 7);
const pool = new SigningPool({ inlineMaxBytes: 1 });
const request = { keys: [key], id: 'msg_pool', timestampSec: Math.floor(Date.now() / 1000), body: '{"orderId":42}' };
const signature = await pool.sign(request);
verify({ payload: request.body, secret: 'whsec_' + key.toString('base64'), headers: { 'webhook-id': request.id, 'webhook-timestamp': String(request.timestampSec), 'webhook-signature': signature } });
console.log(JSON.stringify({ ...pool.stats, poolFailure: String(pool.poolFailure) }));
await pool.close();
`;
      writeFileSync(join(consumer, 'pool.mjs'), script);
      expect(JSON.parse(await node(['pool.mjs']))).to.deep.equal({ inline: 0, pooled: 1, tasks: 1, poolFailure: 'undefined' });
    });
  });
});
