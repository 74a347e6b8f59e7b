import { depthExceeds } from '../../engine/nesting.js';

/** Nesting an advertised schema may have: real tools' schemas stay far below it. */
const MAX_SCHEMA_DEPTH = 32;
/** Characters of JSON an advertised schema may take: every model request carries it. */
const MAX_SCHEMA_CHARS = 32_000;

const ANY_OBJECT: Record<string, unknown> = { type: 'object', additionalProperties: true };

/**
 * The input schema to advertise for a server's tool. The server's own, without `$schema`, when it
 * is a JSON object schema of bounded depth and size; otherwise any object (the server still
 * validates what it gets), with a note saying why.
 */
export function boundedInputSchema(schema: unknown): { readonly schema: Record<string, unknown>; readonly note?: string } {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema) || (schema as Record<string, unknown>)['type'] !== 'object') {
    return { schema: ANY_OBJECT, note: 'its input schema is not a JSON object schema' };
  }
  if (depthExceeds(schema, MAX_SCHEMA_DEPTH)) return { schema: ANY_OBJECT, note: `its input schema nests deeper than ${MAX_SCHEMA_DEPTH} levels` };
  const { $schema: _ignored, ...rest } = schema as Record<string, unknown>;
  if (JSON.stringify(rest).length > MAX_SCHEMA_CHARS) return { schema: ANY_OBJECT, note: `its input schema is longer than ${MAX_SCHEMA_CHARS} characters` };
  return { schema: rest };
}
