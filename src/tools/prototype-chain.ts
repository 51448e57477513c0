/**
 * The prototypes of `instance` whose properties a tool class declares: its own class's first,
 * then each parent's, up to (not including) `Object.prototype`.
 */
export function* classPrototypes(instance: object): Generator<object> {
  for (
    let prototype = Object.getPrototypeOf(instance) as object | null;
    prototype !== null && prototype !== Object.prototype;
    prototype = Object.getPrototypeOf(prototype) as object | null
  ) {
    yield prototype;
  }
}
