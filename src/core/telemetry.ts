// What queues and outcome delivery report as they run, named here for src/api, which implements these
// ports for /metrics and the dashboard and reaches the lower layers only through the core.
export type { DeliveryTelemetry } from '../outcomes/delivery-telemetry.js';
export type { MatchFacts, QueueTelemetry, RuleRejections, TickFacts, TicketExit } from '../queue/queue-telemetry.js';
