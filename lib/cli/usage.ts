/**
 * The usage text of every command, kept apart from the commands so `herald --help`
 * and a usage error load no command module (`start` loads the whole engine).
 */

export const START_USAGE = `Usage: herald start [options]

Options:
  --config <file>          JSON file overriding config/default.json
  --store <setting>        sqlite:<path>, postgres://user:pw@host/db, mongodb://host/db?replicaSet=rs0, mongodb-memory-server (HERALD_STORE)
  --port <n>               status port                  (HERALD_PORT)
  --host <address>         address to bind              (HERALD_HOST)
  --data-dir <dir>         where the admin token is kept (HERALD_DATA_DIR)
  --allow-networks <cidrs> comma-separated CIDRs the sender may reach (HERALD_ALLOW_NETWORKS)
  --log-level <level>      fatal|error|warn|info|debug|trace|silent (HERALD_LOG_LEVEL)
  -h, --help               this text`;

export const SECRETS_USAGE = `Usage: herald secrets reencrypt [--config <file>] [--store <setting>] [--data-dir <dir>]

  Rewrites every endpoint secret that is plain or sealed under a previous key under the current key
  (HERALD_SECRET_KEY, HERALD_SECRET_KEY_FILE, or dataDir/secret-key), opening the old ones with
  HERALD_SECRET_KEYS_PREVIOUS. Works on the store directly, nodes may be running. Afterwards the
  previous keys can be dropped. Exits 1 when an endpoint's secrets cannot be opened (listed with their key id).`;

export const ENDPOINTS_USAGE = `Usage: herald endpoints <add|update|list|show|events|filter-test|enable|disable|rotate-secret> [options]

  herald endpoints add <endpoint url> --tenant <id> [--event-types a.b,c.*] [--retry default|aggressive|relaxed|PT10S,PT1M|<JSON>]
                       [--timeout-ms <n>] [--concurrency <n>] [--rate-limit <n>/s[,<burst>]] [--mode at-least-once|at-most-once]
                       [--ordering none|fifo] [--filter <json> | --filter-file <path>] [--description <text>] [--id <id>] [--scheme hmac-sha256|ed25519]
                       [--client-cert file.pem --client-key key.pem]
                       [--header 'X-Name: value']... [--secret-header 'X-Key: value']... [--no-headers]
                       [--auth-bearer <token> | --auth-basic <user>:<password> | --no-auth |
                        --oauth2-token-url <url> --oauth2-client-id <id> --oauth2-client-secret <secret>
                        [--oauth2-scope <scope>] [--oauth2-audience <audience>]]
  herald endpoints update <id> [the settings of add, but --tenant, --id and --scheme] [--no-client-cert]   changes only those given
                       --ordering fifo: strict order per ordering key, one delivery in flight per key
  herald endpoints list [--tenant <id>]
  herald endpoints show <id>
  herald endpoints events <id> [--after <n>] [--limit <n, default 100>]
                                        its deliveries numbered after n (webhook-sequence), in order
  herald endpoints filter-test <id> --payload <json> [--type <event type>] [--filter <json> | --filter-file <path>]
                                        would this event reach it? if not, which condition failed (--filter: try
                                        that filter instead of the saved one; nothing is saved or published)
  herald endpoints enable <id>          re-enable; its waiting deliveries go out at once
  herald endpoints disable <id>
  herald endpoints rotate-secret <id> [--scheme hmac-sha256|ed25519]
                                        a new secret (by default of the current one's scheme); the old one
                                        keeps signing for signing.rotationOverlapMs

  --scheme ed25519 signs with an ed25519 key pair (Standard Webhooks v1a): the consumer gets the whpk_ public
          key, shown again by show; hmac-sha256 (the default) a whsec_ secret, shown once.

  --retry takes a preset, comma-separated ISO-8601 durations, or a retry policy as JSON, e.g. a formula:
          '{"initial":"PT30S","multiplier":2,"max":"PT6H","attempts":9,"jitter":"full"}'
  --rate-limit takes attempts per second (or /min, /h), then the burst if not the default (a second's worth):
          10/s, 0.5/s, 30/min, 10/s,50
  --header and --secret-header (repeatable) replace the endpoint's custom headers whole; a secret one's
          value is sealed at rest and never shown. --no-headers and --no-auth remove them.
  --filter takes a payload filter as JSON (docs/FILTERS.md); null removes it:
          '{"payload.amount":{"$gte":100},"payload.country":{"$in":["BR","PT"]}}'
  --client-cert, --client-key: PEM files of the endpoint's client certificate for mutual TLS (its key is
          sealed at rest, never shown again); an encrypted key's passphrase in HERALD_CLIENT_KEY_PASSPHRASE`;

export const PUBLISH_USAGE = `Usage: herald publish --tenant <id> --type <event type> --payload <json | @file | -> [--endpoint <id>] [--id <event id>]
                      [--ordering-key <key>]

  --payload '{"n":1}'   the JSON payload; @file reads a file, - reads standard input
  --endpoint <id>       address one endpoint instead of fanning out to the subscribed ones
  --id <event id>       your own id: publishing it again returns the stored event
  --ordering-key <key>  events of one key are delivered in order to a FIFO endpoint (1 to 200 characters)`;

export const DELIVERIES_USAGE = `Usage: herald deliveries [--endpoint <id>] [--tenant <id>] [--type <event type>] [--status <status>]
                         [--since 7d|<ISO time>] [--until <time>] [--limit <n, default 50>]
       herald deliveries attempts <delivery id>

  status: pending, in_flight, delivered, dead, cancelled`;

export const DLQ_USAGE = `Usage: herald dlq list [--state new|acknowledged|replayed|discarded] [--endpoint <id>] [--tenant <id>] [--since 7d|<ISO time>]
                     [--until <time>] [--limit <n>] [--include-replayed]
       herald dlq ack <dead letter id>… --note <why> --by <who>       looked at it; it stays in the queue and can be replayed
       herald dlq discard <dead letter id>… --note <why> --by <who>   not to be delivered: no replay by filter takes it
       herald dlq replay --id <dead letter id> [--dry-run]
       herald dlq replay [--endpoint <id>] [--tenant <id>] [--since <time>] [--until <time, default now>] [--dry-run] [--page-size <n>]

  list shows the open dead letters (new, acknowledged) unless --state or --include-replayed (every state) says otherwise.
  A bulk replay needs at least one of --endpoint, --tenant, --since, --until
  (--since 100w replays everything). It replays --page-size (100) at a time and shows progress.`;

export const REPLAYS_USAGE = `Usage: herald replays [list]
       herald replays show <replay job id>
       herald replays cancel <replay job id>
       herald replays start [--endpoint <id>] [--tenant <id>] [--since <time>] [--until <time>] [--chunk-size <n, default 100>] [--dry-run] [--wait]

  A replay job replays the open dead letters matching the filter (at least one of --endpoint, --tenant,
  --since, --until) as each endpoint drains them (under 2 x its concurrency limit live); new events go first.
  --dry-run prints how many it would replay and starts nothing; --wait follows its progress until it ends.
  cancel stops it: what it replayed stays replayed, the rest stays dead. Jobs are kept in the store: any node
  answers for them, and another node resumes one whose node closed or crashed.`;

export const FAILURES_USAGE = `Usage: herald failures [--endpoint <id>] [--tenant <id>] [--limit <n, default 100>]
       herald failures replay --endpoint <id> --kind <kind>

  Lists the failing deliveries grouped by endpoint and failure kind, the largest groups first: those
  waiting for a retry and the open dead letters, when the group's failures began and last happened,
  and a sample of the latest. A replay makes the group's retrying deliveries due now and replays its
  open dead letters.
  kind: http-<status> (e.g. http-503), timeout, dns, tls, refused, reset, network, blocked, redirect, unknown`;

export const TOKENS_USAGE = `Usage: herald tokens create --tenant <id> [--name <text>] [--expires 90d|<ISO time>|<epoch ms>]
       herald tokens list --tenant <id>
       herald tokens revoke --tenant <id> <token id>

  A tenant token lets that tenant's developers use the admin API and the portal (/portal) on their
  own tenant's data only. create prints the token once (on stdout; --json for the record too): only
  a SHA-256 of it is kept. A revoked or expired token is refused at once, on every node.`;

export const EVENT_TYPES_USAGE = `Usage: herald event-types [list]
       herald event-types show <name>
       herald event-types create <name> [--description <text>] [--schema <file.json>]
       herald event-types update <name> [--description <text>] [--schema <file.json> | --schema none]
       herald event-types deprecate <name> [--note <text>] | undeprecate <name>
       herald event-types delete <name>

  The catalog of event types (global to the installation). A type with a JSON Schema (draft 2020-12) has
  every payload published under it checked against the schema's newest version, in every publish path;
  a payload that does not match is refused (HERALD_INVALID_INPUT, payload/<JSON pointer>) and nothing is
  stored. A new schema is a new version; --schema none stops the check. Types not in the catalog publish
  unchecked. A deprecated type still publishes; the portal marks it. Deleting a type keeps its events.`;

export const STATUS_USAGE = 'Usage: herald status [--url <url>] [--token <token>] [--json]';
