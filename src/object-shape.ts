/**
 * Whether `value` is an object and not an array, whatever its prototype: the shape of a JSON
 * object, as options, messages and answers are read (see isPlainObject for records, which also
 * asks for a plain prototype).
 */
export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
