// PLACEHOLDER, replaced by the webhook sink implementation.
import type { Logger } from 'pino';
import type { Outcome } from '../../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { OutcomesConfig } from '../delivery.js';
import type { OutcomeSink, RetryPolicy } from '../sink.js';

export type WebhookSettings = NonNullable<OutcomesConfig['webhook']>;

export class WebhookSink implements OutcomeSink {
  readonly kind = 'webhook';
  readonly batchSize: number;
  readonly retry: RetryPolicy;
  constructor(
    readonly queueId: string,
    readonly settings: WebhookSettings,
    readonly log: Logger,
  ) {
    this.batchSize = settings.max_batch_size;
    this.retry = { maxRetries: settings.max_retries, baseDelayMs: settings.retry_base_delay_ms, maxDelayMs: settings.retry_max_delay_ms };
  }
  async deliver(_outcomes: readonly Outcome[]): Promise<void> {
    throw new Error('webhook sink not implemented yet');
  }
  async close(): Promise<void> {}
}
