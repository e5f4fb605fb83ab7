/**
 * The options of `herald endpoints add|update` for an endpoint's custom headers and
 * authentication, turned into the API's `headers` and `auth`, and how `show` prints them (secret
 * values never: the API does not return them).
 *
 *     --header 'X-Team: payments'          (repeatable)   --secret-header 'X-Api-Key: …' (repeatable)
 *     --auth-bearer <token>  |  --auth-basic <user>:<password>
 *     --oauth2-token-url <url> --oauth2-client-id <id> --oauth2-client-secret <secret> [--oauth2-scope …] [--oauth2-audience …]
 *     --no-headers  |  --no-auth    (update: remove them)
 *
 * Headers given replace the endpoint's headers whole, as the API does.
 */
import { UsageError } from './cli-io.ts';

export const CREDENTIAL_OPTIONS = {
  header: { type: 'string', multiple: true },
  'secret-header': { type: 'string', multiple: true },
  'no-headers': { type: 'boolean' },
  'auth-bearer': { type: 'string' },
  'auth-basic': { type: 'string' },
  'oauth2-token-url': { type: 'string' },
  'oauth2-client-id': { type: 'string' },
  'oauth2-client-secret': { type: 'string' },
  'oauth2-scope': { type: 'string' },
  'oauth2-audience': { type: 'string' },
  'no-auth': { type: 'boolean' },
} as const;

type Values = Readonly<Record<string, string | boolean | readonly string[] | undefined>>;

/** The `headers` and `auth` of the request body, for the options given (none: an empty object). */
export function credentialSettings(values: Values): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const plain = strings(values.header);
  const secret = strings(values['secret-header']);
  if (values['no-headers'] === true) {
    if (plain.length + secret.length > 0) throw new UsageError('--no-headers: cannot be given with --header or --secret-header');
    body.headers = null;
  } else if (plain.length + secret.length > 0) {
    const headers: Record<string, unknown> = {};
    for (const text of plain) {
      const [name, value] = headerOf(text, '--header');
      headers[name] = value;
    }
    for (const text of secret) {
      const [name, value] = headerOf(text, '--secret-header');
      headers[name] = { value, secret: true };
    }
    body.headers = headers;
  }
  const auth = authOf(values);
  if (auth !== undefined) body.auth = auth;
  return body;
}

function authOf(values: Values): unknown {
  const text = (name: string): string | undefined => (typeof values[name] === 'string' ? values[name] : undefined);
  const oauth = Object.keys(CREDENTIAL_OPTIONS).filter((name) => name.startsWith('oauth2-') && text(name) !== undefined);
  const kinds = [
    ...(text('auth-bearer') === undefined ? [] : ['--auth-bearer']),
    ...(text('auth-basic') === undefined ? [] : ['--auth-basic']),
    ...(oauth.length === 0 ? [] : ['--oauth2-…']),
    ...(values['no-auth'] === true ? ['--no-auth'] : []),
  ];
  if (kinds.length > 1) throw new UsageError(`endpoints: give one kind of auth (got ${kinds.join(', ')})`);
  if (values['no-auth'] === true) return null;
  const bearer = text('auth-bearer');
  if (bearer !== undefined) return { type: 'bearer', token: bearer };
  const basic = text('auth-basic');
  if (basic !== undefined) {
    const colon = basic.indexOf(':');
    if (colon < 1) throw new UsageError('--auth-basic: must be <user>:<password>');
    return { type: 'basic', username: basic.slice(0, colon), password: basic.slice(colon + 1) };
  }
  if (oauth.length === 0) return undefined;
  for (const required of ['oauth2-token-url', 'oauth2-client-id', 'oauth2-client-secret']) {
    if (text(required) === undefined) throw new UsageError(`--${required}: is required for OAuth 2.0 auth`);
  }
  return {
    type: 'oauth2',
    tokenUrl: text('oauth2-token-url'),
    clientId: text('oauth2-client-id'),
    clientSecret: text('oauth2-client-secret'),
    ...(text('oauth2-scope') === undefined ? {} : { scope: text('oauth2-scope') }),
    ...(text('oauth2-audience') === undefined ? {} : { audience: text('oauth2-audience') }),
  };
}

function headerOf(text: string, option: string): [string, string] {
  const colon = text.indexOf(':');
  if (colon < 1) throw new UsageError(`${option}: must be '<name>: <value>' (got ${JSON.stringify(text.slice(0, 60))})`);
  return [text.slice(0, colon).trim(), text.slice(colon + 1).trim()];
}

function strings(value: Values[string]): readonly string[] {
  if (value === undefined || typeof value === 'boolean') return [];
  return typeof value === 'string' ? [value] : value;
}

/** An endpoint's headers and auth as the API shows them (absent from an older node: none). */
export interface CredentialView {
  readonly headers?: Readonly<Record<string, { readonly value?: string; readonly secret: boolean }>> | null;
  readonly auth?: {
    readonly type: string;
    readonly username?: string;
    readonly tokenUrl?: string;
    readonly clientId?: string;
    readonly scope?: string | null;
    readonly audience?: string | null;
  } | null;
}

/** `show`'s lines: the headers by name (a secret one as `***`), and the kind of auth with what is not secret. */
export function credentialLines(e: CredentialView): Array<[string, string]> {
  const headers = Object.entries(e.headers ?? {}).map(([name, h]) => `${name}: ${h.secret ? '***' : (h.value ?? '')}`);
  return [
    ['headers', headers.length === 0 ? 'none' : headers.join(', ')],
    ['auth', authText(e.auth ?? null)],
  ];
}

function authText(auth: CredentialView['auth']): string {
  switch (auth?.type) {
    case undefined:
      return 'none';
    case 'bearer':
      return 'bearer token (set)';
    case 'basic':
      return `basic, user ${auth.username ?? ''} (password set)`;
    case 'oauth2': {
      const extra = [auth.scope == null ? '' : `, scope ${auth.scope}`, auth.audience == null ? '' : `, audience ${auth.audience}`].join('');
      return `oauth2 client credentials, client ${auth.clientId ?? ''} at ${auth.tokenUrl ?? ''}${extra} (secret set)`;
    }
    default:
      return String(auth?.type);
  }
}
