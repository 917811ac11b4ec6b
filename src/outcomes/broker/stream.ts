// The outcome stream: made sure of before the first publish and after every reconnect. In `create` mode
// (BROKER_RESOURCE_MODE) a missing stream is created; in `bind` mode it must have been provisioned. Either
// way one of its subjects must cover <prefix>.>, or outcomes would not be stored.
import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { subjectCovers } from '../../nats/subjects.js';
import { BrokerError, findCause } from '../../nats/broker-error.js';

/** JetStream dedupe window of a stream created by the service (create mode). */
export const DUPLICATE_WINDOW_MS = 2 * 60_000;
/** How long a stream created by the service keeps outcomes (create mode). */
export const STREAM_MAX_AGE_MS = 7 * 24 * 3600_000;

const TOKEN = /^[^\s.*>]+$/;

export interface OutcomeStreamSettings {
  /** BROKER_STREAM_OUTCOMES */
  name: string;
  /** BROKER_SUBJECT_PREFIX_OUTCOMES */
  prefix: string;
  /** BROKER_RESOURCE_MODE */
  mode: 'create' | 'bind';
  /** BROKER_STREAM_REPLICAS: replicas of the stream when create mode makes it. */
  replicas: number;
  /** How long one JetStream API request waits for its answer. */
  timeoutMs: number;
  /** BROKER_URL as it may be logged. */
  display: string;
}

/** Makes sure the outcome stream exists and covers <prefix>.>; throws a BrokerError naming the problem. */
export async function ensureOutcomeStream(nc: NatsConnection, settings: OutcomeStreamSettings, log: Logger): Promise<void> {
  const { name, prefix, mode } = settings;
  if (!prefix.split('.').every((t) => TOKEN.test(t))) {
    throw new BrokerError(
      'config',
      `BROKER_SUBJECT_PREFIX_OUTCOMES "${prefix}" is not a valid subject prefix (dot-separated tokens without spaces or wildcards)`,
    );
  }
  const wanted = `${prefix}.>`;
  let jsm: JetStreamManager;
  try {
    jsm = await jetstreamManager(nc, { timeout: settings.timeoutMs });
  } catch (err) {
    throw new BrokerError('jetstream', `JetStream is not available on ${settings.display}`, { cause: err });
  }
  if (await covers(jsm, name, wanted)) return;
  if (mode === 'bind') {
    throw new BrokerError(
      'stream-missing',
      `outcome stream "${name}" does not exist; BROKER_RESOURCE_MODE=bind requires it to be provisioned with the subject filter "${wanted}"`,
      { stream: name },
    );
  }
  const config: Partial<StreamConfig> & { name: string } = {
    name,
    description: 'matchmaker outcomes',
    subjects: [wanted],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(STREAM_MAX_AGE_MS),
    duplicate_window: nanos(DUPLICATE_WINDOW_MS),
    num_replicas: settings.replicas,
  };
  try {
    await jsm.streams.add(config);
    log.info({ stream: name, subjects: [wanted] }, 'outcome stream created');
  } catch (err) {
    // Another replica may have created it meanwhile: accept it if it fits.
    if (await covers(jsm, name, wanted).catch(() => false)) return;
    throw new BrokerError('jetstream', `cannot create outcome stream "${name}" with subjects ["${wanted}"]`, { cause: err, stream: name });
  }
}

/** Whether the stream exists (false if not) with a subject covering `wanted` (it throws if not). */
async function covers(jsm: JetStreamManager, name: string, wanted: string): Promise<boolean> {
  let subjects: string[];
  try {
    subjects = (await jsm.streams.info(name)).config.subjects ?? [];
  } catch (err) {
    if (findCause(err, JetStreamApiError)?.code === JetStreamApiCodes.StreamNotFound) return false;
    throw new BrokerError('jetstream', `cannot read outcome stream "${name}"`, { cause: err, stream: name });
  }
  if (subjects.some((s) => subjectCovers(s, wanted))) return true;
  throw new BrokerError(
    'stream-subjects',
    `outcome stream "${name}" exists but its subjects ${JSON.stringify(subjects)} do not cover "${wanted}"; ` +
      `outcomes would not be stored (change the stream's subjects, or BROKER_STREAM_OUTCOMES / BROKER_SUBJECT_PREFIX_OUTCOMES)`,
    { stream: name, subject: wanted },
  );
}
