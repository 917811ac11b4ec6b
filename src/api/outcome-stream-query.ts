// The outcome stream's query (docs/outcomes-websocket.md): `queue_id` (a queue or a namespace
// `<namespace>.>`), `from_offset` and `consumer`, checked before the upgrade so a bad one is a plain 400.
import { QUEUE_ID_PATTERN } from '../config/queue-config.js';
import { invalidArgument, quote } from '../errors.js';

const CONSUMER_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** An offset as a client writes it: a decimal uint64. */
export const OFFSET_PATTERN = /^\d{1,20}$/;
const MAX_OFFSET = 2n ** 64n - 1n;

export interface StreamQuery {
  /** Accepts a queue id by the `queue_id` parameter (the sink check is separate). */
  matches: (queueId: string) => boolean;
  queueParam: string | undefined;
  /** Set when `queue_id` names one queue: its outcomes are read through the store's per-queue index. */
  exactQueue: string | undefined;
  /** First offset to send (from_offset), if given. */
  fromOffset: bigint | undefined;
  consumer: string | undefined;
}

export function parseQuery(url: URL): StreamQuery {
  for (const key of url.searchParams.keys()) {
    if (key !== 'queue_id' && key !== 'from_offset' && key !== 'consumer') throw invalidArgument(`unknown query parameter ${quote(key)}`);
  }
  const single = (key: string): string | undefined => {
    const values = url.searchParams.getAll(key);
    if (values.length > 1) throw invalidArgument(`${key} may be given once`);
    return values[0] === '' ? undefined : values[0];
  };
  const queueParam = single('queue_id');
  let matches: (queueId: string) => boolean = () => true;
  let exactQueue: string | undefined;
  if (queueParam !== undefined && queueParam !== '>') {
    if (queueParam.endsWith('.>')) {
      const namespace = queueParam.slice(0, -2);
      if (!QUEUE_ID_PATTERN.test(namespace))
        throw invalidArgument(`queue_id ${quote(queueParam)} is not a queue id or a namespace written "<namespace>.>"`);
      const prefix = `${namespace}.`;
      matches = (queueId) => queueId.startsWith(prefix);
    } else {
      if (!QUEUE_ID_PATTERN.test(queueParam))
        throw invalidArgument(`queue_id ${quote(queueParam)} is not a queue id or a namespace written "<namespace>.>"`);
      matches = (queueId) => queueId === queueParam;
      exactQueue = queueParam;
    }
  }
  const from = single('from_offset');
  let fromOffset: bigint | undefined;
  if (from !== undefined) {
    if (!OFFSET_PATTERN.test(from) || BigInt(from) > MAX_OFFSET)
      throw invalidArgument('from_offset must be a non-negative integer (uint64)');
    fromOffset = BigInt(from);
  }
  const consumer = single('consumer');
  if (consumer !== undefined && !CONSUMER_PATTERN.test(consumer)) {
    throw invalidArgument(
      'consumer must be 1 to 128 characters of letters, digits, ".", "_", ":" and "-", starting with a letter or digit',
    );
  }
  return { matches, queueParam, exactQueue, fromOffset, consumer };
}
