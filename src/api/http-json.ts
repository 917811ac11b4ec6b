// What every HTTP route shares: reading a JSON body, decoding path segments, and answering with JSON or
// with a ServiceError mapped once through the error table.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { JsonValue } from '@bufbuild/protobuf';
import { clip, invalidArgument, type ServiceError } from '../errors.js';
import { httpErrorHeaders, httpStatusOf, messageOf } from './error-map.js';

export function decodePathSegment(segment: string, index: number): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw invalidArgument(`path segment ${index + 1} is not valid percent-encoding`);
  }
}

export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<JsonValue> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw invalidArgument(`request body exceeds ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  try {
    return JSON.parse(text) as JsonValue;
  } catch (err) {
    throw invalidArgument(`request body is not valid JSON: ${clip((err as Error).message)}`);
  }
}

export function sendError(res: ServerResponse, err: ServiceError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const [name, value] of Object.entries(httpErrorHeaders(err))) res.setHeader(name, value);
  sendJson(res, httpStatusOf(err), { code: err.code, message: messageOf(err) });
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
