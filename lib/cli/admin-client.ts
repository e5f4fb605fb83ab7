/**
 * The admin API as the ops commands use it: JSON over undici, the bearer
 * token on every request, and an `ApiError` carrying the API's own message
 * (`endpointId: unknown endpoint 'ep_x'`) or why it could not be reached.
 */
import { Agent, request } from 'undici';
import { ApiError, type Connection } from './cli-io.ts';

export type Query = Readonly<Record<string, string | number | boolean | undefined>>;

export class AdminClient {
  readonly #connection: Connection;
  readonly #agent = new Agent({ keepAliveTimeout: 1_000 });

  constructor(connection: Connection) {
    this.#connection = connection;
  }

  get<T = any>(path: string, query: Query = {}): Promise<T> {
    return this.#call('GET', path + queryString(query));
  }

  post<T = any>(path: string, body?: unknown): Promise<T> {
    return this.#call('POST', path, body === undefined ? undefined : JSON.stringify(body));
  }

  patch<T = any>(path: string, body: unknown): Promise<T> {
    return this.#call('PATCH', path, JSON.stringify(body));
  }

  delete<T = any>(path: string): Promise<T> {
    return this.#call('DELETE', path);
  }

  /** Posts JSON text as it is (so numbers such as 12345678901234567890 are not re-serialised). */
  postJsonText<T = any>(path: string, json: string): Promise<T> {
    return this.#call('POST', path, json);
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }

  async #call<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: string): Promise<T> {
    const url = `${this.#connection.url}${path}`;
    const headers: Record<string, string> = { authorization: `Bearer ${this.#connection.token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response: Awaited<ReturnType<typeof request>>;
    try {
      response = await request(url, {
        method,
        headers,
        dispatcher: this.#agent,
        headersTimeout: 30_000,
        bodyTimeout: 120_000,
        ...(body === undefined ? {} : { body }),
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw new ApiError(`cannot reach ${this.#connection.url}: ${code ?? (error as Error).message}`);
    }
    const text = await response.body.text();
    let json: any;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (response.statusCode >= 400) {
      const error = json?.error as { code?: string; message?: string } | undefined;
      const hint = response.statusCode === 401 ? ' (check --token / HERALD_ADMIN_TOKEN)' : '';
      throw new ApiError(
        `${method} ${path}: ${error?.message ?? `HTTP ${response.statusCode}`}${hint}`,
        response.statusCode,
        error?.code ?? null,
      );
    }
    return json as T;
  }
}

function queryString(query: Query): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}
