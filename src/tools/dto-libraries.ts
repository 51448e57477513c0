/**
 * class-validator and class-transformer, loaded when a tool first takes a DTO class: an app whose
 * tools take Standard Schemas (zod and the like) or nothing never loads them, and boots faster.
 * Both are optional peers.
 */
import { TasksConfigError } from '../errors.js';

export interface DtoLibraries {
  validator: typeof import('class-validator');
  transformer: typeof import('class-transformer');
}

let loaded: DtoLibraries | undefined;

/** Whether a tool's `input` may be a DTO class, so the libraries are needed to read it. */
export function mayBeDtoClass(input: unknown): boolean {
  return typeof input === 'function';
}

/** Loads both libraries once; a missing one fails with what to install. */
export async function loadDtoLibraries(): Promise<DtoLibraries> {
  if (loaded) return loaded;
  try {
    const [validator, transformer] = await Promise.all([
      import('class-validator'),
      import('class-transformer'),
    ]);
    loaded = { validator, transformer };
    return loaded;
  } catch (error) {
    throw new TasksConfigError(
      'A task tool takes a DTO class as its input: install class-validator and class-transformer ' +
        `(npm install class-validator class-transformer). ${(error as Error).message}`,
    );
  }
}

/** The libraries, once loaded (every path that meets a DTO class loads them first). */
export function dtoLibraries(): DtoLibraries {
  if (!loaded) throw new Error('class-validator was not loaded before a DTO class was read');
  return loaded;
}

/** The libraries when loaded, else undefined (nothing has met a DTO class yet). */
export function dtoLibrariesIfLoaded(): DtoLibraries | undefined {
  return loaded;
}
