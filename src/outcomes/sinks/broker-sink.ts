// PLACEHOLDER, replaced by the NATS JetStream broker sink implementation.
import type { Logger } from 'pino';
import type { ServiceConfig } from '../../config/service-config.js';
import type { Outcome } from '../../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { OutcomeSink, RetryPolicy } from '../sink.js';

/** One NATS connection for the process, opened on first use. */
export class BrokerConnection {
  constructor(
    readonly config: ServiceConfig,
    readonly log: Logger,
  ) {}
  async close(): Promise<void> {}
}

export class BrokerSink implements OutcomeSink {
  readonly kind = 'broker';
  readonly batchSize = 100;
  readonly retry: RetryPolicy = { maxRetries: Infinity, baseDelayMs: 200, maxDelayMs: 10_000 };
  constructor(
    readonly queueId: string,
    readonly connection: BrokerConnection,
    readonly log: Logger,
  ) {}
  async deliver(_outcomes: readonly Outcome[]): Promise<void> {
    throw new Error('broker sink not implemented yet');
  }
  async close(): Promise<void> {}
}
