// What outcome delivery reports, for /metrics (src/api implements it): how late outcomes reach their sink,
// and the retries and parkings on the way.
import type { OutcomeSink } from './sink.js';

export type SinkKind = OutcomeSink['kind'];

export interface DeliveryTelemetry {
  /** A batch the sink acknowledged: per outcome, seconds from its occurrence to the acknowledgement. */
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
