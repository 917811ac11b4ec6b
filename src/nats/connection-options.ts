// The options every NATS connection of the service shares: the broker sink's (src/outcomes/broker/connection.ts)
// and the replicated mode's (src/modes/replicated.ts). Each says only its name and how soon it redials.
import type { NodeConnectionOptions } from '@nats-io/transport-node';
import type { ServiceConfig } from '../config/service-config.js';
import { brokerTarget, leastRecentlyDialed } from './auth.js';

export interface ConnectionOptions {
  options: NodeConnectionOptions;
  /** BROKER_URL without credentials, for logs. */
  display: string;
}

export function connectionOptions(
  config: ServiceConfig,
  own: { name: string; reconnectTimeWaitMs: number; requestTimeoutMs: number },
): ConnectionOptions {
  const target = brokerTarget(config);
  return {
    display: target.display,
    options: {
      ...target.auth,
      servers: target.servers,
      name: own.name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: own.reconnectTimeWaitMs,
      timeout: own.requestTimeoutMs,
      // A lost server is noticed within 10 to 15 s by pings; a hung one sooner (each caller proves its
      // connection with round trips and leaves a silent server).
      pingInterval: 5_000,
      maxPingOut: 2,
      reconnectToServer: leastRecentlyDialed,
      // nats.js captures a stack trace (three Error objects) per request unless told not to: with a publish
      // or an append per few requests that was a measurable share of the CPU. Our errors carry their own context.
      noAsyncTraces: true,
    },
  };
}
