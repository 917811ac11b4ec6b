// Plain-JSON engine payloads over HTTP: a ticket's or backfill request's `engineInput` may be the canonical
// base64 of a serialized `EngineInput`, or that `EngineInput` itself in canonical protobuf JSON. The JSON
// form is serialized here, before anything else reads the request, so the same validation and limits (on
// the serialized message) apply, and the stored ticket holds the same bytes as one sent as base64.
import { fromJson, toBinary, type JsonObject, type JsonValue } from '@bufbuild/protobuf';
import { clip, invalidArgument } from '../errors.js';
import { EngineInputSchema } from '../gen/matchmaker/engines/standard/v1/engine_pb.js';

/** Where a request body holds an engine input: the message's JSON key (either spelling), and its snake_case name. */
export interface EngineInputAt {
  keys: readonly string[];
  path: string;
}

export const TICKET_ENGINE_INPUT: EngineInputAt = { keys: ['ticket'], path: 'ticket' };
export const BACKFILL_ENGINE_INPUT: EngineInputAt = { keys: ['backfillRequest', 'backfill_request'], path: 'backfill_request' };

/** Replaces a JSON-object `engineInput` under `at` with the base64 of its serialized EngineInput. */
export function serializeJsonEngineInput(body: JsonValue, at: EngineInputAt): JsonValue {
  if (!isObject(body)) return body;
  for (const key of at.keys) {
    const message = body[key];
    if (!isObject(message)) continue;
    for (const field of ['engineInput', 'engine_input']) {
      const value = message[field];
      if (!isObject(value)) continue;
      let bytes: Uint8Array;
      try {
        bytes = toBinary(EngineInputSchema, fromJson(EngineInputSchema, value));
      } catch (err) {
        throw invalidArgument(
          `${at.path}.engine_input is neither base64 nor an EngineInput in protobuf JSON: ${clip((err as Error).message)}`,
        );
      }
      message[field] = Buffer.from(bytes).toString('base64');
    }
  }
  return body;
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
