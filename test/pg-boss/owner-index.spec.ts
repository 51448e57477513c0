import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import PgBoss from 'pg-boss';
import pg from 'pg';
import { TaskTool, TasksModule } from '../../src/index.js';
import { TasksQueueModule, type TasksQueueModuleOptions } from '../../src/pg-boss/index.js';
import {
  FAIR_RANKS,
  fairOwnerKey,
  OWNER_INDEX,
  ownerCountSql,
} from '../../src/pg-boss/pg-boss-task-queue.js';
import { KeptLog } from '../support/kept-log.js';
import { startTestPostgres, type TestPostgres } from '../support/postgres-server.js';

/**
 * The index this package adds to pg-boss's job table for fair queues (OWNER_INDEX): made at boot
 * on a fair queue only, made again after something dropped it, made by one of two instances
 * booting at once without failing the other, left out (with one WARN) where the boot may not make
 * it, and used by the plan of a fair add's count once the queue has a backlog.
 */

@Injectable()
class ReportTools {
  @TaskTool({ name: 'report', queue: 'reports' })
  report() {
    return { content: [] };
  }
}

const QUEUE = 'reports';
const apps: INestApplicationContext[] = [];
let postgres: TestPostgres;
let admin: pg.Client;
let schemas = 0;
const newSchema = () => `boss_index_${++schemas}`;

async function boot(
  queue: Omit<TasksQueueModuleOptions, 'connection'> & { connectionString?: string },
  schema: string,
  log = new KeptLog(),
): Promise<INestApplicationContext> {
  const { connectionString = postgres.url, ...options } = queue;
  const moduleRef = await Test.createTestingModule({
    imports: [
      TasksModule.forRoot({ janitor: false, shutdown: { drainMs: 0 } }),
      // No slots: what is tested is the boot's DDL, not the runs.
      TasksQueueModule.forRoot({ connection: { connectionString, schema }, ...options }),
    ],
    providers: [ReportTools],
  }).compile();
  moduleRef.useLogger(log);
  const app = await moduleRef.init();
  apps.push(app);
  return app;
}

/** The names of OWNER_INDEX in `schema` and of its indexes on the queues' partitions. */
async function ownerIndexes(schema: string): Promise<{ parent: boolean; partitions: string[] }> {
  const { rows: parent } = await admin.query(
    `SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind = 'I'`,
    [schema, OWNER_INDEX],
  );
  const { rows } = await admin.query<{ name: string }>(
    `SELECT i.inhrelid::regclass::text AS name FROM pg_inherits i
      WHERE i.inhparent = to_regclass(format('%I.%I', $1::text, $2::text))`,
    [schema, OWNER_INDEX],
  );
  return { parent: parent.length > 0, partitions: rows.map((row) => row.name) };
}

beforeAll(async () => {
  postgres = await startTestPostgres();
  admin = new pg.Client({ connectionString: postgres.url });
  await admin.connect();
});

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
});

afterAll(async () => {
  await admin?.end();
  await postgres?.stop();
});

describe('the owner index of fair pg-boss queues', () => {
  it('is made at boot on a fair queue, not on an unfair one, and again after a drop', async () => {
    const unfair = newSchema();
    await boot({ worker: false, fair: false }, unfair);
    expect(await ownerIndexes(unfair)).toEqual({ parent: false, partitions: [] });

    const fair = newSchema();
    const log = new KeptLog();
    await boot({ worker: false }, fair, log);
    const made = await ownerIndexes(fair);
    expect(made.parent).toBe(true);
    // The queue's partition has its own, built from the parent's definition.
    expect(made.partitions).toHaveLength(1);
    expect(log.warnings).toEqual([]);

    // A pg-boss migration that rebuilt the table without it: the next boot makes it again.
    while (apps.length > 0) await apps.pop()!.close();
    await admin.query(`DROP INDEX "${fair}".${OWNER_INDEX}`);
    expect((await ownerIndexes(fair)).parent).toBe(false);
    await boot({ worker: false }, fair);
    expect((await ownerIndexes(fair)).parent).toBe(true);
  });

  it('two instances booting at once both start; one index is made, no WARN', async () => {
    // pg-boss's schema and the queue exist; a transaction holds the job table against the index's
    // build, so that both instances find it missing and wait to make it: they make it at once.
    const schema = newSchema();
    const boss = new PgBoss({ connectionString: postgres.url, schema, schedule: false });
    await boss.start();
    await boss.createQueue(QUEUE);
    await boss.stop({ graceful: false, wait: true });
    const holder = new pg.Client({ connectionString: postgres.url });
    await holder.connect();
    const logs = [new KeptLog(), new KeptLog()];
    try {
      await holder.query('BEGIN');
      await holder.query(`LOCK TABLE "${schema}".job IN ROW EXCLUSIVE MODE`);
      const booting = logs.map((log) => boot({ worker: false }, schema, log));
      // Both CREATE INDEX statements wait for the table (a ShareLock each, not granted).
      const deadline = Date.now() + 10_000;
      for (;;) {
        const { rows } = await admin.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks
            WHERE relation = to_regclass(format('%I.job', $1::text)) AND mode = 'ShareLock'
              AND NOT granted`,
          [schema],
        );
        if (rows[0]!.n >= 2) break;
        if (Date.now() > deadline) throw new Error('the two boots never waited for the table');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await holder.query('COMMIT');
      await Promise.all(booting);
    } finally {
      await holder.end();
    }
    expect(await ownerIndexes(schema)).toEqual({ parent: true, partitions: [expect.any(String)] });
    expect(logs.map((log) => log.warnings)).toEqual([[], []]);
  });

  it('a boot that may not make it starts, with one WARN that gives the statement', async () => {
    const schema = newSchema();
    const boss = new PgBoss({ connectionString: postgres.url, schema, schedule: false });
    await boss.start();
    await boss.createQueue(QUEUE);
    await boss.stop({ graceful: false, wait: true });
    // A role that may use pg-boss's tables but owns none (an index needs the table's owner).
    const role = `nmt_${schema}`;
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'secret'`);
    await admin.query(`GRANT USAGE ON SCHEMA "${schema}" TO ${role}`);
    await admin.query(`GRANT ALL ON ALL TABLES IN SCHEMA "${schema}" TO ${role}`);
    await admin.query(`GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "${schema}" TO ${role}`);
    const url = new URL(postgres.url);
    url.username = role;
    url.password = 'secret';
    const log = new KeptLog();
    await boot({ worker: false, connectionString: url.toString() }, schema, log);
    expect((await ownerIndexes(schema)).parent).toBe(false);
    expect(log.warnings).toHaveLength(1);
    expect(log.warnings[0]).toContain(`could not make the index ${OWNER_INDEX}`);
    expect(log.warnings[0]).toContain(`CREATE INDEX IF NOT EXISTS ${OWNER_INDEX}`);
    expect(log.errors).toEqual([]);
  });

  it("serves a fair add's count: the plan with a backlog reads the queue partition's index", async () => {
    const schema = newSchema();
    await boot({ worker: false }, schema);
    // A backlog of 5,000 waiting jobs over 100 owners, as fair adds leave them (and 5,000
    // completed ones the index leaves out), written in one statement.
    const owners = Array.from({ length: 100 }, (_, i) => fairOwnerKey({ principal: `p${i}` }));
    await admin.query(
      `INSERT INTO "${schema}".job (name, data, state)
       SELECT $1, jsonb_build_object('taskId', g::text, 'tool', 'report', 'ownerKey', ($2::text[])[1 + g % 100]),
              CASE WHEN g <= 5000 THEN 'created' ELSE 'completed' END::"${schema}".job_state
         FROM generate_series(1, 10000) AS g`,
      [QUEUE, owners],
    );
    await admin.query(`ANALYZE "${schema}".job`);
    const { partitions } = await ownerIndexes(schema);
    const { rows } = await admin.query<{ 'QUERY PLAN': unknown }>(
      `EXPLAIN (FORMAT JSON) ${ownerCountSql(schema)}`,
      [QUEUE, owners[7]],
    );
    const plan = JSON.stringify(rows[0]!['QUERY PLAN']);
    const used = [...plan.matchAll(/"Index Name":"([^"]+)"/g)].map((match) => match[1]);
    expect(used).toEqual([partitions[0]!.replace(/^.*\./, '')]);
    expect(plan).not.toContain('Seq Scan');
    // The count it gives is the owner's waiting jobs: 50 of its 100 rows.
    const { rows: counted } = await admin.query<{ n: number }>(ownerCountSql(schema), [
      QUEUE,
      owners[7],
    ]);
    expect(counted[0]!.n).toBe(50);

    // One owner's flood: the count stops at FAIR_RANKS (ranks past the last share it), so the
    // flooder's next add reads no more than that.
    await admin.query(
      `INSERT INTO "${schema}".job (name, data)
       SELECT $1, jsonb_build_object('taskId', 'flood-' || g, 'tool', 'report', 'ownerKey', $2::text)
         FROM generate_series(1, $3::int) AS g`,
      [QUEUE, owners[7], FAIR_RANKS + 500],
    );
    const { rows: flood } = await admin.query<{ n: number }>(ownerCountSql(schema), [
      QUEUE,
      owners[7],
    ]);
    expect(flood[0]!.n).toBe(FAIR_RANKS);
  });
});
