// What outcome delivery reports, for /metrics (src/api implements it): how late outcomes reach their sink,
// and the retries and parkings on the way.
import type { OutcomeSink } from './sink.js';

/** The push sinks, and the WebSocket stream (whose consumers acknowledge what they pulled). */
export type SinkKind = OutcomeSink['kind'] | 'websocket';

export interface DeliveryTelemetry {
  /** Outcomes the sink (or a stream consumer) acknowledged: per outcome, seconds from its occurrence to the acknowledgement. */
  delivered(queueId: string, sink: SinkKind, lagsSeconds: readonly number[]): void;
  /** A failed attempt that will be retried. */
  retried(queueId: string, sink: SinkKind): void;
  /** A delivery parked after its retries were spent. */
  parked(queueId: string, sink: SinkKind): void;
}

export const noDeliveryTelemetry: DeliveryTelemetry = {
  delivered() {},
  retried() {},
  parked() {},
};
