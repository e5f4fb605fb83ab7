/**
 * The endpoints' admin desk: create, read, change, enable, disable and delete an endpoint, and
 * read its deliveries by sequence number. Every change is written to the store first, then
 * handed to this node's engine (`EndpointHandoff`), which waits until its actor has it; other
 * nodes read it from the store's endpoint change log (lib/engine/endpoint-sync.ts).
 */
import type { Clock } from '../clock.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import { newId } from '../ids.ts';
import { DisabledReason, type AdaptiveConcurrency, type Endpoint, type PayloadFilter, type RateLimit, type SignatureScheme, type SigningSecret } from '../model.ts';
import { generateSigningSecret, schemeOf } from '../signing/secret.ts';
import type { SecretBox } from '../signing/secret-box.ts';
import type { EndpointPatch, Store } from '../store/port.ts';
import { authView, sealAuth, type AuthView } from './endpoint-auth-input.ts';
import { checkHeadersBesideAuth, headersView, sealHeaders, type HeaderView } from './endpoint-headers.ts';
import { assertCurrent, clientTlsView, sealClientTls, type ClientTlsView } from './client-tls-input.ts';
import { validateEndpointChanges, validateNewEndpoint, type EndpointDefaults } from './endpoint-input.ts';
import { rowsToRead, sequencePageOf, type SequencePage, type SequencePageRequest } from './sequence-page.ts';
import { testSubscription, validateFilterTest, type FilterTestResult } from './subscription.ts';

/** An endpoint as the API shows it: never its secrets. */
export type EndpointView = Omit<Endpoint, 'secrets' | 'rateLimit' | 'adaptiveConcurrency' | 'filter' | 'headers' | 'auth' | 'clientTls'> & {
  /** By name; a secret one without its value. `null`: none. */
  readonly headers: Record<string, HeaderView> | null;
  /** Without its secret part. `null`: none. */
  readonly auth: AuthView | null;
  /** `null`: no rate limit. */
  readonly rateLimit: RateLimit | null;
  /** `null`: a fixed concurrency. */
  readonly adaptiveConcurrency: AdaptiveConcurrency | null;
  /** `null`: no payload filter. */
  readonly filter: PayloadFilter | null;
  /** Its client certificate's subject, issuer, fingerprint and expiry, never the key; `null`: none. */
  readonly clientTls: ClientTlsView | null;
  readonly secretCount: number;
  /** When the previous secret stops signing, during a rotation. */
  readonly previousSecretExpiresAt: number | null;
  /** Its keys, current first, without their secrets: the scheme, the public key of an ed25519 one, the expiry. */
  readonly signingKeys: readonly SigningKeyView[];
};

/** A signing key as the API shows it. */
export interface SigningKeyView {
  readonly scheme: SignatureScheme;
  /** The `whpk_…` of an ed25519 key (public: shown any time); `null` for an HMAC secret. */
  readonly publicKey: string | null;
  readonly createdAt: number;
  /** `null` for the current key; when it stops signing, for a previous one. */
  readonly expiresAt: number | null;
}

/** What the engine of this node is told of an endpoint written through it. */
export interface EndpointHandoff {
  /** The endpoint as written (`undefined`: deleted); resolves once its actor, if any, has it. */
  endpointChanged(endpoint: Endpoint | undefined, id: string): Promise<void>;
  /** There may be deliveries to claim (an endpoint enabled again). */
  signal(): void;
}

export class EndpointAdmin {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #secretBox: SecretBox;
  readonly #defaults: EndpointDefaults;
  readonly #engine: EndpointHandoff;

  constructor(deps: {
    readonly store: Store;
    readonly clock: Clock;
    readonly secretBox: SecretBox;
    /** What an endpoint created without them gets (from the `delivery` configuration). */
    readonly defaults: EndpointDefaults;
    readonly engine: EndpointHandoff;
  }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#secretBox = deps.secretBox;
    this.#defaults = deps.defaults;
    this.#engine = deps.engine;
  }

  /**
   * @returns the endpoint and what its consumer verifies with: the first `whsec_` secret, shown this
   *   once, or for `signatureScheme: 'ed25519'` the `whpk_` public key (the `whsk_` never leaves).
   * @throws ValidationError naming the field and rule; ConflictError for a given `id` that exists.
   */
  async create(input: unknown): Promise<{ endpoint: EndpointView; secret: string }> {
    const fields = validateNewEndpoint(input, this.#defaults);
    const now = this.#clock.now();
    if (fields.clientTls !== undefined) assertCurrent(fields.clientTls, now);
    const id = fields.id ?? newId('ep');
    if (fields.id !== undefined && (await this.#store.getEndpoint(id)) !== undefined) {
      throw new ConflictError(`id: endpoint '${id}' exists already`);
    }
    const { secret, publicKey } = generateSigningSecret(fields.signatureScheme);
    const endpoint: Endpoint = {
      id,
      tenantId: fields.tenantId,
      url: fields.url,
      description: fields.description,
      eventTypes: fields.eventTypes,
      retry: fields.retry,
      timeoutMs: fields.timeoutMs,
      mode: fields.mode,
      ordering: fields.ordering,
      concurrency: fields.concurrency,
      ...(fields.rateLimit === undefined ? {} : { rateLimit: fields.rateLimit }),
      ...(fields.adaptiveConcurrency === undefined ? {} : { adaptiveConcurrency: fields.adaptiveConcurrency }),
      ...(fields.headers === undefined ? {} : { headers: sealHeaders(fields.headers, (value) => this.#secretBox.seal(value, id)) }),
      ...(fields.auth === undefined ? {} : { auth: sealAuth(fields.auth, (value) => this.#secretBox.seal(value, id)) }),
      ...(fields.filter === undefined ? {} : { filter: fields.filter }),
      ...(fields.clientTls === undefined ? {} : { clientTls: sealClientTls(fields.clientTls, this.#secretBox, id) }),
      status: 'enabled',
      disabledReason: null,
      failingSince: null,
      secrets: [{ secret: this.#secretBox.seal(secret, id), createdAt: now, expiresAt: null, ...(publicKey === undefined ? {} : { publicKey }) }],
      createdAt: now,
      updatedAt: now,
    };
    await this.#store.createEndpoint(endpoint);
    return { endpoint: viewOf(endpoint), secret: publicKey ?? secret };
  }

  async list(filter: { tenantId?: string } = {}): Promise<EndpointView[]> {
    return (await this.#store.listEndpoints(filter)).map(viewOf);
  }

  async get(id: string): Promise<EndpointView> {
    return viewOf(await this.endpoint(id));
  }

  /**
   * The endpoint's deliveries numbered after `request.after`, in sequence order (gap detection:
   * lib/endpoints/sequence-page.ts).
   * @throws NotFoundError (`endpointId`) for an unknown endpoint.
   */
  async listEvents(endpointId: string, request: SequencePageRequest): Promise<SequencePage> {
    await this.endpoint(endpointId);
    const rows = await this.#store.listDeliveriesAfterSequence(endpointId, request.after, rowsToRead(request.limit));
    return sequencePageOf(rows, request.limit);
  }

  /** @throws ValidationError naming the field and rule; NotFoundError (`endpointId`). */
  async update(id: string, input: unknown): Promise<EndpointView> {
    const { headers, auth, clientTls, ...rest } = validateEndpointChanges(input);
    // Sealed for this endpoint: an unknown id finds nothing to write (NotFoundError).
    if (clientTls != null) assertCurrent(clientTls, this.#clock.now());
    const changes = clientTls === undefined ? rest : { ...rest, clientTls: clientTls === null ? null : sealClientTls(clientTls, this.#secretBox, id) };
    if (headers === undefined && auth === undefined) return this.patch(id, changes);
    // `authorization` among the headers and `auth` exclude each other, whichever of them this changes.
    const current = headers === undefined || auth === undefined ? await this.endpoint(id) : undefined;
    checkHeadersBesideAuth(headers === undefined ? current?.headers : (headers ?? undefined), auth === undefined ? current?.auth !== undefined : auth !== null);
    const seal = (value: string): string => this.#secretBox.seal(value, id);
    return this.patch(id, {
      ...changes,
      ...(headers === undefined ? {} : { headers: headers === null ? null : sealHeaders(headers, seal) }),
      ...(auth === undefined ? {} : { auth: auth === null ? null : sealAuth(auth, seal) }),
    });
  }

  /**
   * Whether an event (`{type?, payload}`) would reach the endpoint: its event types, then its payload
   * filter, or `filter` from the input to try one before saving it. Publishes nothing.
   * @throws ValidationError naming the field; NotFoundError (`endpointId`).
   */
  async testFilter(id: string, input: unknown): Promise<FilterTestResult> {
    const request = validateFilterTest(input);
    return testSubscription(await this.endpoint(id), request);
  }

  async delete(id: string): Promise<void> {
    if (!(await this.#store.deleteEndpoint(id, this.#clock.now()))) throw new NotFoundError('endpoint', id, 'endpointId');
    await this.#engine.endpointChanged(undefined, id);
  }

  /** Re-enables an endpoint: its waiting deliveries go out again, its failure history starts afresh. */
  async enable(id: string): Promise<EndpointView> {
    const view = await this.patch(id, { status: 'enabled', disabledReason: null, failingSince: null });
    await this.#store.resumeDeliveries(id, this.#clock.now());
    this.#engine.signal();
    return view;
  }

  async disable(id: string): Promise<EndpointView> {
    return this.patch(id, { status: 'disabled', disabledReason: DisabledReason.OPERATOR });
  }

  /** The stored endpoint, secrets included (for this node's own use, never shown). @throws NotFoundError (`endpointId`). */
  async endpoint(id: string): Promise<Endpoint> {
    const endpoint = await this.#store.getEndpoint(id);
    if (endpoint === undefined) throw new NotFoundError('endpoint', id, 'endpointId');
    return endpoint;
  }

  /** Writes a validated change and hands the result to this node's engine. @throws NotFoundError (`endpointId`). */
  async patch(id: string, patch: EndpointPatch): Promise<EndpointView> {
    const updated = await this.#store.updateEndpoint(id, patch, this.#clock.now());
    if (updated === undefined) throw new NotFoundError('endpoint', id, 'endpointId');
    await this.#engine.endpointChanged(updated, id);
    return viewOf(updated);
  }
}

export function viewOf(endpoint: Endpoint): EndpointView {
  const { secrets, rateLimit, adaptiveConcurrency, filter, headers, auth, clientTls, ...rest } = endpoint;
  const previous = secrets.find((s) => s.expiresAt !== null);
  return {
    ...rest,
    rateLimit: rateLimit ?? null,
    adaptiveConcurrency: adaptiveConcurrency ?? null,
    filter: filter ?? null,
    headers: headersView(headers),
    auth: authView(auth),
    clientTls: clientTls === undefined ? null : clientTlsView(clientTls),
    secretCount: secrets.length,
    previousSecretExpiresAt: previous?.expiresAt ?? null,
    signingKeys: secrets.map(signingKeyView),
  };
}

function signingKeyView(secret: SigningSecret): SigningKeyView {
  return { scheme: schemeOf(secret), publicKey: secret.publicKey ?? null, createdAt: secret.createdAt, expiresAt: secret.expiresAt };
}
