import { Injectable, Module, type Type } from '@nestjs/common';
import pg from 'pg';
import * as z from 'zod/v4';
import { type TaskContext, TaskTool, TasksModule, TasksService } from '../../src/index.js';
import { TasksLease } from '../../src/janitor/tasks.lease.js';
import { PostgresTaskStore, postgresNotifier } from '../../src/postgres/index.js';
import { type RunningApp, startApp } from '../support/app.js';
import { eventually, rpc } from '../support/sse.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

/**
 * The lease on PostgreSQL: two Nest apps sharing one database, each an instance with a short
 * lease (600 ms). One of them "dies": its lease stops being renewed (TasksLease.stop, what a
 * killed process amounts to for the others), and the other fails the call it was running.
 */

const LEASE_MS = 600;
const SCHEMA = 'lease';

/** Releases of waiting calls, by gate name. */
const gates = new Map<string, () => void>();

@Injectable()
class LeaseTools {
  /** Works until its gate is opened (then completes) or its signal fires. */
  @TaskTool({ name: 'wait_for_gate', input: z.object({ gate: z.string() }) })
  async waitForGate(input: { gate: string }, task: TaskContext) {
    await new Promise<void>((resolve, reject) => {
      gates.set(input.gate, resolve);
      task.signal.addEventListener('abort', () => reject(task.signal.reason), { once: true });
    });
    return `released ${input.gate}`;
  }
}

function leaseModule(url: string): Type<unknown> {
  const connection = { connection: url, schema: SCHEMA };
  @Module({
    imports: [
      TasksModule.forRoot({
        principal: () => 'alice',
        janitor: false,
        lease: { ttlMs: LEASE_MS },
        store: new PostgresTaskStore(connection),
        notifier: postgresNotifier(connection),
      }),
    ],
    providers: [LeaseTools],
  })
  class LeaseTestModule {}
  return LeaseTestModule;
}

async function callTool(url: string, gate: string): Promise<string> {
  const { body } = await rpc(url, 'tools/call', {
    name: 'wait_for_gate',
    arguments: { gate },
  });
  if (body.result?.resultType !== 'task') throw new Error(`tools/call: ${JSON.stringify(body)}`);
  return body.result.taskId as string;
}

describe('the lease: instances sharing one PostgreSQL', () => {
  let postgres: TestPostgres;
  let raw: pg.Pool;
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    postgres = await startTestPostgres();
    raw = new pg.Pool({ connectionString: postgres.url });
  }, 60_000);

  afterAll(async () => {
    for (const open of gates.values()) open();
    for (const app of apps) await app.close();
    await raw?.end();
    await postgres?.stop();
  });

  const instances = async (): Promise<string[]> =>
    (
      await raw.query<{ instance_id: string }>(`SELECT instance_id FROM ${SCHEMA}.instances`)
    ).rows.map((row) => row.instance_id);
  const heldBy = async (instanceId: string): Promise<string[]> =>
    (
      await raw.query<{ task_id: string }>(
        `SELECT task_id FROM ${SCHEMA}.tasks WHERE held_by = $1`,
        [instanceId],
      )
    ).rows.map((row) => row.task_id);

  it('a live instance’s running call is never failed; once it stops renewing, another fails it and forgets it', async () => {
    const a = await startApp(leaseModule(postgres.url), 'express');
    const b = await startApp(leaseModule(postgres.url), 'express');
    apps.push(a, b);
    const [serviceA, serviceB] = [a.app.get(TasksService), b.app.get(TasksService)];
    await eventually(
      async () => ((await instances()).length === 2 ? true : undefined),
      5_000,
      'both leases',
    );
    const running = await callTool(a.url, 'running');
    const finished = await callTool(a.url, 'finished');
    await eventually(() => (gates.has('finished') ? true : undefined), 5_000, 'the call to start');
    gates.get('finished')!();
    await eventually(
      async () => ((await serviceB.status(finished)).status === 'completed' ? true : undefined),
      5_000,
      'the finished call',
    );
    // Held by A from its create; the finished call no longer.
    expect((await serviceB.status(running)).heldBy).toBe(serviceA.instanceId);
    expect(await heldBy(serviceA.instanceId)).toEqual([running]);

    // Three lease periods while A renews: B never fails A's running call.
    await new Promise((resolve) => setTimeout(resolve, 3 * LEASE_MS));
    expect((await serviceB.status(running)).status).toBe('working');

    a.app.get(TasksLease).stop();
    const failed = await eventually(
      async () => {
        const task = await serviceB.status(running);
        return task.status === 'failed' ? task : undefined;
      },
      5_000,
      'B to fail the call A was running',
    );
    expect(failed.error).toEqual({
      code: -32603,
      message: 'The server stopped before the task finished',
    });
    expect((await serviceB.status(finished)).status).toBe('completed');
    await eventually(
      async () => ((await instances()).includes(serviceA.instanceId) ? undefined : true),
      5_000,
      'A to be forgotten',
    );
    expect(await heldBy(serviceA.instanceId)).toEqual([]);
    expect(await instances()).toContain(serviceB.instanceId);
  });
});
