import type { TaskOwner } from './task.js';

/** Reads a principal (or tenant) from the framework request (Express or Fastify). */
export type PrincipalResolver = (request: unknown) => string | null | undefined;

/**
 * The default principal: the app's own auth, passport style. A guard sets `request.user`; its
 * `sub` or `id` is the principal. Without one the caller is anonymous (`null`): an anonymous
 * task's id is then its only protection.
 */
export function defaultPrincipal(request: unknown): string | null {
  const user = (request as { user?: unknown } | null)?.user;
  if (user === null || typeof user !== 'object') return null;
  const { sub, id } = user as { sub?: unknown; id?: unknown };
  for (const candidate of [sub, id]) {
    if (typeof candidate === 'string' && candidate.length > 0) return candidate;
    if (typeof candidate === 'number' && Number.isFinite(candidate)) return String(candidate);
  }
  return null;
}

/** The owner of a request's tasks. */
export function ownerOf(
  request: unknown,
  principal: PrincipalResolver,
  tenant: PrincipalResolver | undefined,
): Required<TaskOwner> {
  return { principal: principal(request) ?? null, tenant: tenant?.(request) ?? null };
}
