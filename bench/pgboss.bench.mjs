// Fair pg-boss add benchmark for nestjs-mcp-tasks (issue 38): what one add to a fair pg-boss queue
// costs as the queue's backlog grows, with the owner index the module makes at boot
// (`nmt_job_owner` on pg-boss's job table) and without it, measured in the same run.
//
//   npm run bench:pgboss   (builds dist/, then runs this file)
//
// It starts its own PostgreSQL (initdb into a temporary directory, a free loopback port,
// `synchronous_commit=off`) and stops it at the end; with POSTGRES_URL set it uses that server
// instead, under a pg-boss schema of its own (`bench_pgboss_<pid>`) that it drops at the end.
//
// The app: a Nest application context (no HTTP) importing `TasksModule.forRoot({ path: false,
// janitor: false })` and, from `nestjs-mcp-tasks/pg-boss`, `TasksQueueModule.forRoot({
// connection: { connectionString, schema }, worker: false })`: an API-only instance, so no slot
// takes the jobs and the backlog stays what the bench makes it. An add is
// `PgBossTaskQueue.enqueue({ name: 'bench-fair' }, { tool, taskId, input }, owner)`, the call a
// queue-run tool's `tools/call` makes once its task is stored: on a fair queue (the default) it
// counts the owner's waiting jobs, then sends the job with the priority of the owner's rank (and
// announces it with pg_notify, not awaited). The first add makes the queue and the index; the
// bench reads the index's definition back (`pg_get_indexdef`) and, for the turns without it, drops
// it and makes it again from that definition.
//
// For each backlog (BENCH_PGBOSS_BACKLOGS, 0, 10,000 and 100,000 waiting jobs over 100 owners,
// written by one INSERT … SELECT with the data our jobs carry, then VACUUM ANALYZE): a warm-up
// turn of each side, then BENCH_PGBOSS_PAIRS pairs of turns, who goes first alternating; a turn is
// BENCH_PGBOSS_ADDS adds one at a time, the owners in turn (each add's owner then has backlog ÷ 100
// jobs waiting), timed each; after a turn its jobs are deleted and the table vacuumed, so every
// turn sees the same backlog. Per side the median of the turns' p50 and p95; the figure is the
// median of the per-pair ratios of p50, index ÷ none. The build time of the index over each
// backlog (what the first boot with this version pays, once) is a context line.
//
// Targets: at 10,000 waiting, index ÷ none ≤ 0.8; at 100,000, ≤ 0.5; with the index, the add at
// 100,000 waiting ÷ at 0 ≤ 1.5 (the add no longer grows with the queue's backlog, only with the
// owner's own, which the count stops reading at 1,024); at 0 waiting, index ÷ none ≤ 1.15 (what
// keeping the index costs an add on an empty queue).
//
// It is a report, not a test: it exits 0 whether a target is met or missed, and non-zero only when
// it cannot run (dist/ missing, no PostgreSQL, a broken invariant, the hard deadline, 300 s).
//
// Environment knobs (all optional): POSTGRES_URL, BENCH_PGBOSS_ADDS (200), BENCH_PGBOSS_PAIRS (5),
// BENCH_PGBOSS_BACKLOGS (0,10000,100000).

import pg from 'pg';
import {
  armHardDeadline,
  assert,
  fmt,
  fmtInt,
  loadBuiltPackage,
  machineLine,
  median,
  msSince,
  nowNs,
  positiveEnv,
  printTargetTable,
  startBenchPostgres,
  verdict,
} from './common.mjs';

const ADDS = positiveEnv('BENCH_PGBOSS_ADDS', 200);
const PAIRS = positiveEnv('BENCH_PGBOSS_PAIRS', 5);
const BACKLOGS = (process.env.BENCH_PGBOSS_BACKLOGS || '0,10000,100000')
  .split(',')
  .map((value) => Number(value));
assert(
  BACKLOGS.every((value) => Number.isSafeInteger(value) && value >= 0),
  'BENCH_PGBOSS_BACKLOGS is a list of integers >= 0',
);
const OWNERS = 100;
const QUEUE = 'bench-fair';
const INDEX = 'nmt_job_owner';
const SCHEMA = `bench_pgboss_${process.pid}`;
const HARD_DEADLINE_MS = 300_000;
const TARGETS = { 10_000: 0.8, 100_000: 0.5 };
const GROWTH_TARGET = 1.5;
const EMPTY_TARGET = 1.15;

const halts = [];
armHardDeadline(
  HARD_DEADLINE_MS,
  `The benchmark did not finish within ${HARD_DEADLINE_MS / 1000} s; stopping.`,
  () => halts.forEach((halt) => halt()),
);

const percentile = (sorted, p) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
const ms = (value) => fmt(value, 2);

async function main() {
  const totalStart = nowNs();
  const lib = await loadBuiltPackage();
  const { TasksQueueModule, PgBossTaskQueue } = await import('nestjs-mcp-tasks/pg-boss').catch(
    (error) => {
      console.error('Cannot import nestjs-mcp-tasks/pg-boss; run `npm run build` first.');
      console.error(error);
      process.exit(1);
    },
  );
  const postgres = await startBenchPostgres(
    'pgboss',
    { synchronous_commit: 'off', shared_buffers: '128MB' },
    (halt) => halts.push(halt),
  );
  const admin = new pg.Client({ connectionString: postgres.url });
  await admin.connect();
  const { NestFactory } = await import('@nestjs/core');
  const { Module } = await import('@nestjs/common');
  class BenchModule {}
  Reflect.decorate(
    [
      Module({
        imports: [
          lib.TasksModule.forRoot({ path: false, janitor: false }),
          TasksQueueModule.forRoot({
            connection: { connectionString: postgres.url, schema: SCHEMA },
            worker: false,
          }),
        ],
      }),
    ],
    BenchModule,
  );
  const app = await NestFactory.createApplicationContext(BenchModule, {
    logger: false,
    abortOnError: false,
  });
  const rows = [];
  try {
    const queue = app.get(PgBossTaskQueue);
    const version = (await admin.query('SHOW server_version')).rows[0].server_version;
    console.log('nestjs-mcp-tasks fair pg-boss add benchmark');
    console.log(machineLine());
    console.log(
      `PostgreSQL ${version} (${postgres.own ? 'private, synchronous_commit off' : 'POSTGRES_URL'}), ` +
        `pg-boss schema ${SCHEMA}; ${ADDS} adds per turn, one at a time, ${OWNERS} owners in turn; ` +
        `${PAIRS} pairs of turns per backlog`,
    );

    const owners = Array.from({ length: OWNERS }, (_, i) => ({
      principal: `owner-${String(i).padStart(3, '0')}`,
      tenant: null,
    }));
    let added = 0;
    const add = (i) =>
      queue.enqueue(
        { name: QUEUE },
        { tool: 'report', taskId: `add-${++added}`, input: { month: '2026-01' } },
        owners[i % OWNERS],
      );
    // The first add makes the queue and the index, as a boot would.
    await add(0);
    const table = `"${SCHEMA}".job`;
    const found = await admin.query('SELECT pg_get_indexdef(to_regclass($1)) AS def', [
      `"${SCHEMA}".${INDEX}`,
    ]);
    // PostgreSQL gives a partitioned index's definition as `ON ONLY` the parent (which would make
    // it without the partitions' indexes): made again, it is made on the parent and its partitions.
    const definition = found.rows[0]?.def?.replace(' ON ONLY ', ' ON ');
    assert(typeof definition === 'string', `the module made ${INDEX} on ${table}`);
    console.log(`    the index: ${definition}`);
    // The owners' keys, as the module wrote them in its jobs' data.
    const keys = [];
    for (let i = 0; i < OWNERS; i++) {
      await add(i);
    }
    for (const { key } of (
      await admin.query(
        `SELECT DISTINCT data->>'ownerKey' AS key FROM ${table} WHERE name = $1 ORDER BY 1`,
        [QUEUE],
      )
    ).rows) {
      keys.push(key);
    }
    assert(keys.length === OWNERS, `one key per owner (${keys.length})`);
    const clear = async () => {
      await admin.query(`DELETE FROM ${table} WHERE name = $1 AND data->>'taskId' LIKE 'add-%'`, [
        QUEUE,
      ]);
      await admin.query(`VACUUM ${table}`);
    };
    await clear();

    let indexed = true;
    const setIndex = async (on) => {
      if (on === indexed) return 0;
      const start = nowNs();
      await admin.query(on ? definition : `DROP INDEX "${SCHEMA}".${INDEX}`);
      indexed = on;
      return msSince(start);
    };
    const turn = async (on) => {
      await setIndex(on);
      const times = [];
      for (let i = 0; i < ADDS; i++) {
        const start = nowNs();
        await add(i);
        times.push(msSince(start));
      }
      await clear();
      times.sort((a, b) => a - b);
      return { p50: percentile(times, 0.5), p95: percentile(times, 0.95) };
    };

    const results = new Map();
    for (const backlog of BACKLOGS) {
      await setIndex(false);
      await admin.query(
        `INSERT INTO ${table} (name, data)
         SELECT $1, jsonb_build_object('tool', 'report', 'taskId', 'backlog-' || g,
                  'input', jsonb_build_object('month', '2026-01'),
                  'ownerKey', ($2::text[])[1 + g % ${OWNERS}])
           FROM generate_series(1, $3::int) AS g`,
        [QUEUE, keys, backlog],
      );
      await admin.query(`VACUUM ANALYZE ${table}`);
      const waiting = (
        await admin.query(
          `SELECT count(*)::int AS n FROM ${table} WHERE name = $1 AND state < 'completed'`,
          [QUEUE],
        )
      ).rows[0].n;
      assert(waiting === backlog, `${backlog} jobs waiting (${waiting})`);
      const buildMs = await setIndex(true);
      // The index serves the queue's partition (an index of it, attached to the parent's).
      const children = await admin.query(
        'SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = to_regclass($1)',
        [`"${SCHEMA}".${INDEX}`],
      );
      assert(children.rows[0].n === 1, `${INDEX} has the queue partition's index`);
      await turn(false);
      await turn(true);
      const sides = { none: [], index: [] };
      const ratios = [];
      for (let i = 0; i < PAIRS; i++) {
        const order = i % 2 === 0 ? [false, true] : [true, false];
        const pair = {};
        for (const on of order) pair[on ? 'index' : 'none'] = await turn(on);
        sides.none.push(pair.none);
        sides.index.push(pair.index);
        ratios.push(pair.index.p50 / pair.none.p50);
      }
      const summary = (side) => ({
        p50: median(side.map((t) => t.p50)),
        p95: median(side.map((t) => t.p95)),
      });
      const result = { none: summary(sides.none), index: summary(sides.index), ratios };
      results.set(backlog, result);
      console.log(
        `\n${fmtInt(backlog)} jobs waiting (${fmtInt(backlog / OWNERS)} per owner); the index built in ${ms(buildMs)} ms`,
      );
      for (const side of ['none', 'index']) {
        console.log(
          `    ${side === 'none' ? 'no index' : 'index   '}  add p50 ${ms(result[side].p50)} ms, p95 ${ms(result[side].p95)} ms` +
            `   turns' p50: ${sides[side].map((t) => ms(t.p50)).join(', ')}`,
        );
      }
      console.log(
        `    per-pair ratios of p50, index ÷ none: ${ratios.map((r) => r.toFixed(3)).join(', ')}`,
      );
      await admin.query(`DELETE FROM ${table} WHERE name = $1`, [QUEUE]);
      await admin.query(`VACUUM ${table}`);
    }

    for (const [backlog, result] of results) {
      const ratio = median(result.ratios);
      const target = backlog === 0 ? EMPTY_TARGET : TARGETS[backlog];
      const spread = `pairs ${Math.min(...result.ratios).toFixed(2)}–${Math.max(...result.ratios).toFixed(2)}`;
      rows.push([
        `fair add p50, ${fmtInt(backlog)} jobs waiting: index ÷ none`,
        `${ratio.toFixed(3)} (${ms(result.index.p50)} vs ${ms(result.none.p50)} ms, p95 ` +
          `${ms(result.index.p95)} vs ${ms(result.none.p95)} ms; ${spread})`,
        target === undefined ? 'none' : `≤ ${target}`,
        target === undefined ? '—' : verdict(ratio <= target),
      ]);
    }
    const low = results.get(Math.min(...BACKLOGS));
    const high = results.get(Math.max(...BACKLOGS));
    if (BACKLOGS.length > 1) {
      const growth = high.index.p50 / low.index.p50;
      const without = high.none.p50 / low.none.p50;
      rows.push([
        `fair add p50 with the index, ${fmtInt(Math.max(...BACKLOGS))} ÷ ${fmtInt(Math.min(...BACKLOGS))} waiting`,
        `${growth.toFixed(3)} (${ms(high.index.p50)} vs ${ms(low.index.p50)} ms; without the index ${without.toFixed(3)})`,
        `≤ ${GROWTH_TARGET}`,
        verdict(growth <= GROWTH_TARGET),
      ]);
    }
    printTargetTable(rows);
  } finally {
    await app.close();
    if (!postgres.own) await admin.query(`DROP SCHEMA IF EXISTS "${SCHEMA}" CASCADE`);
    await admin.end();
    await postgres.stop();
  }
  console.log(`(total ${(msSince(totalStart) / 1000).toFixed(1)} s; ${machineLine()})`);
  // A report, not a test: a missed target does not fail the run.
  process.exitCode = 0;
}

await main().catch((error) => {
  console.error(error);
  halts.forEach((halt) => halt());
  process.exit(1);
});
