/**
 * What kind of value a tool's `input` is: a Standard Schema (with or without JSON Schema), a
 * class-validator DTO class, or neither. Detection only; nothing is built or validated here.
 */
import type { StandardSchemaWithJSON } from '@modelcontextprotocol/server';
import { type DtoClass, metadataOf } from './class-validator-json-schema.js';
import { dtoLibrariesIfLoaded } from './dto-libraries.js';

type JsonObject = Record<string, unknown>;

/**
 * True for a Standard Schema whose `~standard` has both `validate` and `jsonSchema`: what
 * `McpServer.registerTool` takes as `inputSchema`. Functions count too (ArkType types are callable).
 */
export function isStandardSchema(value: unknown): value is StandardSchemaWithJSON {
  const std = standardProps(value);
  return (
    std !== undefined &&
    typeof std.validate === 'function' &&
    typeof std.jsonSchema === 'object' &&
    std.jsonSchema !== null &&
    typeof (std.jsonSchema as JsonObject).input === 'function'
  );
}

/**
 * The `~standard` properties of anything that carries the key (an empty object when its value is
 * not an object); undefined when the value makes no Standard Schema claim at all.
 */
export function standardProps(value: unknown): JsonObject | undefined {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) {
    return undefined;
  }
  if (!('~standard' in value)) return undefined;
  const std = (value as { '~standard': unknown })['~standard'];
  return typeof std === 'object' && std !== null ? (std as JsonObject) : {};
}

/**
 * A class: written with `class`, or any constructor class-validator holds metadata for. Plain
 * functions and built-ins (`Date`, `z.object` itself) are refused rather than read as empty DTOs.
 */
export function isDtoClass(value: unknown): value is DtoClass {
  if (typeof value !== 'function') return false;
  const prototype: unknown = (value as { prototype?: unknown }).prototype;
  if (typeof prototype !== 'object' || prototype === null) return false;
  if (/^class\b/.test(Function.prototype.toString.call(value))) return true;
  // Read only once class-validator is loaded: whatever decorated the class loaded it.
  return dtoLibrariesIfLoaded() !== undefined && metadataOf(value as DtoClass).length > 0;
}
