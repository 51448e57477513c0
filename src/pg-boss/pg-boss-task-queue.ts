import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { createHash } from 'node:crypto';
import PgBoss from 'pg-boss';
import { TasksConfigError } from '../errors.js';
import { postgresAddress } from '../postgres/postgres-connection.js';
import type { TaskOwner } from '../task.js';
import { type QueuedCall, TaskQueue } from '../tools/task-queue.js';
import type { TaskToolQueue } from '../tools/task-tool.decorator.js';
import { isFairQueue } from '../tools/queue-module-definition.js';
import { JobNotices } from './job-notices.js';
import {
  checkQueueOptions,
  TASKS_PG_BOSS_OPTIONS,
  type TasksQueueModuleOptions,
} from './tasks-queue.options.js';

/** What a job carries: the call, and the answers its runs took (for a later run). */
export interface PgBossJobData extends QueuedCall {
  answers?: Readonly<Record<string, unknown>>;
  /**
   * On a fair queue: the key of the task's owner (a hash of principal and tenant), by which the
   * owner's jobs that wait or run are counted.
   */
  ownerKey?: string;
  /**
   * Set when a run parked the job (a long `task.sleep`, a wait for input): the job's retry count
   * as that run had it. The park gives the count back (a park spends no retry), so the next
   * fetch, which counts the start again, finds the same count there: that run is `woken`. Any
   * other start after it (pg-boss ran the job again after a crash or a throw) has a higher count,
   * and is a restart.
   */
  parkedAt?: number;
}

/**
 * The pg-boss job id of a task's job: a UUID made from the task id (the first 16 bytes of its
 * SHA-256, with the version and variant bits of a version 8 UUID), so that `wake` finds the job
 * from the task id alone, by the job table's primary key (pg-boss 10's `job.id` is a uuid).
 */
export function taskJobId(taskId: string): string {
  const bytes = createHash('sha256').update(taskId).digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return (
    `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-` +
    `${hex.slice(16, 20)}-${hex.slice(20)}`
  );
}

/**
 * The retention pg-boss gives a job, as a PostgreSQL interval, from its `retentionDays`,
 * `retentionHours`, `retentionMinutes` or `retentionSeconds` (the first given, in that order, as
 * pg-boss reads them: a tool's job options, or the constructor's defaults); null for none.
 */
export function retentionInterval(options: unknown): string | null {
  if (typeof options !== 'object' || options === null) return null;
  const given = options as Record<string, unknown>;
  for (const unit of ['Days', 'Hours', 'Minutes', 'Seconds'] as const) {
    const value = given[`retention${unit}`];
    if (typeof value === 'number') return `${value} ${unit.toLowerCase()}`;
  }
  return null;
}

/**
 * How many owner ranks one priority level holds on a fair queue: a job's pg-boss priority is
 * `level × FAIR_RANKS + (FAIR_RANKS − rank)` (pg-boss runs higher priorities first), its level the
 * tool's `priority` option (0 without one), its rank 1 + how many of its owner's jobs wait or run
 * on the queue. Ranks past `FAIR_RANKS − 1` share the last one.
 */
export const FAIR_RANKS = 1_024;

/** The largest `priority` level (either sign) a tool on a fair queue may set. */
export const FAIR_MAX_LEVEL = 2_047;

/** The key of an owner's turns: a hash of its principal and tenant, naming no one. */
export function fairOwnerKey(owner: TaskOwner): string {
  return createHash('sha256')
    .update(JSON.stringify([owner.principal ?? null, owner.tenant ?? null]))
    .digest('base64url')
    .slice(0, 22);
}

/** The pg-boss priority of a job on a fair queue: its level's band, its rank within it. */
export function fairPriority(level: number, rank: number): number {
  return level * FAIR_RANKS + FAIR_RANKS - Math.min(Math.max(rank, 1), FAIR_RANKS - 1);
}

/** How many times making a queue is tried when PostgreSQL aborted it (a deadlock, a race). */
const MAKE_ATTEMPTS = 3;

/**
 * The one index this package adds to pg-boss's job table (in pg-boss's schema), made at boot when
 * a queue is fair: it serves the count of an owner's unfinished jobs that each fair add runs (see
 * `enqueue`), which without it reads every unfinished row of the queue. A later definition would
 * take a new name, so that the boot makes it rather than finding the old one.
 */
export const OWNER_INDEX = 'nmt_job_owner';

/**
 * The statement that makes OWNER_INDEX on the job table of pg-boss's `schema`. Made on the
 * partitioned parent, so every queue's partition has it, a queue made later too (pg-boss attaches
 * its partition, and PostgreSQL builds the partition's index then, on an empty table). Only the
 * jobs of fair queues are in it (their data has an `ownerKey`), and only while they wait or run.
 */
export function ownerIndexSql(schema: string): string {
  return (
    `CREATE INDEX IF NOT EXISTS ${OWNER_INDEX} ON "${schema}".job (name, (data->>'ownerKey')) ` +
    `WHERE state < 'completed' AND (data->>'ownerKey') IS NOT NULL`
  );
}

/**
 * The count of an owner's jobs that wait or run on a queue (parameters: the queue's name, the
 * owner's key), which a fair add runs for the owner's rank. OWNER_INDEX serves it: its predicate is
 * implied by this one (`state < 'completed'`, and an `=` on the key, which is then not null). It
 * stops at FAIR_RANKS: ranks past the last share it, so an owner with a backlog of 50,000 costs
 * its next add no more than one with 1,024.
 */
export function ownerCountSql(schema: string): string {
  return (
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM "${schema}".job WHERE name = $1 ` +
    `AND state < 'completed' AND data->>'ownerKey' = $2 LIMIT ${FAIR_RANKS}) AS owned`
  );
}

/**
 * The PostgreSQL error codes of a race on a boot's DDL: 40P01 deadlock_detected, 23505
 * unique_violation and 42P07 duplicate_table (another instance made the same thing just now).
 */
const RACE_CODES: ReadonlySet<unknown> = new Set(['40P01', '23505', '42P07']);

/** How often the errors pg-boss reports are logged, after the first. */
export const QUEUE_ERROR_LOG_MS = 60_000;

/**
 * The TaskQueue on pg-boss: one PgBoss for the app (made from `connection`, or the app's own), its
 * queues made at startup with their `queues` options. A job is the call (`PgBossJobData`), sent to
 * the tool's queue with the tool's `jobOptions` (pg-boss's send options: `retryLimit`,
 * `expireInSeconds`, `priority`, `startAfter`...) over the queue's own.
 */
@Injectable()
export class PgBossTaskQueue extends TaskQueue implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('TaskQueueWorkers');
  /** The PgBoss of the queues. */
  readonly boss: PgBoss;
  /** The PostgreSQL schema of pg-boss's tables. */
  readonly schema: string;
  private lastLogged = 0;
  private since = 0;
  /** The queues made (or found) so far, by name. */
  private readonly made = new Map<string, Promise<void>>();
  /** What the shutdown waits for before it stops the PgBoss (see `holdUntil`). */
  private readonly held: Promise<unknown>[] = [];
  /** The last queue being made: the next waits for it. */
  private making: Promise<void> = Promise.resolve();
  /** Whether OWNER_INDEX was looked for (and made if missing) by this process. */
  private ownerIndexChecked = false;
  /** The last add of each owner on each queue (`queue owner`): the next waits for it. */
  private readonly adding = new Map<string, Promise<unknown>>();
  /** Called when this process sends a job to a queue: an idle slot looks at once. */
  onSent: ((queue: string) => void) | undefined;
  /** The notices of jobs sent, to the workers of every process (see JobNotices). */
  readonly notices: JobNotices;

  constructor(@Inject(TASKS_PG_BOSS_OPTIONS) private readonly options: TasksQueueModuleOptions) {
    super();
    checkQueueOptions(options);
    const { connection } = options;
    this.schema = (typeof connection === 'string' ? undefined : connection.schema) ?? 'pgboss';
    // No cron here: the scheduler's clock checks and monitors would be work for nothing.
    this.boss = new PgBoss(
      typeof connection === 'string'
        ? { connectionString: connection, schedule: false }
        : { schedule: false, ...connection },
    );
    this.boss.on('error', (error) => this.error(error));
    this.notices = new JobNotices(this.boss, connection, this.schema, (error) => this.error(error));
  }

  async onModuleInit(): Promise<void> {
    // pg-boss makes (or migrates) its schema at start, in a transaction with an advisory lock:
    // several instances may boot at once.
    try {
      await this.boss.start();
    } catch (error) {
      // Its pool would keep the process alive after the failed boot.
      await this.boss.stop({ graceful: false, wait: false }).catch(() => undefined);
      const own = error instanceof Error ? error.message : String(error);
      throw new Error(
        `TasksQueueModule (pg-boss) could not start on ${this.address()} (${own}): check that ` +
          "PostgreSQL runs there and that the module's connection names the right host, port " +
          'and database',
        { cause: error },
      );
    }
  }

  /** Where the queues' PostgreSQL is, for messages (never a password). */
  private address(): string {
    const { connection } = this.options;
    const config = typeof connection === 'string' ? { connectionString: connection } : connection;
    // postgresAddress reads a pool's options: pg-boss's constructor options are the same keys.
    return postgresAddress({ options: config } as unknown as Parameters<typeof postgresAddress>[0]);
  }

  /** Holds the PgBoss open at shutdown until `work` ends (the workers' last writes). */
  holdUntil(work: Promise<unknown>): void {
    this.held.push(work.catch(() => undefined));
  }

  async onApplicationShutdown(): Promise<void> {
    // Nest may call this hook beside the workers' own: the jobs they give back at shutdown are
    // written first. `graceful: false`: they run through this module's slots, not pg-boss's
    // workers, so there is nothing of pg-boss's to wait for.
    await Promise.all(this.held);
    await this.notices.close();
    await this.boss.stop({ graceful: false, wait: true, timeout: 1_000 });
  }

  /**
   * Makes the queue (pg-boss 10 sends nothing to a queue it does not have), with its `queues`
   * options; a queue that exists takes them too. Once per queue and process, one queue at a time:
   * pg-boss makes a table partition per queue, and two made at once can deadlock (PostgreSQL then
   * aborts one: it is tried again, as one made by another instance at the same moment is).
   */
  ensureQueue(name: string): Promise<void> {
    let made = this.made.get(name);
    if (made === undefined) {
      made = this.making.then(() => this.makeQueue(name));
      this.making = made.catch(() => undefined);
      made.catch(() => this.made.delete(name));
      this.made.set(name, made);
    }
    return made;
  }

  private async makeQueue(name: string): Promise<void> {
    const options = this.options.queues?.[name];
    for (let attempt = 1; ; attempt++) {
      try {
        const existing = await this.boss.getQueue(name);
        if (existing === null) {
          await this.boss.createQueue(name, { name, ...options });
        } else if (options !== undefined) {
          await this.boss.updateQueue(name, { name, ...options });
        }
        break;
      } catch (error) {
        // Another instance made it just now, or the two deadlocked.
        const code = (error as { code?: unknown }).code;
        if (attempt >= MAKE_ATTEMPTS || !RACE_CODES.has(code)) throw error;
      }
    }
    if (this.isFair(name) && !this.ownerIndexChecked) {
      this.ownerIndexChecked = true;
      await this.ensureOwnerIndex();
    }
  }

  /**
   * Makes OWNER_INDEX unless it is there: once per process, at the first fair queue it makes (its
   * queues are made one at a time). The look is a catalog read, so a boot that finds it takes no
   * lock on pg-boss's table; a boot that makes it (the first, or the first after a pg-boss
   * migration dropped it) builds it over the unfinished jobs of fair queues, holding the table's
   * writes meanwhile. Instances that make it at the same moment race: the loser finds it made when
   * it looks again. An index that cannot be made (no CREATE right on pg-boss's schema, a race lost
   * MAKE_ATTEMPTS times) is said in one WARN and the boot goes on: fair turns still work, each add
   * counting by a scan of the queue's unfinished jobs.
   */
  private async ensureOwnerIndex(): Promise<void> {
    const db = this.boss.getDb();
    for (let attempt = 1; ; attempt++) {
      try {
        const { rows } = (await db.executeSql(
          'SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace ' +
            'WHERE n.nspname = $1 AND c.relname = $2',
          [this.schema, OWNER_INDEX],
        )) as { rows: unknown[] };
        if (rows.length > 0) return;
        await db.executeSql(ownerIndexSql(this.schema), []);
        return;
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        if (attempt < MAKE_ATTEMPTS && RACE_CODES.has(code)) continue;
        const own = error instanceof Error ? error.message : String(error);
        this.logger.warn(
          `pg-boss: could not make the index ${OWNER_INDEX} on "${this.schema}".job (${own}): ` +
            "each fair add counts its owner's jobs by a scan of the queue's unfinished jobs " +
            `until it exists. Make it once with: ${ownerIndexSql(this.schema)}`,
        );
        return;
      }
    }
  }

  /** Whether the queue of that name takes fair turns across owners. */
  isFair(name: string): boolean {
    return isFairQueue(this.options.fair, name);
  }

  /** The priority level of a tool's jobs: its `priority` job option (0 without one). */
  priorityLevel(queue: Readonly<TaskToolQueue>): number {
    return (queue.jobOptions as PgBoss.SendOptions | undefined)?.priority ?? 0;
  }

  /**
   * Checks a tool's job options at boot: a job id of its own fails it (each job's id is made from
   * its task's, see `taskJobId`: one fixed id would be refused from the second call on), and so
   * does a `priority` that leaves no room for the ranks on a fair queue.
   */
  checkJobOptions(tool: string, queue: Readonly<TaskToolQueue>): void {
    if (queue.jobOptions !== undefined && Object.hasOwn(queue.jobOptions, 'id')) {
      throw new TasksConfigError(
        `Task tool "${tool}" sets jobOptions.id on queue "${queue.name}": each job's id is made ` +
          "from its task's (so that an answer or a cancel finds a parked job), and one id of the " +
          "tool's own would be refused from its second call on; remove it",
      );
    }
    this.checkFairLevel(tool, queue);
  }

  /** A tool on a fair queue whose `priority` leaves no room for the ranks fails the boot. */
  private checkFairLevel(tool: string, queue: Readonly<TaskToolQueue>): void {
    if (!this.isFair(queue.name)) return;
    const level = this.priorityLevel(queue);
    if (Number.isInteger(level) && Math.abs(level) <= FAIR_MAX_LEVEL) return;
    throw new TasksConfigError(
      `Task tool "${tool}" runs on the fair queue "${queue.name}" with priority ${String(level)}: ` +
        `on a fair queue a priority is an integer from -${FAIR_MAX_LEVEL} to ${FAIR_MAX_LEVEL} ` +
        `(each level holds ${FAIR_RANKS} owner ranks); change it, or set fair: { '${queue.name}': ` +
        'false } in TasksQueueModule.forRoot',
    );
  }

  async enqueue(
    queue: Readonly<TaskToolQueue>,
    call: QueuedCall,
    owner: Required<TaskOwner>,
  ): Promise<void> {
    await this.ensureQueue(queue.name);
    const data: PgBossJobData = { ...call };
    const options: PgBoss.SendOptions = {
      ...(queue.jobOptions as PgBoss.SendOptions | undefined),
      id: taskJobId(call.taskId),
    };
    if (!this.isFair(queue.name)) return await this.send(queue.name, data, options);
    // The owner's rank is read from pg-boss's own rows (its jobs that wait or run): nothing of
    // this module's to keep or to heal (OWNER_INDEX, made at boot, serves the count). One owner's
    // adds in this process go one at a time, so
    // that each counts the one before; adds of one owner on two instances at the same moment
    // may share a rank.
    const ownerKey = fairOwnerKey(owner);
    data.ownerKey = ownerKey;
    const key = `${queue.name} ${ownerKey}`;
    const before = this.adding.get(key) ?? Promise.resolve();
    const add = before
      .catch(() => undefined)
      .then(async () => {
        const { rows } = (await this.boss
          .getDb()
          .executeSql(ownerCountSql(this.schema), [queue.name, ownerKey])) as {
          rows: { n: number }[];
        };
        options.priority = fairPriority(this.priorityLevel(queue), (rows[0]?.n ?? 0) + 1);
        await this.send(queue.name, data, options);
      });
    this.adding.set(key, add);
    try {
      await add;
    } finally {
      if (this.adding.get(key) === add) this.adding.delete(key);
    }
  }

  private async send(
    name: string,
    data: PgBossJobData,
    options: PgBoss.SendOptions,
  ): Promise<void> {
    const id = await this.boss.send(name, data, options);
    if (id === null) {
      // pg-boss answers null when a policy (singleton, stately, a singletonKey) keeps the job out,
      // or when the queue has a job of that id (of the same task) already.
      throw new Error(
        `pg-boss did not take the job on queue "${name}" (a singleton policy or key kept it ` +
          'out, or the task has a job there already)',
      );
    }
    this.announce(name);
  }

  /** Tells the workers a job of `queue` may be taken now: this process's, and every other's. */
  private announce(name: string): void {
    this.onSent?.(name);
    this.notices.sent(name);
  }

  /**
   * Makes the task's parked job run now (its answer came, or it was cancelled): one UPDATE of the
   * job's row, by its id (made from the task id), that waits to start later; then an idle slot of
   * every worker looks, as for a job sent. Nothing when no such row is there: the job runs, waits
   * to start now already, ended, or is gone.
   */
  override async wake(queue: Readonly<TaskToolQueue>, taskId: string): Promise<void> {
    const { rowCount } = (await this.boss
      .getDb()
      .executeSql(
        `UPDATE "${this.schema}".job SET start_after = now() WHERE name = $1 AND id = $2 ` +
          `AND state < 'active' AND start_after > now()`,
        [queue.name, taskJobId(taskId)],
      )) as { rowCount?: number | null };
    if ((rowCount ?? 0) > 0) this.announce(queue.name);
  }

  /**
   * Logs an error pg-boss reports (a lost connection, a failed maintenance): the first, then
   * once a minute with how many came meanwhile.
   */
  error(error: unknown): void {
    const now = Date.now();
    if (now - this.lastLogged < QUEUE_ERROR_LOG_MS) {
      this.since++;
      return;
    }
    const more = this.since > 0 ? ` (${this.since} more since the last one logged)` : '';
    this.lastLogged = now;
    this.since = 0;
    const message =
      error instanceof Error
        ? error.message
        : String((error as { message?: unknown })?.message ?? error);
    this.logger.error(`pg-boss: ${message}${more} (its errors are logged once a minute)`);
  }
}
