// @matchmaker/client: a typed client for the matchmaker service.
export { MatchmakerClient, DEFAULT_DEADLINE_MS, DEFAULT_RETRY } from './client.js';
export type { BackfillRequestInit, CallOptions, MatchmakerClientOptions, RetryEvent, RetryPolicy, TicketInit } from './client.js';
export { MatchmakerError, QueueRetiringError, REASON_KEY } from './errors.js';
export type { ErrorCode } from './errors.js';
export { backoffDelay } from './backoff.js';
export type { BackoffPolicy } from './backoff.js';
export {
  decodeEngineInput,
  decodeEngineOutput,
  encodeEngineInput,
  encodeMetadata,
  engineInput,
  EngineInputBuilder,
  matchEngineOutput,
  metadataText,
  ticketEngineInput,
} from './engine.js';
export type { EngineInputInit, EngineInputLike, PlayerInit } from './engine.js';
export { batchedIds, OutcomeCore, outcomeBatch, DEFAULT_DEDUPE_SIZE, DEFAULT_MAX_PENDING_BATCHES } from './outcomes/outcome-core.js';
export type { OutcomeCoreOptions, OutcomeDelivery, SequenceGap } from './outcomes/outcome-core.js';
export { QueuedConsumer, DEFAULT_HIGH_WATER_MARK } from './outcomes/consumer.js';
export type { OutcomeConsumer, OutcomeHandler, QueueOptions } from './outcomes/consumer.js';
export { websocketConsumer, WebSocketOutcomeConsumer, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_RECONNECT } from './outcomes/websocket-consumer.js';
export type { WebSocketConsumerOptions } from './outcomes/websocket-consumer.js';
export { natsConsumer, NatsOutcomeConsumer, DEFAULT_OUTCOME_STREAM, DEFAULT_SUBJECT_PREFIX } from './outcomes/nats-consumer.js';
export type { NatsConsumerOptions } from './outcomes/nats-consumer.js';
export { webhookReceiver, WebhookOutcomeReceiver, decodeBody, DEFAULT_MAX_BODY_BYTES } from './outcomes/webhook-receiver.js';
export type { WebhookReceiverOptions } from './outcomes/webhook-receiver.js';
export { checkWebhookSignature, signWebhook, verifyWebhookSignature, DEFAULT_TOLERANCE_SECS } from './outcomes/webhook-signature.js';
export type { WebhookCheck, WebhookRejection, WebhookSecret, WebhookSignatureInput } from './outcomes/webhook-signature.js';
// The generated protobuf types and schemas of the contract.
export * from './gen/matchmaker/core/v1/resources_pb.js';
export * from './gen/matchmaker/core/v1/service_pb.js';
export * from './gen/matchmaker/outcomes/v1/outcomes_pb.js';
export * from './gen/matchmaker/engines/standard/v1/engine_pb.js';
export * from './gen/matchmaker/admin/v1/admin_pb.js';
