// The service's own settings: one schema, every key with its default. Each key can come from a
// command-line flag or an environment variable (flags win). Units are in the names.
import { availableParallelism, hostname } from 'node:os';
import { z } from 'zod';

const port = z.coerce.number().int().min(0).max(65535);
const ms = z.coerce.number().int().min(0);
/** A JetStream stream name prefix: the characters JetStream recommends (a name may not hold `.`, `*`, `>`,
 *  whitespace or path separators), leaving room for the queue part within the 255 characters of a name. */
const streamPrefix = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_-]+$/, 'must be letters, digits, "_" and "-"');
/** A KV bucket or object store name, as nats.js accepts it. */
const bucketName = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[-\w]+$/, 'must be letters, digits, "_" and "-"');
/** A subject prefix: dot-separated tokens without whitespace or wildcards. */
const subjectPrefix = z
  .string()
  .min(1)
  .regex(/^[^\s.*>]+(\.[^\s.*>]+)*$/, 'must be dot-separated tokens without spaces or wildcards');

/**
 * The most threads a tick spreads over by default: on a 16-core machine 8 threads ticked a fresh 1M pool
 * 1.82x-1.93x faster than one, and 16 threads 1.42x-1.77x, slower than 8 in each of three runs (more threads
 * wait longer for each batch's slowest try; bench/RESULTS.md, "Threads for the tick" and the seventeenth
 * session).
 */
export const DEFAULT_ENGINE_THREADS_MAX = 8;

/** engine_threads' default on a machine of `cores` cores. */
export function defaultEngineThreads(cores: number): number {
  return Math.min(DEFAULT_ENGINE_THREADS_MAX, Math.max(1, cores - 1));
}

export const serviceConfigSchema = z.object({
  /** Directory of queue files, one YAML file per queue. Flag --config, env QUEUE_CONFIG_DIR. */
  queue_config_dir: z.string().min(1).default('queues'),
  /** Directory of the embedded store (lmdb). Flag --data, env DATA_DIR. */
  data_dir: z.string().min(1).default('./data'),
  /** Interface both servers bind to. Env BIND_ADDRESS. */
  bind_address: z.string().min(1).default('0.0.0.0'),
  /** gRPC port (HTTP/2, over TLS when tls_cert_file is set); 0 picks a free port. Env GRPC_PORT. */
  grpc_port: port.default(9001),
  /** HTTP/JSON port (HTTP/1.1, over TLS when tls_cert_file is set); 0 picks a free port. Env HTTP_PORT. */
  http_port: port.default(8080),
  /** PEM certificate (chain) both ports serve TLS with, re-read on change; empty: plaintext. Env TLS_CERT_FILE. */
  tls_cert_file: z.string().default(''),
  /** PEM private key of tls_cert_file, re-read on change. Env TLS_KEY_FILE. */
  tls_key_file: z.string().default(''),
  /** PEM CA certificate(s) a client's certificate must chain to: set, both ports require one (mutual TLS).
   *  Re-read on change. Env TLS_CLIENT_CA_FILE. */
  tls_client_ca_file: z.string().default(''),
  /** Largest accepted HTTP request body. Env HTTP_MAX_BODY_BYTES. */
  http_max_body_bytes: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
  /** Longest time to receive a whole HTTP request, headers and body; then 408 and the connection closes
   *  (a slow or stalled body cannot hold a connection). 0 turns it off. Env HTTP_REQUEST_TIMEOUT_MS. */
  http_request_timeout_ms: ms.default(30_000),
  /** Longest time to receive an HTTP request's headers (at most http_request_timeout_ms). Env HTTP_HEADERS_TIMEOUT_MS. */
  http_headers_timeout_ms: ms.default(10_000),
  /** How long an idle kept-alive HTTP connection stays open for its next request. Env HTTP_KEEP_ALIVE_TIMEOUT_MS. */
  http_keep_alive_timeout_ms: ms.default(5_000),
  /** Most open connections of the HTTP port (WebSocket streams included); more are closed as they arrive.
   *  Env HTTP_MAX_CONNECTIONS. */
  http_max_connections: z.coerce.number().int().min(1).default(10_000),
  /** Concurrent HTTP/2 streams (calls) one connection of the gRPC port may hold, advertised in its SETTINGS;
   *  a client holds calls beyond it until one ends. Each open stream costs memory (about 13 KB), and HTTP/2's own default is
   *  unbounded. Env GRPC_MAX_CONCURRENT_STREAMS. */
  grpc_max_concurrent_streams: z.coerce
    .number()
    .int()
    .min(1)
    .max(2 ** 31 - 1)
    .default(1000),
  /** A gRPC connection with no call for this long is closed (GOAWAY); 0 turns it off. Env GRPC_MAX_CONNECTION_IDLE_MS. */
  grpc_max_connection_idle_ms: ms.max(2 ** 31 - 1).default(300_000),
  /** After SIGTERM: how long the servers keep answering (UNAVAILABLE, health NOT_SERVING) before they close,
   *  so load balancers and clients move away cleanly. Env SHUTDOWN_DRAIN_MS. */
  shutdown_drain_ms: ms.default(0),
  /** After SIGTERM: the longest wait for in-flight requests before the store is closed anyway. Env SHUTDOWN_TIMEOUT_MS. */
  shutdown_timeout_ms: ms.default(10_000),
  /** Quiet period after a change in the queue directory before it is re-read (editors and config maps
   *  write several events per change). Env CONFIG_RELOAD_DEBOUNCE_MS. */
  config_reload_debounce_ms: ms.default(250),
  /** How long recorded outcomes are kept once delivered (push sinks) or at all (websocket sink). Env OUTCOME_RETENTION_SECS. */
  outcome_retention_secs: z.coerce
    .number()
    .int()
    .min(1)
    .default(7 * 24 * 3600),
  /** NATS server(s) of the broker sink and replication: a comma-separated list names a cluster's servers.
   *  Env BROKER_URL. */
  broker_url: z
    .string()
    .min(1)
    // An empty list would let the client fall back to its own default server.
    .refine((v) => v.split(',').some((s) => s.trim() !== ''), 'must name at least one server')
    .default('nats://127.0.0.1:4222'),
  /** NATS credentials file (JWT + nkey seed). Env BROKER_CREDENTIALS_FILE. */
  broker_credentials_file: z.string().default(''),
  /** NATS nkey seed (SU...), instead of a credentials file. Env BROKER_NKEY. */
  broker_nkey: z.string().default(''),
  /** create: the outcome stream is created at startup if missing; bind: it must exist. Env BROKER_RESOURCE_MODE. */
  broker_resource_mode: z.enum(['create', 'bind']).default('create'),
  /** Subjects are <prefix>.<queue_id>.<kind>. Env BROKER_SUBJECT_PREFIX_OUTCOMES. */
  broker_subject_prefix_outcomes: z.string().min(1).default('svc.match.outcomes'),
  /** JetStream stream holding every outcome. Env BROKER_STREAM_OUTCOMES. */
  broker_stream_outcomes: z.string().min(1).default('SVC_MATCH_OUTCOMES'),
  /** embedded: one process owns the pools (lmdb); broker: replicas share them through per-queue
   *  replication streams on the broker. Env POOL_REPLICATION_BACKEND. */
  pool_replication_backend: z.enum(['embedded', 'broker']).default('embedded'),
  /** This replica's id in the replicated mode: unique among the replicas (its leases name it, and its presence
   *  key counts it). Defaults to the host name and process id. Env REPLICA_ID. */
  replica_id: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[A-Za-z0-9_-]+$/, 'must be letters, digits, "_" and "-"')
    .default(() => `${hostname().replace(/[^A-Za-z0-9_-]/g, '-')}-${process.pid}`),
  /** Replicas of every stream, KV bucket and object store the service creates (3 in a three-node cluster).
   *  Env BROKER_STREAM_REPLICAS. */
  broker_stream_replicas: z.coerce.number().int().min(1).max(5).default(1),
  /** Replication subjects are <prefix>.<kind>.<queue_id>. Env BROKER_SUBJECT_PREFIX_REPLICATION. */
  broker_subject_prefix_replication: subjectPrefix.default('svc.match.replication'),
  /** Replication streams made in create mode are <prefix>_<queue id>_<hash>. Env BROKER_STREAM_REPLICATION_PREFIX. */
  broker_stream_replication_prefix: streamPrefix.default('SVC_MATCH_REPLICATION'),
  /** KV bucket of the leader leases. Env BROKER_KV_COORDINATION. */
  broker_kv_coordination: bucketName.default('SVC_MATCH_COORDINATION'),
  /** Object store of the pool checkpoints. Env BROKER_OBJECT_STORE_CHECKPOINTS. */
  broker_object_store_checkpoints: bucketName.default('SVC_MATCH_CHECKPOINTS'),
  /** A queue leader's lease: the TTL of the coordination bucket. Below 1 s a GC pause or a stream leader
   *  election would depose leaders. Env LEADER_LEASE_MS. */
  leader_lease_ms: z.coerce.number().int().min(1000).default(6000),
  /** A queue's leader checkpoints it after this many replication records since the last checkpoint (stretched
   *  for a large pool). Env CHECKPOINT_INTERVAL_RECORDS. */
  checkpoint_interval_records: z.coerce.number().int().min(1).default(50_000),
  /** ... or after this many bytes of replication log entries... Env CHECKPOINT_INTERVAL_BYTES. */
  checkpoint_interval_bytes: z.coerce
    .number()
    .int()
    .min(1024)
    .default(16 * 1024 * 1024),
  /** ... or after this long if any record came, whichever comes first. Env CHECKPOINT_INTERVAL_SECS. */
  checkpoint_interval_secs: z.coerce.number().int().min(1).default(60),
  /** How a queue's leader stores its checkpoints: zstd frames (about a third of the bytes to upload and to read
   *  back on a restart), or none, which replicas of versions before compressed checkpoints can restore
   *  (docs/replication.md, "Checkpoints"). Env CHECKPOINT_COMPRESSION. */
  checkpoint_compression: z.enum(['zstd', 'none']).default('zstd'),
  /** WebSocket stream: ping interval; a client that has not answered the previous ping is disconnected. Env WEBSOCKET_HEARTBEAT_MS. */
  websocket_heartbeat_ms: z.coerce.number().int().min(100).default(15_000),
  /** YAML file of bearer tokens ({name, sha256, scopes}), re-read on change; empty: no token checks unless
   *  auth_jwks_file is set (docs/security.md). Env AUTH_TOKENS_FILE. */
  auth_tokens_file: z.string().default(''),
  /** JSON Web Key Set file whose keys verify signed JWT bearer tokens, re-read on change. Env AUTH_JWKS_FILE. */
  auth_jwks_file: z.string().default(''),
  /** The `iss` every JWT must carry (required with auth_jwks_file). Env AUTH_JWT_ISSUER. */
  auth_jwt_issuer: z.string().default(''),
  /** An `aud` every JWT must carry (required with auth_jwks_file). Env AUTH_JWT_AUDIENCE. */
  auth_jwt_audience: z.string().default(''),
  /** The JWT claim that holds the scopes: a space-separated string or an array of strings. Env AUTH_JWT_SCOPES_CLAIM. */
  auth_jwt_scopes_claim: z.string().min(1).default('scope'),
  /** Calls a second each token (by name) may make, a token bucket; 0: no limit. Env AUTH_RATE_LIMIT_PER_SEC. */
  auth_rate_limit_per_sec: z.coerce.number().min(0).default(0),
  /** Calls a token may make at once above its rate (the bucket's size); 0: one second's worth. Env AUTH_RATE_LIMIT_BURST. */
  auth_rate_limit_burst: z.coerce.number().int().min(0).default(0),
  /** Origins (scheme://host[:port], comma-separated) besides the service's own whose browser requests are
   *  served; a request from any other Origin gets 403. Env HTTP_ALLOWED_ORIGINS. */
  http_allowed_origins: z.string().default(''),
  /** Host header values (host or host:port, comma-separated) the HTTP port answers; empty: any (the health
   *  probes always). Env HTTP_ALLOWED_HOSTS. */
  http_allowed_hosts: z.string().default(''),
  /** Threads every queue's engine spreads a large pool's tick over (docs/engine.md, "Threads"); 1: the tick's
   *  own thread alone. By default the cores less one (left to the event loop that answers requests during a
   *  tick), and at most DEFAULT_ENGINE_THREADS_MAX. Env ENGINE_THREADS. */
  engine_threads: z.coerce.number().int().min(1).max(256).default(defaultEngineThreads(availableParallelism())),
  /** pino log level. Env LOG_LEVEL. */
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type ServiceConfig = z.infer<typeof serviceConfigSchema>;

/** Environment variable of each key. */
export const serviceConfigEnv: Record<keyof ServiceConfig, string> = {
  queue_config_dir: 'QUEUE_CONFIG_DIR',
  data_dir: 'DATA_DIR',
  bind_address: 'BIND_ADDRESS',
  grpc_port: 'GRPC_PORT',
  http_port: 'HTTP_PORT',
  tls_cert_file: 'TLS_CERT_FILE',
  tls_key_file: 'TLS_KEY_FILE',
  tls_client_ca_file: 'TLS_CLIENT_CA_FILE',
  http_max_body_bytes: 'HTTP_MAX_BODY_BYTES',
  http_request_timeout_ms: 'HTTP_REQUEST_TIMEOUT_MS',
  http_headers_timeout_ms: 'HTTP_HEADERS_TIMEOUT_MS',
  http_keep_alive_timeout_ms: 'HTTP_KEEP_ALIVE_TIMEOUT_MS',
  http_max_connections: 'HTTP_MAX_CONNECTIONS',
  grpc_max_concurrent_streams: 'GRPC_MAX_CONCURRENT_STREAMS',
  grpc_max_connection_idle_ms: 'GRPC_MAX_CONNECTION_IDLE_MS',
  shutdown_drain_ms: 'SHUTDOWN_DRAIN_MS',
  shutdown_timeout_ms: 'SHUTDOWN_TIMEOUT_MS',
  config_reload_debounce_ms: 'CONFIG_RELOAD_DEBOUNCE_MS',
  outcome_retention_secs: 'OUTCOME_RETENTION_SECS',
  broker_url: 'BROKER_URL',
  broker_credentials_file: 'BROKER_CREDENTIALS_FILE',
  broker_nkey: 'BROKER_NKEY',
  broker_resource_mode: 'BROKER_RESOURCE_MODE',
  broker_subject_prefix_outcomes: 'BROKER_SUBJECT_PREFIX_OUTCOMES',
  broker_stream_outcomes: 'BROKER_STREAM_OUTCOMES',
  pool_replication_backend: 'POOL_REPLICATION_BACKEND',
  replica_id: 'REPLICA_ID',
  broker_stream_replicas: 'BROKER_STREAM_REPLICAS',
  broker_subject_prefix_replication: 'BROKER_SUBJECT_PREFIX_REPLICATION',
  broker_stream_replication_prefix: 'BROKER_STREAM_REPLICATION_PREFIX',
  broker_kv_coordination: 'BROKER_KV_COORDINATION',
  broker_object_store_checkpoints: 'BROKER_OBJECT_STORE_CHECKPOINTS',
  leader_lease_ms: 'LEADER_LEASE_MS',
  checkpoint_interval_records: 'CHECKPOINT_INTERVAL_RECORDS',
  checkpoint_interval_bytes: 'CHECKPOINT_INTERVAL_BYTES',
  checkpoint_interval_secs: 'CHECKPOINT_INTERVAL_SECS',
  checkpoint_compression: 'CHECKPOINT_COMPRESSION',
  websocket_heartbeat_ms: 'WEBSOCKET_HEARTBEAT_MS',
  auth_tokens_file: 'AUTH_TOKENS_FILE',
  auth_jwks_file: 'AUTH_JWKS_FILE',
  auth_jwt_issuer: 'AUTH_JWT_ISSUER',
  auth_jwt_audience: 'AUTH_JWT_AUDIENCE',
  auth_jwt_scopes_claim: 'AUTH_JWT_SCOPES_CLAIM',
  auth_rate_limit_per_sec: 'AUTH_RATE_LIMIT_PER_SEC',
  auth_rate_limit_burst: 'AUTH_RATE_LIMIT_BURST',
  http_allowed_origins: 'HTTP_ALLOWED_ORIGINS',
  http_allowed_hosts: 'HTTP_ALLOWED_HOSTS',
  engine_threads: 'ENGINE_THREADS',
  log_level: 'LOG_LEVEL',
};

/** Reads the settings: flags over environment over defaults. Throws a message naming the bad key. */
export function loadServiceConfig(
  flags: Partial<Record<keyof ServiceConfig, string>>,
  env: NodeJS.ProcessEnv = process.env,
): ServiceConfig {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(serviceConfigEnv) as (keyof ServiceConfig)[]) {
    const value = flags[key] ?? env[serviceConfigEnv[key]];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const parsed = serviceConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = String(issue.path[0]) as keyof ServiceConfig;
    throw new Error(`invalid setting ${key} (env ${serviceConfigEnv[key]}): ${issue.message}`);
  }
  const config = parsed.data;
  if (config.http_request_timeout_ms > 0 && config.http_headers_timeout_ms > config.http_request_timeout_ms) {
    throw new Error(
      `invalid setting http_headers_timeout_ms (env HTTP_HEADERS_TIMEOUT_MS): ${config.http_headers_timeout_ms} is above http_request_timeout_ms (${config.http_request_timeout_ms})`,
    );
  }
  if ((config.tls_cert_file === '') !== (config.tls_key_file === '')) {
    const [missing, set] =
      config.tls_cert_file === '' ? (['tls_cert_file', 'tls_key_file'] as const) : (['tls_key_file', 'tls_cert_file'] as const);
    throw new Error(
      `invalid setting ${missing} (env ${serviceConfigEnv[missing]}): required with ${set}: TLS needs the certificate and its key`,
    );
  }
  if (config.tls_client_ca_file !== '' && config.tls_cert_file === '') {
    throw new Error(
      "invalid setting tls_client_ca_file (env TLS_CLIENT_CA_FILE): mutual TLS needs the service's own certificate too (tls_cert_file and tls_key_file)",
    );
  }
  if (config.auth_jwks_file !== '') {
    for (const key of ['auth_jwt_issuer', 'auth_jwt_audience'] as const) {
      if (config[key] === '') {
        throw new Error(
          `invalid setting ${key} (env ${serviceConfigEnv[key]}): required with auth_jwks_file, so a token minted for another service is refused`,
        );
      }
    }
  }
  return config;
}
