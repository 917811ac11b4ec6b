// Builds each queue's push sink from its outcome settings.
import type { Logger } from 'pino';
import type { BrokerConnection } from '../broker/connection.js';
import type { OutcomesConfig, SinkFactory } from '../delivery.js';
import { BrokerSink } from './broker-sink.js';
import { WebhookSink } from './webhook-sink.js';

export function sinkFactory(deps: { broker: BrokerConnection; log: Logger }): SinkFactory {
  return (queueId: string, config: OutcomesConfig) => {
    switch (config.sink) {
      case 'webhook':
        return new WebhookSink(queueId, config.webhook!, deps.log);
      case 'broker':
        return new BrokerSink(queueId, deps.broker, deps.log);
      case 'websocket':
        return undefined;
    }
  };
}
