import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  configFromEnv,
  defaultConfig,
  readConfigFile,
  resolveConfig,
  validateConfig,
  type ConfigOverrides,
} from '../../lib/config/config.ts';
import { ConfigError, ErrorCode } from '../../lib/errors.ts';

const DEFAULTS = JSON.parse(readFileSync(new URL('../../config/default.json', import.meta.url), 'utf8')) as Record<string, unknown>;

/** Runs `fn`, expects a ConfigError, and returns it. */
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    expect((error as ConfigError).code).to.equal(ErrorCode.INVALID_CONFIG);
    return error as ConfigError;
  }
  expect.fail('expected a ConfigError');
}

describe('Configuration', () => {
  let dir: string | undefined;

  afterEach(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  function tempFile(name: string, text: string): string {
    dir ??= mkdtempSync(join(tmpdir(), 'herald-config-'));
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  }

  describe('defaults', () => {
    context('when nothing overrides them', () => {
      it('equals config/default.json', () => {
        expect(defaultConfig()).to.deep.equal(DEFAULTS);
        expect(resolveConfig()).to.deep.equal(DEFAULTS);
        expect(resolveConfig({}, {}, {})).to.deep.equal(DEFAULTS);
      });

      it('holds the documented defaults of the environment variables', () => {
        const config = defaultConfig();
        expect(config).to.include({ store: 'sqlite:./data/herald.db', port: 8088, host: '127.0.0.1', adminToken: null, logLevel: 'info' });
        expect(config.allowNetworks).to.deep.equal([]);
      });

      it('holds a request body limit of 16 MiB, room for 1 000 events of 16 KiB', () => {
        expect(defaultConfig().api.maxRequestBytes).to.equal(16 * 1024 * 1024);
      });

      it('wants every dead letter reviewed within 24 h, checked every minute', () => {
        expect(defaultConfig().deadLetters).to.deep.equal({ reviewWithinMs: 24 * 3_600_000, checkIntervalMs: 60_000 });
      });

      it('keeps the delivery charts\' minutes 48 h', () => {
        expect(defaultConfig().retention.deliveryMinutesKeepMs).to.equal(48 * 3_600_000);
      });

      it('is frozen, nested objects too', () => {
        const config = resolveConfig();
        expect(Object.isFrozen(config)).to.equal(true);
        expect(Object.isFrozen(config.delivery)).to.equal(true);
        expect(Object.isFrozen(config.allowNetworks)).to.equal(true);
      });
    });
  });

  describe('layering', () => {
    const file: ConfigOverrides = { port: 1_000, host: '0.0.0.0', logLevel: 'warn', delivery: { timeoutMs: 5_000 } };

    context('when a file, the environment and flags all set a key', () => {
      it('takes flags over the environment over the file over the defaults', () => {
        const env = configFromEnv({ HERALD_PORT: '2000', HERALD_LOG_LEVEL: 'debug' });
        const flags: ConfigOverrides = { port: 3_000 };
        const config = resolveConfig(file, env, flags);
        expect(config.port).to.equal(3_000);
        expect(config.logLevel).to.equal('debug');
        expect(config.host).to.equal('0.0.0.0');
        expect(config.store).to.equal(DEFAULTS.store);
      });

      it('takes the environment over the file when no flag is given', () => {
        const config = resolveConfig(file, configFromEnv({ HERALD_PORT: '2000', HERALD_HOST: '::1' }), {});
        expect(config.port).to.equal(2_000);
        expect(config.host).to.equal('::1');
        expect(config.logLevel).to.equal('warn');
      });
    });

    context('when a layer sets one key of a section', () => {
      it('keeps the other keys of that section from the layer below', () => {
        const config = resolveConfig(file, { delivery: { maxInFlight: 8 } });
        const defaults = DEFAULTS.delivery as Record<string, unknown>;
        expect(config.delivery).to.deep.equal({ ...defaults, timeoutMs: 5_000, maxInFlight: 8 });
      });
    });

    context('when the layer comes from a config file', () => {
      it('reads it with readConfigFile', () => {
        const path = tempFile('herald.json', JSON.stringify({ port: 9_000, engine: { slotCount: 64 } }));
        const config = resolveConfig(readConfigFile(path));
        expect(config.port).to.equal(9_000);
        expect(config.engine.slotCount).to.equal(64);
      });
    });
  });

  describe('configFromEnv', () => {
    context('when HERALD_* variables are set', () => {
      it('maps each to its key', () => {
        const env = {
          HERALD_STORE: 'sqlite:/tmp/x.db',
          HERALD_PORT: '9090',
          HERALD_HOST: '0.0.0.0',
          HERALD_ADMIN_TOKEN: 'a-token-of-sixteen-chars',
          HERALD_ALLOW_NETWORKS: '127.0.0.0/8, ::1/128,',
          HERALD_LOG_LEVEL: 'warn',
          HERALD_DATA_DIR: '/tmp/herald',
          UNRELATED: 'x',
        };
        expect(configFromEnv(env)).to.deep.equal({
          store: 'sqlite:/tmp/x.db',
          port: 9_090,
          host: '0.0.0.0',
          adminToken: 'a-token-of-sixteen-chars',
          allowNetworks: ['127.0.0.0/8', '::1/128'],
          logLevel: 'warn',
          dataDir: '/tmp/herald',
        });
      });
    });

    context('when no HERALD_* variable is set, or one is empty', () => {
      it('overrides nothing', () => {
        expect(configFromEnv({})).to.deep.equal({});
        expect(configFromEnv({ HERALD_PORT: '', HERALD_STORE: '', HERALD_LOG_LEVEL: '' })).to.deep.equal({});
      });
    });

    context('when HERALD_PORT is not a number', () => {
      it('throws a ConfigError naming the variable and the value', () => {
        const error = configError(() => configFromEnv({ HERALD_PORT: 'abc' }));
        expect(error.key).to.equal('HERALD_PORT');
        expect(error.message).to.include('HERALD_PORT').and.include('"abc"').and.include('whole number');
      });
    });
  });

  describe('validation', () => {
    const violations: ReadonlyArray<{ name: string; layer: ConfigOverrides; key: string; value: string; rule: RegExp }> = [
      { name: 'port 70000', layer: { port: 70_000 }, key: 'port', value: '70000', rule: /0 to 65535/ },
      { name: 'port -1', layer: { port: -1 }, key: 'port', value: '-1', rule: /0 to 65535/ },
      { name: 'port as text', layer: { port: 'abc' as unknown as number }, key: 'port', value: '"abc"', rule: /integer/ },
      { name: 'delivery.timeoutMs 500', layer: { delivery: { timeoutMs: 500 } }, key: 'delivery.timeoutMs', value: '500', rule: /from 1000 \(1 s\) to 30000 \(30 s\)/ },
      {
        name: 'unknown key delivery.timeout',
        layer: { delivery: { timeout: 5_000 } as unknown as ConfigOverrides['delivery'] },
        key: 'delivery.timeout',
        value: '5000',
        rule: /not a known key/,
      },
      { name: "logLevel 'loud'", layer: { logLevel: 'loud' as never }, key: 'logLevel', value: '"loud"', rule: /one of .*info/ },
      {
        name: "delivery.disableOnGone 'yes'",
        layer: { delivery: { disableOnGone: 'yes' as never } },
        key: 'delivery.disableOnGone',
        value: '"yes"',
        rule: /true or false/,
      },
      { name: "store 'redis://x'", layer: { store: 'redis://x' }, key: 'store', value: '"redis://x"', rule: /sqlite:<path>/ },
      { name: "store 'sqlite:'", layer: { store: 'sqlite:' }, key: 'store', value: '"sqlite:"', rule: /name a file/ },
      {
        name: 'allowNetworks not a list',
        layer: { allowNetworks: '127.0.0.0/8' as unknown as string[] },
        key: 'allowNetworks',
        value: '"127.0.0.0/8"',
        rule: /list of CIDRs/,
      },
      {
        name: 'engine.renewIntervalMs above half of engine.leaseMs',
        layer: { engine: { leaseMs: 10_000, renewIntervalMs: 6_000 } },
        key: 'engine.renewIntervalMs',
        value: '6000',
        rule: /half of engine.leaseMs \(5 s\)/,
      },
      { name: "delivery.retry 'sometimes'", layer: { delivery: { retry: 'sometimes' as never } }, key: 'delivery.retry', value: '"sometimes"', rule: /aggressive/ },
      { name: 'a section that is not an object', layer: { engine: 5 as never }, key: 'engine', value: '5', rule: /object/ },
      {
        name: 'deadLetters.reviewWithinMs 1000',
        layer: { deadLetters: { reviewWithinMs: 1_000 } },
        key: 'deadLetters.reviewWithinMs',
        value: '1000',
        rule: /from 60000 \(1 min\) to 2592000000 \(30 d\)/,
      },
      {
        name: 'deadLetters.checkIntervalMs as text',
        layer: { deadLetters: { checkIntervalMs: '1m' as never } },
        key: 'deadLetters.checkIntervalMs',
        value: '"1m"',
        rule: /integer of milliseconds from 1000 \(1 s\) to 3600000 \(1 h\)/,
      },
      {
        name: 'retention.deliveryMinutesKeepMs shorter than the 24 h chart',
        layer: { retention: { deliveryMinutesKeepMs: 3_600_000 } },
        key: 'retention.deliveryMinutesKeepMs',
        value: '3600000',
        rule: /integer of milliseconds from 86400000 \(1 d\) to 315360000000 \(3650 d\)/,
      },
      { name: 'a tenant weight of 0', layer: { delivery: { tenantWeights: { acme: 0 } } }, key: 'delivery.tenantWeights.acme', value: '0', rule: /integer from 1 to 1000/ },
      { name: 'a tenant weight of 1.5', layer: { delivery: { tenantWeights: { acme: 1.5 } } }, key: 'delivery.tenantWeights.acme', value: '1.5', rule: /integer from 1 to 1000/ },
      { name: 'a tenant weight that is not a number', layer: { delivery: { tenantWeights: { acme: '3' } } } as never, key: 'delivery.tenantWeights.acme', value: '"3"', rule: /integer from 1 to 1000/ },
      { name: 'tenant weights that are not an object', layer: { delivery: { tenantWeights: [2] } } as never, key: 'delivery.tenantWeights', value: '[2]', rule: /must be an object/ },
      { name: 'api.maxRequestBytes 100', layer: { api: { maxRequestBytes: 100 } }, key: 'api.maxRequestBytes', value: '100', rule: /1024 to 268435456/ },
      {
        name: 'api.maxRequestBytes too small for one event with the largest payload',
        layer: { api: { maxRequestBytes: 300_000 }, delivery: { maxPayloadBytes: 262_144 } },
        key: 'api.maxRequestBytes',
        value: '300000',
        rule: /at least delivery.maxPayloadBytes \+ 65536 \(327680\)/,
      },
    ];

    for (const v of violations) {
      context(`when ${v.name}`, () => {
        it('throws a ConfigError naming the key, the value and the rule', () => {
          const error = configError(() => resolveConfig(v.layer));
          expect(error.key).to.equal(v.key);
          expect(error.message).to.include(`${v.key}=${v.value}`);
          expect(error.message).to.match(v.rule);
        });
      });
    }

    context('when an egress proxy or a CA file is given', () => {
      it('takes an http proxy URL (also from HERALD_PROXY) and refuses others, naming delivery.proxy without the password', () => {
        expect(resolveConfig({ delivery: { proxy: 'http://u:p@proxy.internal:3128' } }).delivery.proxy).to.equal('http://u:p@proxy.internal:3128');
        expect(configFromEnv({ HERALD_PROXY: 'http://proxy:3128' }).delivery).to.deep.equal({ proxy: 'http://proxy:3128' });
        for (const bad of ['https://u:hunter2@proxy:3128', 'proxy:3128', 'http://proxy:3128/x', 42]) {
          expect(() => resolveConfig({ delivery: { proxy: bad as string } }), String(bad))
            .to.throw(ConfigError, /^config delivery\.proxy=/)
            .that.satisfies((error: Error) => !error.message.includes('hunter2'));
        }
        expect(() => resolveConfig({ delivery: { caFile: '' } })).to.throw(ConfigError, /^config delivery\.caFile=/);
      });
    });

    context('when tenant weights are given', () => {
      it('takes any tenant id as a key, with an integer weight', () => {
        expect(resolveConfig({ delivery: { tenantWeights: { acme: 4, 'globex-2': 1 } } }).delivery.tenantWeights).to.deep.equal({ acme: 4, 'globex-2': 1 });
      });
    });

    context('when engine.renewIntervalMs is exactly half of engine.leaseMs', () => {
      it('accepts it', () => {
        expect(resolveConfig({ engine: { leaseMs: 10_000, renewIntervalMs: 5_000 } }).engine.renewIntervalMs).to.equal(5_000);
      });
    });

    context('when the admin token is too short', () => {
      it('names the key without showing the token', () => {
        const error = configError(() => resolveConfig({ adminToken: 'short-secret' }));
        expect(error.key).to.equal('adminToken');
        expect(error.message).to.not.include('short-secret');
        expect(error.message).to.match(/16 characters/);
      });
    });

    context('when the whole configuration is not an object', () => {
      it('throws a ConfigError', () => {
        configError(() => validateConfig([]));
      });
    });

    describe('secrets', () => {
      const key = randomBytes(32);

      it('maps HERALD_SECRET_KEY, HERALD_SECRET_KEY_FILE and the comma-separated HERALD_SECRET_KEYS_PREVIOUS', () => {
        const [a, b] = [randomBytes(32).toString('base64'), randomBytes(32).toString('hex')];
        expect(configFromEnv({ HERALD_SECRET_KEY: key.toString('base64'), HERALD_SECRET_KEYS_PREVIOUS: `${a}, ${b},` })).to.deep.equal({
          secrets: { key: key.toString('base64'), previousKeys: [a, b] },
        });
        expect(configFromEnv({ HERALD_SECRET_KEY_FILE: '/etc/herald/key' })).to.deep.equal({ secrets: { keyFile: '/etc/herald/key' } });
      });

      it('accepts a key as base64 or hex and defaults to none', () => {
        expect(resolveConfig({}).secrets).to.deep.equal({ key: null, keyFile: null, previousKeys: [] });
        expect(resolveConfig({ secrets: { key: key.toString('hex'), previousKeys: [randomBytes(32).toString('base64')] } }).secrets.key).to.equal(key.toString('hex'));
      });

      const bad: ReadonlyArray<{ name: string; secrets: Record<string, unknown>; key: string; rule: RegExp }> = [
        { name: 'a key of 16 bytes', secrets: { key: randomBytes(16).toString('base64') }, key: 'secrets.key', rule: /32 bytes as base64.*or hex.*HERALD_SECRET_KEY/ },
        { name: 'a key in base64url', secrets: { key: Buffer.alloc(32, 0xff).toString('base64url') }, key: 'secrets.key', rule: /32 bytes/ },
        { name: 'a key and a key file', secrets: { key: key.toString('base64'), keyFile: '/k' }, key: 'secrets.keyFile', rule: /one way/ },
        { name: 'an empty key file path', secrets: { keyFile: '' }, key: 'secrets.keyFile', rule: /path of a file/ },
        { name: 'a previous key that is no key', secrets: { key: key.toString('base64'), previousKeys: [key.toString('base64'), 'nope'] }, key: 'secrets.previousKeys[1]', rule: /32 bytes/ },
        { name: 'previous keys not a list', secrets: { previousKeys: 'abc' }, key: 'secrets.previousKeys', rule: /list of keys/ },
      ];
      for (const v of bad) {
        it(`refuses ${v.name} with a ConfigError naming ${v.key}, never showing a key`, () => {
          const error = configError(() => resolveConfig({ secrets: v.secrets as ConfigOverrides['secrets'] }));
          expect(error.key).to.equal(v.key);
          expect(error.message).to.match(v.rule);
          for (const text of [v.secrets.key, ...((v.secrets.previousKeys as unknown[] | undefined) ?? [])]) {
            if (typeof text === 'string' && text.length > 4) expect(error.message).to.not.include(text);
          }
        });
      }
    });
  });

  describe('readConfigFile', () => {
    context('when the file does not exist', () => {
      it('throws a ConfigError naming --config, the path and the reason', () => {
        const path = join(tmpdir(), 'herald-config-missing', 'nope.json');
        const error = configError(() => readConfigFile(path));
        expect(error.key).to.equal('--config');
        expect(error.message).to.include(path).and.include('ENOENT');
      });
    });

    context('when the file is not JSON', () => {
      it('throws a ConfigError naming --config and the path', () => {
        const path = tempFile('bad.json', '{ "port": 8088,');
        const error = configError(() => readConfigFile(path));
        expect(error.key).to.equal('--config');
        expect(error.message).to.include(path).and.match(/JSON object/);
      });
    });

    context('when the file holds JSON that is not an object', () => {
      it('throws a ConfigError', () => {
        const path = tempFile('list.json', '[1, 2]');
        expect(configError(() => readConfigFile(path)).message).to.match(/JSON object/);
      });
    });

    context('when the file holds a valid value for a key but an unknown key too', () => {
      it('reads it, and validation refuses the unknown key', () => {
        const path = tempFile('typo.json', JSON.stringify({ prot: 8088 }));
        const error = configError(() => resolveConfig(readConfigFile(path)));
        expect(error.key).to.equal('prot');
      });
    });
  });
});
