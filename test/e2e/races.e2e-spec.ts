import { Injectable, Module, type Type } from '@nestjs/common';
import { BullModule } from '@nestjs/bullmq';
import { TaskStatusNotificationParamsV2Schema } from '@modelcontextprotocol/ext-tasks/core/v2';
import {
  isTerminal,
  type TaskContext,
  type TaskRecord,
  TaskTerminalError,
  TasksModule,
  TasksService,
  TaskTool,
} from '../../src/index.js';
import type { TasksModuleExtras } from '../../src/entries/options.js';
import { TaskNotifier, TaskStore, toWire } from '../../src/entries/store.js';
import { TasksQueueModule } from '../../src/bullmq/index.js';
import { RedisTaskNotifier, RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { accept, elicit, seededRandom } from '../support/helpers.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { type RunningApp, startApp } from '../support/app.js';
import { eventually, openListen, rpc, type SseReader } from '../support/sse.js';
import type { JsonRpcMessage } from '../support/wire.js';
import { docFigure } from '../docs/figures.js';

/**
 * Races over real HTTP, on both stores: 10,000 concurrent mixed operations over 100 tasks —
 * worker side (complete, fail, progress, requireInput) through TasksService, caller side
 * (tasks/get, tasks/update, tasks/cancel) over HTTP as the owner — while a listen stream per
 * instance watches every task. With Redis, two app instances share one private Redis and the
 * operations are split across both.
 *
 * Every write the stores accept is recorded (the stores' `create` and `compareAndSet` are
 * wrapped, nothing else changes): that history is the set of states `tasks/get` could ever have
 * returned, and every observation (listen notifications, `tasks/get` answers, worker results, the
 * final state) is checked against it.
 *
 * What must hold, whatever the interleaving:
 *
 * - the writes of each task form one chain from version 1, each written over the one before it
 *   (compare-and-set let no two writers through), with exactly one terminal version, the last;
 * - both instances (tasks/get over HTTP, and TasksService.status) answer that last version;
 * - no accepted input answer is lost or replaced while the task lives, a request leaves only by
 *   being answered, an answer is taken only for an outstanding key (checked version by version);
 *   and in a separate input race on tasks no one ends, every answer certainly accepted (its key
 *   was requested before it was sent) is in the final `inputResponses`;
 * - each stream's notifications of a task validate as TaskStatusNotificationParams, each equals a
 *   written version (a state tasks/get could have returned), their versions only go up and their
 *   `lastUpdatedAt` never goes back, at most one is terminal, and the last one is the final state;
 * - every tasks/get answer during the race equals a written version.
 *
 * The schedule is seeded (RACES_SEED overrides it); the interleaving itself is up to the event
 * loop, as in production. Set RACES_REPORT=1 to print what each run did.
 */

const SEED = Number(process.env.RACES_SEED ?? 20_260_728);
const TASKS = 100;
const OPS_PER_TASK = 100;
/** Operations in flight at any time (the rest wait their turn, in the seeded order). */
const CONCURRENCY = 64;
/** The tasks of the input-only race (no terminal operation on them). */
const INPUT_TASKS = 20;
const OWNER = 'racer';
const owner = { principal: OWNER } as const;

type Kind = 'complete' | 'fail' | 'cancel' | 'progress' | 'requireInput' | 'update' | 'get';
const TERMINAL_KINDS: readonly Kind[] = ['complete', 'fail', 'cancel'];
/** The non-terminal kinds and their weights. */
const LIVE_KINDS: readonly [Kind, number][] = [
  ['progress', 0.22],
  ['requireInput', 0.22],
  ['update', 0.28],
  ['get', 0.28],
];

/** `Authorization: Bearer <name>` makes `<name>` the principal. */
const principal = (request: unknown): string | undefined => {
  const header = (request as { headers: Record<string, string | undefined> }).headers.authorization;
  return header === undefined ? undefined : /^Bearer\s+(\S+)$/i.exec(header)?.[1];
};

const PREFIX = `e2e-races-${process.pid}-${Date.now()}:`;

/** How many progress writes a queue-run call makes at most, one every TICK_MS. */
const TICKS = 20;
const TICK_MS = 100;

/**
 * The queue-run tool of the third suite: its method, run by a BullMQ worker of either instance,
 * writes progress into its task (a writer racing the others) until the task ends, which ends it.
 */
@Injectable()
class RaceQueueTools {
  @TaskTool({ name: 'race_worker', queue: 'races' })
  async work(_input: unknown, task: TaskContext) {
    for (let tick = 1; tick <= TICKS && !task.signal.aborted; tick++) {
      await task.progress(`tick ${tick}`);
      await new Promise((resolve) => setTimeout(resolve, TICK_MS));
    }
    task.handOff();
    return { content: [] };
  }
}

/** The queue of the third suite: the test's Redis and a prefix. */
interface RacesQueue {
  port: number;
  prefix: string;
}

function racesModule(
  extras: Pick<TasksModuleExtras, 'store' | 'notifier'> = {},
  queue?: RacesQueue,
): Type<unknown> {
  @Module({
    imports: [
      TasksModule.forRoot({
        principal,
        janitor: false,
        maxRows: null,
        maxTasksPerOwner: null,
        ...extras,
      }),
      ...(queue
        ? [
            BullModule.forRoot({
              connection: { host: '127.0.0.1', port: queue.port },
              prefix: `${queue.prefix}bull`,
            }),
            BullModule.registerQueue({ name: 'races' }),
            TasksQueueModule.forRoot({ workers: { races: { concurrency: 200 } } }),
          ]
        : []),
    ],
    providers: queue ? [RaceQueueTools] : [],
  })
  class RacesModule {}
  return RacesModule;
}

interface Instance {
  name: string;
  running: RunningApp;
  url: string;
  service: TasksService;
  store: TaskStore;
}

async function boot(
  name: string,
  extras: Pick<TasksModuleExtras, 'store' | 'notifier'> = {},
  queue?: RacesQueue,
): Promise<Instance> {
  const running = await startApp(racesModule(extras, queue), 'express');
  return {
    name,
    running,
    url: running.url,
    service: running.app.get(TasksService),
    store: running.app.get<TaskStore>(TaskStore),
  };
}

// ----- the record of every accepted write ---------------------------------------------------------

/** JSON with object keys sorted, so equal values compare equal whatever their key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(
          Object.entries(inner as Record<string, unknown>).sort(([a], [b]) =>
            a < b ? -1 : a > b ? 1 : 0,
          ),
        )
      : inner,
  );
}

/** Everything but `resultType` and `_meta`. */
function bare(value: Record<string, unknown>): Record<string, unknown> {
  const copy = { ...value };
  delete copy.resultType;
  delete copy._meta;
  return copy;
}

/** Every record a store accepted (create or compare-and-set), by task and version. */
class History {
  private readonly records = new Map<string, Map<number, TaskRecord>>();
  /** The same (task, version) written twice: a compare-and-set that let two writers through. */
  readonly duplicates: string[] = [];
  /** Compare-and-sets refused (a writer lost a race and retried). */
  conflicts = 0;
  private wires: Map<string, Map<string, number[]>> | undefined;

  /** Wraps the store's writes; reads and everything else are untouched. */
  observe(store: TaskStore): void {
    const create = store.create.bind(store);
    const compareAndSet = store.compareAndSet.bind(store);
    store.create = async (record, options) => {
      await create(record, options);
      this.note(record, 0);
    };
    store.compareAndSet = async (record, expectedVersion) => {
      const written = await compareAndSet(record, expectedVersion);
      if (written) this.note(record, expectedVersion);
      else this.conflicts++;
      return written;
    };
  }

  /** The version each accepted write was made over (0 for a creation), by `<task> <version>`. */
  private readonly over = new Map<string, number>();

  /** The version the write of `record` was made over. */
  madeOver(record: TaskRecord): number | undefined {
    return this.over.get(`${record.taskId} ${record.version}`);
  }

  private note(record: TaskRecord, expected: number): void {
    this.over.set(`${record.taskId} ${record.version}`, expected);
    let versions = this.records.get(record.taskId);
    if (versions === undefined) {
      versions = new Map();
      this.records.set(record.taskId, versions);
    }
    if (versions.has(record.version)) this.duplicates.push(`${record.taskId} v${record.version}`);
    versions.set(record.version, record);
    this.wires = undefined;
  }

  get(taskId: string, version: number): TaskRecord | undefined {
    return this.records.get(taskId)?.get(version);
  }

  /** The task's records in version order. */
  of(taskId: string): TaskRecord[] {
    return [...(this.records.get(taskId)?.values() ?? [])].sort((a, b) => a.version - b.version);
  }

  /** How many accepted writes set a status message that starts with `prefix`. */
  progressWrites(prefix: string): number {
    let count = 0;
    for (const versions of this.records.values()) {
      for (const record of versions.values()) {
        if (record.statusMessage?.startsWith(prefix)) count++;
      }
    }
    return count;
  }

  last(taskId: string): TaskRecord {
    const records = this.of(taskId);
    if (records.length === 0) throw new Error(`no record of ${taskId}`);
    return records.at(-1)!;
  }

  /**
   * The versions whose wire form (what tasks/get and notifications show) is `wire`, ascending.
   * Several versions can look the same on the wire (a change the wire does not show).
   */
  versionsLike(taskId: string, wire: Record<string, unknown>): number[] {
    if (this.wires === undefined) {
      this.wires = new Map();
      for (const [id, versions] of this.records) {
        const byWire = new Map<string, number[]>();
        for (const record of [...versions.values()].sort((a, b) => a.version - b.version)) {
          const key = canonical(toWire(record));
          byWire.set(key, [...(byWire.get(key) ?? []), record.version]);
        }
        this.wires.set(id, byWire);
      }
    }
    return this.wires.get(taskId)?.get(canonical(wire)) ?? [];
  }
}

// ----- the plan -----------------------------------------------------------------------------------

/** One unit of work of the race: run at its turn in `at` order, never throws. */
interface Step {
  at: number;
  run(): Promise<void>;
}

interface Counts {
  [outcome: string]: number;
}

/** Runs the steps in `at` order with at most `concurrency` in flight. */
async function runSteps(steps: readonly Step[], concurrency: number): Promise<void> {
  const ordered = [...steps].sort((a, b) => a.at - b.at);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < ordered.length) await ordered[next++]!.run();
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
}

/** The race, run on `instances` (one app, or two sharing a store). */
/** How a task of the race is made on an instance: by TasksService, or by a tool call. */
type Maker = (instance: Instance) => Promise<string>;

const byService: Maker = async (instance) => (await instance.service.create(owner)).taskId;

/** A `tools/call` of the queue-run tool over HTTP, as the owner. */
const byQueueRunTool: Maker = async (instance) => {
  const answer = await rpc(
    instance.url,
    'tools/call',
    { name: 'race_worker', arguments: {} },
    { principal: OWNER, declareTasks: true },
  );
  const taskId = (answer.body.result as { taskId?: string } | undefined)?.taskId;
  if (taskId === undefined) throw new Error(`race_worker: ${JSON.stringify(answer.body)}`);
  return taskId;
};

async function race(
  instances: readonly Instance[],
  history: History,
  make: Maker = byService,
): Promise<void> {
  const random = seededRandom(SEED);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const problems: string[] = [];
  const counts: Counts = {};
  const count = (outcome: string): void => {
    counts[outcome] = (counts[outcome] ?? 0) + 1;
  };
  const fail = (problem: string): void => {
    problems.push(problem);
  };

  // The tasks, created before the streams open (a listen only watches tasks that exist).
  const tasks: string[] = [];
  for (let t = 0; t < TASKS; t++) {
    tasks.push(await make(instances[t % instances.length]!));
  }
  const inputTasks: string[] = [];
  for (let t = 0; t < INPUT_TASKS; t++) {
    inputTasks.push(await make(instances[t % instances.length]!));
  }
  const everyTask = [...tasks, ...inputTasks];

  // A listen stream per instance, watching every task (120 ≤ maxTaskIds, 256).
  const streams: { instance: Instance; id: string; reader: SseReader }[] = [];
  for (const instance of instances) {
    const id = `races-${instance.name}`;
    const response = await openListen(instance.url, { principal: OWNER, taskIds: everyTask, id });
    expect(response.status).toBe(200);
    const reader = response.stream!;
    const ack = await reader.next();
    expect(ack.method).toBe('notifications/subscriptions/acknowledged');
    const honored = (ack.params?.notifications as { taskIds?: string[] } | undefined)?.taskIds;
    expect(new Set(honored)).toEqual(new Set(everyTask));
    streams.push({ instance, id, reader });
  }

  // ----- worker- and caller-side operations --------------------------------------------------------

  /** Worker side: fulfilled with a record the store wrote, or refused because the task ended. */
  const worker = async (
    kind: Kind,
    taskId: string,
    instance: Instance,
    call: (service: TasksService) => Promise<TaskRecord>,
  ): Promise<void> => {
    try {
      const record = await call(instance.service);
      const written = history.get(taskId, record.version);
      if (written !== record && canonical(written) !== canonical(record)) {
        fail(
          `${kind} on ${taskId} (${instance.name}) returned v${record.version}, not the one the store wrote`,
        );
      }
      count(`${kind}: done`);
    } catch (error) {
      if (error instanceof TaskTerminalError) count(`${kind}: refused, task ended`);
      else fail(`${kind} on ${taskId} (${instance.name}) failed: ${String(error)}`);
    }
  };

  /** The `tasks/get` answers, checked against the history once it is complete. */
  const gets: { taskId: string; instance: string; wire: Record<string, unknown> }[] = [];

  /** Caller side, over HTTP as the owner: every answer is a result. */
  const caller = async (
    method: 'tasks/get' | 'tasks/update' | 'tasks/cancel',
    taskId: string,
    instance: Instance,
    params: Record<string, unknown> = {},
  ): Promise<void> => {
    try {
      const { status, body } = await rpc(
        instance.url,
        method,
        { taskId, ...params },
        { principal: OWNER },
      );
      if (status !== 200 || body.error !== undefined || body.result?.resultType !== 'complete') {
        return fail(
          `${method} on ${taskId} (${instance.name}) answered ${status} ${JSON.stringify(body)}`,
        );
      }
      if (method === 'tasks/get')
        gets.push({ taskId, instance: instance.name, wire: bare(body.result) });
      count(`${method}: answered`);
    } catch (error) {
      fail(`${method} on ${taskId} (${instance.name}) failed: ${String(error)}`);
    }
  };

  /** The payloads sent for each (task, key): an answer in the history must be one of them. */
  const sent = new Map<string, Set<string>>();
  const send = (taskId: string, key: string, payload: Record<string, unknown>): void => {
    const id = `${taskId} ${key}`;
    sent.set(id, (sent.get(id) ?? new Set()).add(canonical(payload)));
  };

  const steps: Step[] = [];
  const via = (): Instance => pick(instances);

  // 10,000 operations, 100 per task. Each task gets 1–4 terminal operations, scheduled in the last
  // 30 % of the run (racing each other and the rest); the others are spread over the whole run.
  for (let t = 0; t < TASKS; t++) {
    const taskId = tasks[t]!;
    const terminals = 1 + Math.floor(random() * 4);
    const kinds: Kind[] = [];
    for (let s = 0; s < OPS_PER_TASK; s++) {
      if (s < terminals) {
        kinds.push(pick(TERMINAL_KINDS));
        continue;
      }
      let roll = random();
      const kind = LIVE_KINDS.find(([, weight]) => (roll -= weight) < 0)?.[0] ?? 'get';
      kinds.push(kind);
    }
    const requested = kinds.flatMap((kind, s) =>
      kind === 'requireInput' ? [`k${t * OPS_PER_TASK + s}`] : [],
    );
    kinds.forEach((kind, s) => {
      const i = t * OPS_PER_TASK + s;
      const instance = via();
      const at = s < terminals ? 0.7 + 0.3 * random() : random();
      let run: () => Promise<void>;
      switch (kind) {
        case 'complete':
          run = () =>
            worker(kind, taskId, instance, (service) =>
              service.complete(taskId, { content: [{ type: 'text', text: `c${i}` }] }),
            );
          break;
        case 'fail':
          run = () =>
            worker(kind, taskId, instance, (service) => service.fail(taskId, [-32000, `f${i}`]));
          break;
        case 'progress':
          run = () =>
            worker(kind, taskId, instance, (service) => service.progress(taskId, `p${i}`));
          break;
        case 'requireInput':
          run = () =>
            worker(kind, taskId, instance, (service) =>
              service.requireInput(taskId, { [`k${i}`]: elicit(`q${i}`) }),
            );
          break;
        case 'cancel':
          run = () => caller('tasks/cancel', taskId, instance);
          break;
        case 'get':
          run = () => caller('tasks/get', taskId, instance);
          break;
        case 'update': {
          // Mostly a key some requireInput of this task asks for (before or after this answer
          // arrives, or after the task ended), sometimes one nobody asks for.
          const key = requested.length > 0 && random() < 0.9 ? pick(requested) : `never${i}`;
          const payload = accept(`u${i}`);
          send(taskId, key, payload);
          run = () =>
            caller('tasks/update', taskId, instance, { inputResponses: { [key]: payload } });
          break;
        }
      }
      steps.push({ at, run });
    });
  }
  const operations = steps.length;
  expect(operations).toBe(TASKS * OPS_PER_TASK);

  // The input race, on tasks no one ends. Per task: 20 keys requested and then answered (so the
  // answer is certainly accepted), 5 of them answered a second time afterwards (certainly
  // ignored); 8 keys requested and answered at the same moment (either may come first); 4 answers
  // to keys never requested; 8 progress changes. All mixed into the race above.
  interface InputPlan {
    taskId: string;
    chained: { key: string; first: Record<string, unknown>; second?: Record<string, unknown> }[];
    racy: { key: string; payload: Record<string, unknown> }[];
    stray: string[];
  }
  const inputPlans: InputPlan[] = [];
  for (const [t, taskId] of inputTasks.entries()) {
    const plan: InputPlan = { taskId, chained: [], racy: [], stray: [] };
    for (let n = 0; n < 20; n++) {
      const entry = {
        key: `chained${n}`,
        first: accept(`first${t}.${n}`),
        ...(n < 5 && { second: accept(`second${t}.${n}`) }),
      };
      plan.chained.push(entry);
      const [asker, answerer, again] = [via(), via(), via()];
      steps.push({
        at: random(),
        run: async () => {
          await worker('requireInput', taskId, asker, (service) =>
            service.requireInput(taskId, { [entry.key]: elicit(entry.key) }),
          );
          await caller('tasks/update', taskId, answerer, {
            inputResponses: { [entry.key]: entry.first },
          });
          if (entry.second) {
            await caller('tasks/update', taskId, again, {
              inputResponses: { [entry.key]: entry.second },
            });
          }
        },
      });
    }
    for (let n = 0; n < 8; n++) {
      const entry = { key: `racy${n}`, payload: accept(`racy${t}.${n}`) };
      plan.racy.push(entry);
      const [asker, answerer] = [via(), via()];
      steps.push({
        at: random(),
        run: async () => {
          await Promise.all([
            worker('requireInput', taskId, asker, (service) =>
              service.requireInput(taskId, { [entry.key]: elicit(entry.key) }),
            ),
            caller('tasks/update', taskId, answerer, {
              inputResponses: { [entry.key]: entry.payload },
            }),
          ]);
        },
      });
    }
    for (let n = 0; n < 4; n++) {
      const key = `stray${n}`;
      plan.stray.push(key);
      const instance = via();
      steps.push({
        at: random(),
        run: () =>
          caller('tasks/update', taskId, instance, { inputResponses: { [key]: accept(key) } }),
      });
    }
    for (let n = 0; n < 8; n++) {
      const instance = via();
      steps.push({
        at: random(),
        run: () =>
          worker('progress', taskId, instance, (service) => service.progress(taskId, `input ${n}`)),
      });
    }
    for (const entry of plan.chained) {
      send(taskId, entry.key, entry.first);
      if (entry.second) send(taskId, entry.key, entry.second);
    }
    for (const entry of plan.racy) send(taskId, entry.key, entry.payload);
    inputPlans.push(plan);
  }

  const started = Date.now();
  await runSteps(steps, CONCURRENCY);
  const raceMs = Date.now() - started;

  // ----- the history: one linear sequence of versions per task ----------------------------------------

  for (const duplicate of history.duplicates) fail(`${duplicate} written twice`);
  for (const taskId of everyTask) {
    const records = history.of(taskId);
    const where = `task ${taskId}`;
    records.forEach((record, j) => {
      const over = j === 0 ? 0 : records[j - 1]!.version;
      if (j === 0 && record.version !== 1) fail(`${where}: created as v${record.version}`);
      if (history.madeOver(record) !== over) {
        fail(
          `${where}: v${record.version} written over v${history.madeOver(record)}, not v${over}`,
        );
      }
    });
    const terminal = records.filter((record) => isTerminal(record.status));
    if (tasks.includes(taskId)) {
      if (terminal.length !== 1 || terminal[0] !== records.at(-1)) {
        fail(
          `${where}: ${terminal.length} terminal versions, the last is ${records.at(-1)?.status}`,
        );
      }
    } else if (terminal.length > 0) {
      fail(`${where} (input race) ended: ${terminal[0]!.status}`);
    }
    for (let j = 1; j < records.length; j++) {
      const before = records[j - 1]!;
      const after = records[j]!;
      const at = `${where} v${after.version}`;
      if (after.lastUpdatedAt < before.lastUpdatedAt) fail(`${at}: lastUpdatedAt went back`);
      if (after.createdAt !== before.createdAt) fail(`${at}: createdAt changed`);
      const requests = Object.keys(after.inputRequests ?? {});
      const responses = after.inputResponses ?? {};
      const used = after.usedInputKeys ?? [];
      if ((before.usedInputKeys ?? []).some((key, n) => used[n] !== key)) {
        fail(`${at}: usedInputKeys lost keys`);
      }
      if (isTerminal(after.status)) {
        if (after.inputRequests || after.inputResponses) fail(`${at}: ended with pending input`);
        continue;
      }
      if ((after.status === 'input_required') !== requests.length > 0) {
        fail(`${at}: status ${after.status} with ${requests.length} outstanding requests`);
      }
      for (const key of requests) {
        if (Object.hasOwn(responses, key)) fail(`${at}: ${key} both outstanding and answered`);
        if (!used.includes(key)) fail(`${at}: ${key} outstanding but not in usedInputKeys`);
      }
      // No accepted answer is ever lost or replaced while the task lives.
      for (const [key, value] of Object.entries(before.inputResponses ?? {})) {
        if (!Object.hasOwn(responses, key)) fail(`${at}: the accepted answer to ${key} was lost`);
        else if (canonical(responses[key]) !== canonical(value))
          fail(`${at}: the answer to ${key} was replaced`);
      }
      // A request leaves only by being answered; an answer is taken only for an outstanding key.
      for (const key of Object.keys(before.inputRequests ?? {})) {
        if (!requests.includes(key) && !Object.hasOwn(responses, key)) {
          fail(`${at}: request ${key} vanished unanswered`);
        }
      }
      for (const key of Object.keys(responses)) {
        if (
          !Object.hasOwn(before.inputResponses ?? {}, key) &&
          !Object.hasOwn(before.inputRequests ?? {}, key)
        ) {
          fail(`${at}: answer to ${key} accepted though it was not outstanding`);
        }
        if (!sent.get(`${taskId} ${key}`)?.has(canonical(responses[key]))) {
          fail(`${at}: answer to ${key} is not one the caller sent`);
        }
      }
    }
  }

  // ----- the final state, read over HTTP and from the worker side on every instance ---------------------

  const finals = new Map<string, Record<string, unknown>>();
  for (const taskId of everyTask) finals.set(taskId, { ...toWire(history.last(taskId)) });
  await Promise.all(
    everyTask.flatMap((taskId) =>
      instances.map(async (instance) => {
        const last = history.last(taskId);
        const where = `${taskId} on ${instance.name}`;
        const { body } = await rpc(instance.url, 'tasks/get', { taskId }, { principal: OWNER });
        if (body.result === undefined) {
          return fail(`final tasks/get of ${where}: ${JSON.stringify(body)}`);
        }
        if (canonical(bare(body.result)) !== canonical(finals.get(taskId))) {
          fail(`final tasks/get of ${where} is not the last version written (v${last.version})`);
        }
        const status = await instance.service.status(taskId);
        if (canonical(status) !== canonical(JSON.parse(JSON.stringify(last)))) {
          fail(`final status() of ${where} is not the last version written (v${last.version})`);
        }
      }),
    ),
  );
  const outcomes: Counts = {};
  for (const taskId of tasks) {
    const { status } = finals.get(taskId)!;
    outcomes[status as string] = (outcomes[status as string] ?? 0) + 1;
    if (!isTerminal(status as TaskRecord['status'])) fail(`task ${taskId} ended ${String(status)}`);
  }

  // ----- no accepted answer lost: the input race --------------------------------------------------------

  let acceptedInput = 0;
  let acceptedInRace = 0;
  for (const taskId of tasks) {
    const answered = new Set(
      history.of(taskId).flatMap((r) => Object.keys(r.inputResponses ?? {})),
    );
    acceptedInRace += answered.size;
  }
  for (const plan of inputPlans) {
    const final = history.last(plan.taskId);
    const where = `input task ${plan.taskId}`;
    const requests = final.inputRequests ?? {};
    const responses = final.inputResponses ?? {};
    for (const { key, first } of plan.chained) {
      // Requested, then answered: certainly accepted, and a second answer certainly ignored.
      acceptedInput++;
      if (canonical(responses[key]) !== canonical(first)) {
        fail(`${where}: the accepted answer to ${key} is ${JSON.stringify(responses[key])}`);
      }
    }
    for (const { key, payload } of plan.racy) {
      const answered = Object.hasOwn(responses, key);
      if (answered) acceptedInput++;
      if (answered === Object.hasOwn(requests, key)) {
        fail(
          `${where}: ${key} is ${answered ? 'both answered and outstanding' : 'neither answered nor outstanding'}`,
        );
      } else if (answered && canonical(responses[key]) !== canonical(payload)) {
        fail(`${where}: the answer to ${key} is not the one sent`);
      }
    }
    const asked = [...plan.chained, ...plan.racy].map(({ key }) => key).sort();
    if (canonical([...(final.usedInputKeys ?? [])].sort()) !== canonical(asked)) {
      fail(`${where}: usedInputKeys ${JSON.stringify(final.usedInputKeys)}`);
    }
    for (const key of plan.stray) {
      if (Object.hasOwn(responses, key))
        fail(`${where}: the answer to ${key}, never asked, was taken`);
    }
  }

  // ----- what each stream received --------------------------------------------------------------------

  /** The last notification each stream holds per task, as canonical JSON. */
  const lastHeard = (reader: SseReader): Map<string, string> => {
    const last = new Map<string, Record<string, unknown>>();
    for (const message of reader.messages) {
      if (message.method !== 'notifications/tasks') continue;
      last.set(message.params!.taskId as string, message.params!);
    }
    return new Map([...last].map(([taskId, params]) => [taskId, canonical(bare(params))]));
  };
  // Every stream ends up holding the final version of every task (it may skip versions between).
  await eventually(
    () =>
      streams.every(({ reader }) => {
        const heard = lastHeard(reader);
        return everyTask.every((taskId) => heard.get(taskId) === canonical(finals.get(taskId)));
      })
        ? true
        : undefined,
    10_000,
    'every stream to hear the final version of every task',
  ).catch((error: unknown) => {
    for (const { instance, reader } of streams) {
      const heard = lastHeard(reader);
      const behind = everyTask.filter(
        (taskId) => heard.get(taskId) !== canonical(finals.get(taskId)),
      );
      if (behind.length > 0) {
        fail(
          `the stream on ${instance.name} (done: ${reader.done}) never heard the final version of ${behind.length} tasks, e.g. ${behind[0]}: ${heard.get(behind[0]!)} vs ${canonical(finals.get(behind[0]!))}`,
        );
      }
    }
    fail(String(error));
  });

  let notifications = 0;
  for (const { instance, id, reader } of streams) {
    if (reader.done) fail(`the stream on ${instance.name} ended during the race`);
    const perTask = new Map<string, { version: number; at: number; terminals: number }>();
    for (const message of reader.messages.slice(1) as JsonRpcMessage[]) {
      const where = `stream ${instance.name}`;
      if (message.method !== 'notifications/tasks') {
        fail(`${where}: unexpected ${JSON.stringify(message)}`);
        continue;
      }
      notifications++;
      const params = message.params as Record<string, unknown> & {
        _meta?: Record<string, unknown>;
      };
      if (!TaskStatusNotificationParamsV2Schema.safeParse(params).success) {
        fail(`${where}: not a TaskStatusNotificationParams: ${JSON.stringify(params)}`);
      }
      if (params._meta?.['io.modelcontextprotocol/subscriptionId'] !== id) {
        fail(`${where}: subscription id ${JSON.stringify(params._meta)}`);
      }
      const taskId = params.taskId as string;
      const wire = bare(params);
      const seen = perTask.get(taskId) ?? { version: 0, at: -Infinity, terminals: 0 };
      // The versions this could be (a state tasks/get could have returned), the first one after
      // the previous notification's: none means it matches no written state, or it went back.
      const candidates = history.versionsLike(taskId, wire);
      if (candidates.length === 0) {
        fail(`${where}: ${taskId} notified in a state never written: ${JSON.stringify(wire)}`);
        continue;
      }
      const version = candidates.find((v) => v > seen.version);
      if (version === undefined) {
        fail(`${where}: ${taskId} went back to v${candidates.join('/')} after v${seen.version}`);
        continue;
      }
      const at = Date.parse(wire.lastUpdatedAt as string);
      if (at < seen.at) fail(`${where}: ${taskId} lastUpdatedAt went back`);
      const terminals = seen.terminals + (isTerminal(wire.status as TaskRecord['status']) ? 1 : 0);
      if (terminals > 1) fail(`${where}: ${taskId} notified terminal twice`);
      perTask.set(taskId, { version, at, terminals });
    }
  }

  // ----- tasks/get answers: each a state the store wrote ------------------------------------------------

  for (const { taskId, instance, wire } of gets) {
    if (history.versionsLike(taskId, wire).length === 0) {
      fail(
        `tasks/get of ${taskId} on ${instance} answered a state never written: ${JSON.stringify(wire)}`,
      );
    }
  }

  for (const { reader } of streams) await reader.close();

  if (process.env.RACES_REPORT) {
    const line = (what: Counts): string =>
      Object.entries(what)
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');
    process.stdout.write(
      `\n[races ${instances.map((i) => i.name).join('+')}] seed ${SEED}: ${operations} operations + ` +
        `${steps.length - operations} input-race steps in ${raceMs} ms; compare-and-set conflicts ` +
        `${history.conflicts}; final ${line(outcomes)}; accepted answers: ${acceptedInRace} in the ` +
        `race, ${acceptedInput} in the input race; ${notifications} notifications checked; ${gets.length} tasks/get answers checked\n` +
        `  ${line(counts)}\n`,
    );
  }

  // Every problem, grouped by kind (ids and numbers left out), with up to 3 examples of each.
  const kinds = new Map<string, string[]>();
  for (const problem of problems) {
    const kind = problem
      .replace(/[\w-]{43}/g, '<task>')
      .replace(/[{[].*$/s, '…')
      .replace(/\d+/g, 'N');
    kinds.set(kind, [...(kinds.get(kind) ?? []), problem]);
  }
  const report = [...kinds].map(([kind, all]) => ({
    kind,
    count: all.length,
    examples: all.slice(0, 3),
  }));
  expect(report).toEqual([]);
}

// ----- the suites -----------------------------------------------------------------------------------

it('docs/reliability.md states the race this file runs', () => {
  expect(docFigure('docs/reliability.md', 'races.operations')).toBe(TASKS * OPS_PER_TASK);
  expect(docFigure('docs/reliability.md', 'races.tasks')).toBe(TASKS);
});

describe('races over HTTP: the in-memory store (one app)', () => {
  let instance: Instance | undefined;

  afterAll(async () => {
    await instance?.running.close();
  });

  it('10,000 concurrent mixed operations over 100 tasks, with a listen stream watching them all', async () => {
    instance = await boot('memory');
    const history = new History();
    history.observe(instance.store);
    await race([instance], history);
    // One process: changes to one task queue up, so the store never saw a conflict.
    expect(history.conflicts).toBe(0);
  }, 120_000);
});

describe('races over HTTP: RedisTaskStore + redisNotifier (two apps on one Redis)', () => {
  let redis: TestRedis | undefined;
  const instances: Instance[] = [];

  afterAll(async () => {
    for (const instance of instances) await instance.running.close();
    await redis?.stop();
  });

  it('10,000 concurrent mixed operations over 100 tasks, split across both, a listen stream on each', async () => {
    redis = await startTestRedis();
    const connection = { connection: redis.url, prefix: PREFIX };
    for (const name of ['A', 'B']) {
      instances.push(
        await boot(name, {
          store: new RedisTaskStore(connection),
          notifier: redisNotifier(connection),
        }),
      );
    }
    const history = new History();
    for (const instance of instances) {
      expect(instance.store).toBeInstanceOf(RedisTaskStore);
      const notifier = instance.running.app.get<RedisTaskNotifier>(TaskNotifier);
      expect(notifier).toBeInstanceOf(RedisTaskNotifier);
      await notifier.ready;
      history.observe(instance.store);
    }
    await race(instances, history);
    // The two instances did collide on the store; compare-and-set settled every collision.
    expect(history.conflicts).toBeGreaterThan(0);
  }, 120_000);
});

describe('races over HTTP: the tasks made by a queue-run tool, its method a writer too (two apps on one Redis, a BullMQ worker in each)', () => {
  let redis: TestRedis | undefined;
  const instances: Instance[] = [];

  afterAll(async () => {
    for (const instance of instances) await instance.running.close();
    await redis?.stop();
  });

  it('10,000 concurrent mixed operations over 100 tasks while their jobs write progress', async () => {
    redis = await startTestRedis();
    const prefix = `${PREFIX}queue:`;
    const connection = { connection: redis.url, prefix };
    for (const name of ['A', 'B']) {
      instances.push(
        await boot(
          name,
          { store: new RedisTaskStore(connection), notifier: redisNotifier(connection) },
          { port: redis.port, prefix },
        ),
      );
    }
    const history = new History();
    for (const instance of instances) {
      await instance.running.app.get<RedisTaskNotifier>(TaskNotifier).ready;
      history.observe(instance.store);
    }
    await race(instances, history, byQueueRunTool);
    // The jobs did write: more versions than the race's own operations could make alone.
    expect(history.progressWrites('tick')).toBeGreaterThan(0);
  }, 180_000);
});
