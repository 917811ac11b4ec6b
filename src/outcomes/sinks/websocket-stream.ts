// PLACEHOLDER, replaced by the WebSocket outcome stream implementation.
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { Store } from '../../store/store.js';
import type { OutcomeDelivery } from '../delivery.js';

export interface OutcomeStreamDeps {
  /** The store and delivery once open (undefined while starting: upgrade requests get 503). */
  state: () => { store: Store; delivery: OutcomeDelivery } | undefined;
  heartbeatMs: number;
  log: Logger;
}

/** Serves GET /v1/outcomes/stream (WebSocket upgrade) on the HTTP server. */
export function attachOutcomeStream(_server: Server, _deps: OutcomeStreamDeps): { close(): Promise<void> } {
  return { close: async () => {} };
}
