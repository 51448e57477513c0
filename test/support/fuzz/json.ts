// ----- JSON text ------------------------------------------------------------------------------

/** A JSON object as its entries, in order: any key (`__proto__` included) stays an own key. */
export class Obj {
  constructor(readonly entries: ReadonlyArray<readonly [string, J]>) {}
}

/** JSON text written as is: deep nesting, numbers such as `1e999`. */
export class Raw {
  constructor(readonly text: string) {}
}

export type J = null | boolean | number | string | Obj | Raw | readonly J[];

/** Leaves the key out (see `put`). */
export const ABSENT = Symbol('absent');
export type Maybe<T> = T | typeof ABSENT;

export function obj(record: Readonly<Record<string, J>>): Obj {
  return new Obj(Object.entries(record));
}

/** The object with `key` set to `value` (replacing every entry of that key), or removed. */
export function put(target: Obj, key: string, value: Maybe<J>): Obj {
  const kept = target.entries.filter(([name]) => name !== key);
  return new Obj(value === ABSENT ? kept : [...kept, [key, value]]);
}

/** What `JSON.parse` makes of `value[key]` (the last entry wins); `undefined` when absent. */
export function get(value: J | undefined, key: string): J | undefined {
  if (!(value instanceof Obj)) return undefined;
  for (let i = value.entries.length - 1; i >= 0; i--) {
    if (value.entries[i]![0] === key) return value.entries[i]![1];
  }
  return undefined;
}

export function ser(value: J): string {
  if (value instanceof Raw) return value.text;
  if (value instanceof Obj) {
    return `{${value.entries.map(([key, item]) => `${JSON.stringify(key)}:${ser(item)}`).join(',')}}`;
  }
  if (Array.isArray(value)) return `[${(value as readonly J[]).map(ser).join(',')}]`;
  return JSON.stringify(value) ?? 'null';
}

export function show(value: Maybe<J> | undefined, max = 60): string {
  if (value === ABSENT || value === undefined) return '(absent)';
  const text = ser(value);
  return text.length > max ? `${text.slice(0, max)}… (${text.length} chars)` : text;
}
