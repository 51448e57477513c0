import type { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';

/** A provider or controller method that carries a metadata key, with the value it carries. */
export interface MarkedMethod<T> {
  /** The instance the method runs on. */
  readonly instance: Record<string, unknown>;
  readonly name: string;
  readonly metadata: T;
}

/**
 * The methods of the app's providers and controllers marked with `key` (a `SetMetadata`
 * decorator), found once. Wrappers without an instance or with a null prototype are skipped; so
 * are request-scoped ones (a task tool or a change listener runs outside any request's
 * lifetime), whose marked method names go to `onScoped` when given.
 */
export function markedMethods<T>(
  key: string,
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  reflector: Reflector,
  onScoped?: (wrapperName: string, methods: string[]) => void,
): MarkedMethod<T>[] {
  const found: MarkedMethod<T>[] = [];
  for (const wrapper of [...discovery.getProviders(), ...discovery.getControllers()]) {
    const { instance } = wrapper;
    if (!instance || typeof instance !== 'object') continue;
    const prototype = Object.getPrototypeOf(instance) as object | null;
    if (!prototype) continue;
    const marked: MarkedMethod<T>[] = [];
    for (const name of scanner.getAllMethodNames(prototype)) {
      const method = (instance as Record<string, unknown>)[name] as () => unknown;
      const metadata = reflector.get<T | undefined>(key, method);
      if (metadata) marked.push({ instance: instance as Record<string, unknown>, name, metadata });
    }
    if (marked.length === 0) continue;
    if (!wrapper.isDependencyTreeStatic()) {
      onScoped?.(
        String(wrapper.name),
        marked.map((method) => method.name),
      );
      continue;
    }
    found.push(...marked);
  }
  return found;
}
