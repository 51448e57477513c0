import { Injectable, Module, type Type } from '@nestjs/common';
import * as z from 'zod/v4';
import { type TaskContext, TaskTool, TasksModule, TasksService } from '../../src/index.js';
import { TaskNotifier, TaskStore } from '../../src/entries/store.js';
import { RedisTaskNotifier, RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { eventually, openListen, rpc, type SseReader } from '../support/sse.js';
import type { JsonRpcMessage } from '../support/wire.js';
import { startTestRedisCluster, type TestRedisCluster } from '../support/redis-cluster-server.js';

/**
 * Two Nest apps on one Redis Cluster of three masters, through RedisTaskStore and the Redis
 * notifier made from `connection: { cluster }`: a task run on A is read on B, and a listen stream
 * on B hears its completion; closing the apps closes every Cluster connection they made.
 */

/** Gates the test opens: a `wait_for_signal` call returns once its gate is released. */
const gates = new Map<string, () => void>();
const released = new Set<string>();

@Injectable()
class ClusterTools {
  @TaskTool({ name: 'wait_for_signal', input: z.object({ gate: z.string() }), pollIntervalMs: 100 })
  async waitForSignal(input: { gate: string }, task: TaskContext) {
    await task.progress('waiting for the signal');
    if (!released.has(input.gate)) {
      await new Promise<void>((resolve) => gates.set(input.gate, resolve));
    }
    return { content: [{ type: 'text', text: `released ${input.gate}` }] };
  }
}

function release(gate: string): void {
  released.add(gate);
  gates.get(gate)?.();
}

/** `Authorization: Bearer <name>` makes `<name>` the principal. */
const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

const PREFIX = `e2e-cluster-${process.pid}:`;

function clusterModule(cluster: TestRedisCluster): Type<unknown> {
  const connection = { connection: { cluster: cluster.nodes }, prefix: PREFIX };
  @Module({
    imports: [
      TasksModule.forRoot({
        principal,
        janitor: false,
        store: new RedisTaskStore(connection),
        notifier: redisNotifier(connection),
      }),
    ],
    providers: [ClusterTools],
  })
  class ClusterTestModule {}
  return ClusterTestModule;
}

describe('two apps sharing one Redis Cluster', () => {
  let cluster: TestRedisCluster;
  let a: RunningApp;
  let b: RunningApp;
  const streams: SseReader[] = [];

  beforeAll(async () => {
    cluster = await startTestRedisCluster();
    a = await startApp(clusterModule(cluster), 'express');
    b = await startApp(clusterModule(cluster), 'express');
    await Promise.all([a, b].map((app) => app.app.get<RedisTaskNotifier>(TaskNotifier).ready));
  }, 60_000);

  afterAll(async () => {
    for (const stream of streams) await stream.close();
    for (const gate of gates.keys()) release(gate);
    await a?.close();
    await b?.close();
    await cluster?.stop();
  });

  const callTool = async (url: string, who: string, gate: string): Promise<string> => {
    const { body } = await rpc(
      url,
      'tools/call',
      { name: 'wait_for_signal', arguments: { gate } },
      { principal: who },
    );
    if (body.result?.resultType !== 'task') throw new Error(`tools/call: ${JSON.stringify(body)}`);
    return body.result.taskId as string;
  };

  const getTask = async (url: string, who: string, taskId: string) => {
    const { body } = await rpc(url, 'tasks/get', { taskId }, { principal: who });
    return body;
  };

  it('a task run on A is read on B, and a listen stream on B hears it complete', async () => {
    const taskId = await callTool(a.url, 'alice', 'g1');
    await eventually(
      async () => {
        const { result } = await getTask(b.url, 'alice', taskId);
        return result?.statusMessage === 'waiting for the signal' ? true : undefined;
      },
      5_000,
      'the progress written on A, read on B',
    );
    // Another principal gets "Task not found" on B.
    expect((await getTask(b.url, 'bob', taskId)).error).toEqual({
      code: -32602,
      message: 'Task not found',
    });

    const response = await openListen(b.url, { principal: 'alice', taskIds: [taskId] });
    if (response.stream === undefined) throw new Error(`listen: HTTP ${response.status}`);
    streams.push(response.stream);
    const ack = await response.stream.next();
    expect(ack.params!.notifications).toEqual({ taskIds: [taskId] });

    release('g1');
    let completed: JsonRpcMessage | undefined;
    while (completed === undefined) {
      const message = await response.stream.next(5_000);
      expect(message.params!.taskId).toBe(taskId);
      if (message.params!.status === 'completed') completed = message;
    }
    expect(completed.params).toMatchObject({
      result: { content: [{ type: 'text', text: 'released g1' }] },
    });
    expect((await getTask(b.url, 'alice', taskId)).result).toMatchObject({ status: 'completed' });
  });

  it('B lists, page by page, the tasks A created, read across the slots', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await callTool(a.url, 'carol', `list-${i}`));
    for (let i = 0; i < 12; i++) release(`list-${i}`);
    // B's listing (as the task console reads it), five a page.
    const service = b.app.get(TasksService);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await service.list(
        { principal: 'carol' },
        { limit: 5, ...(cursor !== undefined && { cursor }) },
      );
      seen.push(...page.tasks.map((task) => task.taskId));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    // Each once (tasks made in one millisecond are ordered by id, so not by creation here).
    expect(seen).toHaveLength(ids.length);
    expect([...seen].sort()).toEqual([...ids].sort());
  });

  it('closing the apps closes every Cluster connection their store and notifier made', async () => {
    const app = await startApp(clusterModule(cluster), 'express');
    const store = app.app.get<RedisTaskStore>(TaskStore);
    const notifier = app.app.get<RedisTaskNotifier>(TaskNotifier);
    await notifier.ready;
    await app.close();
    const { publisher, subscriber } = notifier as unknown as Record<string, { status: string }>;
    expect([store.client.status, publisher!.status, subscriber!.status]).toEqual([
      'end',
      'end',
      'end',
    ]);
  });
});
