// Canonical protobuf JSON writes bytes as base64, standard or URL-safe, padding optional. protobuf-es
// decodes leniently (it skips characters it does not know and ignores stray padding), so a body with
// `====` or `Y Q==` would become bytes the caller never meant. The HTTP adapter checks every bytes field of
// a request against the strict forms before decoding it.
import { type DescField, type DescMessage, type JsonValue, ScalarType } from '@bufbuild/protobuf';
import { invalidArgument } from '../errors.js';

const STANDARD = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;
const URL_SAFE = /^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2}(?:==)?|[A-Za-z0-9_-]{3}=?)?$/;

/** Standard or URL-safe alphabet (not a mix), padded or not; padding only at the end, and only where due. */
export function isCanonicalBase64(text: string): boolean {
  return STANDARD.test(text) || URL_SAFE.test(text);
}

/** Throws INVALID_ARGUMENT naming the first bytes field (snake_case path) whose value is not canonical base64. */
export function checkBase64Fields(schema: DescMessage, json: JsonValue, prefix = ''): void {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return;
  for (const [key, value] of Object.entries(json)) {
    const field = schema.fields.find((f) => f.jsonName === key || f.name === key);
    if (!field || value === null) continue;
    checkField(field, value, prefix ? `${prefix}.${field.name}` : field.name);
  }
}

function checkField(field: DescField, value: JsonValue, path: string): void {
  const each = (check: (item: JsonValue, at: string) => void) => {
    if (!Array.isArray(value)) return;
    for (const [i, item] of value.entries()) check(item, `${path}[${i}]`);
  };
  const eachValue = (check: (item: JsonValue, at: string) => void) => {
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, item] of Object.entries(value)) check(item, `${path}[${JSON.stringify(k.slice(0, 64))}]`);
    }
  };
  switch (field.fieldKind) {
    case 'scalar':
      if (field.scalar === ScalarType.BYTES) checkBytes(value, path);
      return;
    case 'message':
      return checkBase64Fields(field.message, value, path);
    case 'list':
      if (field.listKind === 'scalar' && field.scalar === ScalarType.BYTES) each(checkBytes);
      if (field.listKind === 'message') each((item, at) => checkBase64Fields(field.message, item, at));
      return;
    case 'map':
      if (field.mapKind === 'scalar' && field.scalar === ScalarType.BYTES) eachValue(checkBytes);
      if (field.mapKind === 'message') eachValue((item, at) => checkBase64Fields(field.message, item, at));
      return;
    default:
      return;
  }
}

/** A non-string is left to fromJson, which refuses it with its own message. */
function checkBytes(value: JsonValue, path: string): void {
  if (typeof value === 'string' && !isCanonicalBase64(value)) {
    throw invalidArgument(`${path} is not valid base64 (standard or URL-safe alphabet, padding optional)`);
  }
}
