/**
 * What the specs of task tools on request-scoped providers share (test/tools/scoped-tools and
 * test/bullmq/scoped-jobs): the app's ContextIdStrategy for durable per-tenant providers, a
 * session of the official client carrying an owner's headers, and a call that runs as a task.
 */
import {
  type ContextId,
  ContextIdFactory,
  type ContextIdStrategy,
  type HostComponentInfo,
} from '@nestjs/core';
import { openTasksSession } from '../../src/client/session.js';
import type { TaskRequest } from '../../src/index.js';
import { testContextFetch, textOf } from './official-client.js';

/** One durable sub-tree per tenant: its REQUEST is the payload, the tenant alone. */
export class TenantStrategy implements ContextIdStrategy<TaskRequest> {
  private readonly tenants = new Map<string, ContextId>();

  attach(contextId: ContextId, request: TaskRequest) {
    const tenant = request.tenant ?? 'none';
    let subTree = this.tenants.get(tenant);
    if (subTree === undefined) this.tenants.set(tenant, (subTree = ContextIdFactory.create()));
    const durable = subTree;
    return {
      resolve: (info: HostComponentInfo) => (info.isTreeDurable ? durable : contextId),
      payload: { tenant },
    };
  }
}

/**
 * A session of `principal` in `tenant` at `url`, with the headers a call's REQUEST is checked
 * against: credentials (Authorization, Cookie, which it must not get), the tenant and a
 * correlation id, and `extra`.
 */
export function scopedSession(
  url: string,
  client: string,
  principal: string,
  tenant: string,
  extra: Record<string, string> = {},
) {
  return openTasksSession(url, {
    fetch: testContextFetch,
    clientInfo: { name: client, version: '0.1.0' },
    headers: {
      Authorization: `Bearer ${principal}`,
      Cookie: 'session=secret',
      'X-Tenant': tenant,
      'X-Correlation-Id': `corr-${principal}`,
      ...extra,
    },
  });
}

export type ScopedSession = Awaited<ReturnType<typeof scopedSession>>['session'];

/** Calls a tool as a task: when its CreateTaskResult arrived, when its end was seen, its text. */
export async function callTask(
  session: ScopedSession,
  tool: string,
  args: Record<string, number>,
): Promise<{ answeredAt: number; endedAt: number; taskId: string; text: string }> {
  const execution = await session.callTool(tool, args);
  const answeredAt = Date.now();
  if (execution.kind !== 'task') throw new Error(`${tool} answered ${JSON.stringify(execution)}`);
  const taskId = execution.handle.taskId;
  const { outcome } = await execution.settle();
  const endedAt = Date.now();
  if (outcome.status !== 'completed') throw new Error(`${tool} ended ${outcome.status}`);
  return { answeredAt, endedAt, taskId, text: textOf(outcome.result) };
}
