import { SetMetadata } from '@nestjs/common';
import type { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';

/** Per metadata key, the classes (prototypes) with a method markMethod marked with it. */
const markedClasses = new Map<string, WeakSet<object>>();

/**
 * `SetMetadata(key, value)` for a method, which also notes its class: markedMethods then reads
 * the methods of those classes (and of their subclasses) only, instead of every method of every
 * provider and controller of the app, Nest's own included, at each startup.
 */
export function markMethod(key: string, value: unknown): MethodDecorator {
  const setMetadata = SetMetadata(key, value);
  return (target, property, descriptor) => {
    let classes = markedClasses.get(key);
    if (classes === undefined) markedClasses.set(key, (classes = new WeakSet()));
    classes.add(target);
    return setMetadata(target, property, descriptor);
  };
}

/** Whether `prototype` is, or inherits from, a class with a method marked with `key`. */
function inheritsMark(prototype: object, classes: WeakSet<object> | undefined): boolean {
  if (classes === undefined) return false;
  for (
    let p: object | null = prototype;
    p !== null;
    p = Object.getPrototypeOf(p) as object | null
  ) {
    if (classes.has(p)) return true;
  }
  return false;
}

/** A provider or controller method that carries a metadata key, with the value it carries. */
export interface MarkedMethod<T> {
  /** The instance the method runs on. */
  readonly instance: Record<string, unknown>;
  readonly name: string;
  readonly metadata: T;
  /**
   * Every instance of the provider that Nest runs lifecycle hooks on: `instance` and, for a
   * transient provider, the one each consumer got.
   */
  readonly instances: readonly object[];
}

/** A provider or controller as DiscoveryService finds it (Nest's InstanceWrapper). */
export type DiscoveredWrapper = ReturnType<DiscoveryService['getProviders']>[number];

/**
 * The methods of the app's providers and controllers marked with `key` (a markMethod
 * decorator), found once. Wrappers without an instance or with a null prototype are skipped; so
 * are request-scoped ones (directly or through a dependency): their marked methods go to
 * `onScoped` when given (a task tool resolves its instance per call), and are left out
 * otherwise (a change listener runs outside any request's lifetime).
 */
export function markedMethods<T>(
  key: string,
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  reflector: Reflector,
  onScoped?: (wrapper: DiscoveredWrapper, methods: MarkedMethod<T>[]) => void,
): MarkedMethod<T>[] {
  const found: MarkedMethod<T>[] = [];
  const classes = markedClasses.get(key);
  for (const wrapper of [...discovery.getProviders(), ...discovery.getControllers()]) {
    const { instance } = wrapper;
    if (!instance || typeof instance !== 'object') continue;
    const prototype = Object.getPrototypeOf(instance) as object | null;
    if (!prototype || !inheritsMark(prototype, classes)) continue;
    const marked: MarkedMethod<T>[] = [];
    let instances: object[] | undefined;
    for (const name of scanner.getAllMethodNames(prototype)) {
      const method = (instance as Record<string, unknown>)[name] as () => unknown;
      const metadata = reflector.get<T | undefined>(key, method);
      if (!metadata) continue;
      instances ??= [
        instance,
        ...(wrapper.isTransient
          ? wrapper
              .getStaticTransientInstances()
              .flatMap((each) => (each?.instance ? [each.instance as object] : []))
          : []),
      ];
      marked.push({ instance: instance as Record<string, unknown>, name, metadata, instances });
    }
    if (marked.length === 0) continue;
    if (!wrapper.isDependencyTreeStatic()) {
      onScoped?.(wrapper, marked);
      continue;
    }
    found.push(...marked);
  }
  return found;
}
