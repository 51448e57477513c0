import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import type * as Otel from '@opentelemetry/api';
import { messageOf } from '../errors.js';
import type {
  TasksConfig,
  TasksTelemetryOptions,
} from '../interfaces/tasks-module-options.interface.js';
import { isTerminal, type TaskRecord } from '../task/record.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import type { TraceCarrier, TraceFields } from './trace-carrier.js';
import { contextFromFields, fieldsOfContext, namesTrace, parentContext } from './trace-context.js';

export type { TraceCarrier, TraceFields } from './trace-carrier.js';

/*
 * Metrics and traces through `@opentelemetry/api`, an optional peer: it is loaded with `import()`
 * once, at module init, and when it is missing (or `telemetry: false`) nothing is recorded and
 * every hook below is one property check. When the module starts with no provider given and no
 * OpenTelemetry SDK registered, there is nothing to record into, so the API (some 40 modules,
 * a good part of the app's startup) is not loaded then: the hooks wait, at one property check
 * each, and load it as soon as an SDK has registered. OpenTelemetry's types stay inside this
 * file's private members and local declarations, and trace-context.ts, which no public declaration
 * imports: no public declaration names them.
 */

/** The instrumentation scope of everything this package records. */
const SCOPE = 'nestjs-mcp-tasks';

/** Attribute names: the GenAI conventions' tool name; the rest in the `mcp.` namespace. */
const TOOL = 'gen_ai.tool.name';
const STATUS = 'mcp.task.status';
const TASK_ID = 'mcp.task.id';

/**
 * The context a run's span is a child of, as captured when the call arrived. Opaque outside this
 * file (an OpenTelemetry Context, or a PendingParent while the API has not loaded).
 */
export type TraceParent = { readonly __traceParent: never };

/** One tool run being traced and counted: `end` once, when the run ends. */
export interface TelemetryRun {
  /**
   * `latest`: the newest record the run saw (terminal when the run settled its task); `error`:
   * what the method threw when the task is left as it is (a queue job's run to be retried).
   */
  end(latest: TaskRecord | undefined, error?: unknown): void;
}

/**
 * Where `@opentelemetry/api` 1.x keeps what an SDK registers (meter and tracer providers, context
 * manager, propagator, diagnostics logger): a global that exists once anything is registered.
 */
const OTEL_GLOBALS = Symbol.for('opentelemetry.js.api.1');
const sdkRegistered = (): boolean =>
  (globalThis as Record<symbol, unknown>)[OTEL_GLOBALS] !== undefined;

/**
 * The parent of a call that arrived while the API was not loaded: the request's carrier, which
 * names a W3C trace. With no SDK registered the active context is the root one and the
 * propagator the no-op one, so the carrier is all there is to continue; it is read once the API
 * has loaded (a queued call's trace fields) or dropped (a run no SDK records).
 */
class PendingParent {
  constructor(readonly carrier: TraceCarrier) {}
}

/**
 * The recorder of one registration: the instruments, made once the API has loaded, and the hooks
 * TasksService (each write) and TaskToolRunner (each run) call.
 */
@Injectable()
export class TasksTelemetry implements OnModuleInit {
  private readonly logger = new Logger('TasksTelemetry');
  /** Set once the API has loaded and telemetry is on: every hook checks it first. */
  private on: Instruments | undefined;
  /** The options while telemetry waits for an SDK to register (see `wake`). */
  private waiting: Readonly<TasksTelemetryOptions> | undefined;
  /** From the wait until telemetry is on or found off: calls then get a PendingParent. */
  private pending = false;
  /** The API's one `import()`: undefined when it is not installed. */
  private api: Promise<typeof Otel | undefined> | undefined;

  constructor(@Inject(TASKS_CONFIG) private readonly config: TasksConfig) {}

  async onModuleInit(): Promise<void> {
    const options = this.config.telemetry;
    if (options === false) return;
    if (
      options.meterProvider === undefined &&
      options.tracerProvider === undefined &&
      !sdkRegistered()
    ) {
      this.waiting = options;
      this.pending = true;
      return;
    }
    await this.start(options);
  }

  /** Loads the API and makes the instruments; never throws (telemetry is off then). */
  private async start(options: Readonly<TasksTelemetryOptions>): Promise<void> {
    const api = await this.loadApi();
    try {
      if (api !== undefined) this.on = new Instruments(api, options);
    } catch (error) {
      this.logger.error(`Telemetry is off: its instruments could not be made: ${messageOf(error)}`);
    } finally {
      this.pending = false;
    }
  }

  private loadApi(): Promise<typeof Otel | undefined> {
    // Not installed: nothing is recorded.
    return (this.api ??= import('@opentelemetry/api').catch(() => undefined));
  }

  /**
   * While telemetry waits: starts it once an SDK has registered since the module started (the
   * hooks call this; until the API has loaded, runs are not traced).
   */
  private wake(): void {
    const options = this.waiting;
    if (options === undefined || !sdkRegistered()) return;
    this.waiting = undefined;
    void this.start(options);
  }

  /** Whether anything is recorded. */
  get enabled(): boolean {
    return this.on !== undefined;
  }

  /**
   * A write this process made: `previous` is the record it replaced, none for a creation. Counted
   * here, at the writer, so a change is counted once however many instances hear of it.
   */
  wrote(record: TaskRecord, previous: TaskRecord | undefined): void {
    if (this.on !== undefined) this.on.wrote(record, previous);
    else if (this.waiting !== undefined) this.wake();
  }

  /**
   * The parent of the spans of a call arriving now: the active context when it has a span (an
   * app with OpenTelemetry's HTTP instrumentation), else the trace the request names in
   * `params._meta`, else in its headers. Undefined when telemetry is off.
   */
  parentOf(carrier: TraceCarrier | undefined): TraceParent | undefined {
    if (this.on !== undefined) return this.on.parentOf(carrier) as unknown as TraceParent;
    if (!this.pending) return undefined;
    this.wake();
    return namesTrace(carrier) ? (new PendingParent(carrier) as unknown as TraceParent) : undefined;
  }

  /**
   * The W3C fields of a parent, for a queued call to carry to its worker: a promise when the
   * parent was read before the API had loaded (it loads now).
   */
  fieldsOf(
    parent: TraceParent | undefined,
  ): TraceFields | undefined | Promise<TraceFields | undefined> {
    if (parent === undefined) return undefined;
    if (parent instanceof PendingParent) return this.pendingFields(parent);
    return this.on?.fieldsOf(parent as unknown as Otel.Context);
  }

  private async pendingFields(parent: PendingParent): Promise<TraceFields | undefined> {
    const api = await this.loadApi();
    if (api === undefined) return undefined;
    return fieldsOfContext(api, parentContext(api, parent.carrier));
  }

  /** The parent a queued call carries (its `trace` fields). */
  parentFrom(fields: unknown): TraceParent | undefined {
    if (this.on !== undefined) return this.on.fromFields(fields) as TraceParent | undefined;
    if (this.waiting !== undefined) this.wake();
    return undefined;
  }

  /** Starts one run of a tool: its span, and one more in the active-runs count. */
  startRun(
    tool: string,
    taskId: string,
    parent: TraceParent | undefined,
  ): TelemetryRun | undefined {
    const { on } = this;
    if (on === undefined) {
      if (this.waiting !== undefined) this.wake();
      return undefined;
    }
    const context =
      parent instanceof PendingParent
        ? on.parentOf(parent.carrier)
        : (parent as unknown as Otel.Context | undefined);
    return on.startRun(tool, taskId, context);
  }
}

/** Per tool, the attribute sets recorded for it (made once: the SDK keys on them per call). */
interface ToolAttributes {
  readonly tool: Otel.Attributes;
  readonly byStatus: Map<string, Otel.Attributes>;
  /**
   * The run of this tool whose span does not record (no SDK, or sampled out): shared by all of
   * them, so a running call keeps nothing of its own for telemetry.
   */
  unrecorded?: TelemetryRun;
}

/** The metrics this module records: name, description and unit of each instrument. */
const INSTRUMENTS = {
  created: ['mcp.task.created', 'Tasks created, by the instance that created them.', '{task}'],
  finished: [
    'mcp.task.finished',
    'Tasks that reached a terminal status, by the instance that wrote it.',
    '{task}',
  ],
  duration: ['mcp.task.duration', 'Time from a task’s creation to its terminal status.', 's'],
  inputWait: [
    'mcp.task.input_required.duration',
    'Time a task spent in input_required, each stay from entering to leaving it.',
    's',
  ],
  activeRuns: [
    'mcp.task.active_runs',
    'Tool calls running in this process (in-process calls and queue jobs).',
    '{run}',
  ],
} as const;

/** The arguments of the meter's `create…` call for one of INSTRUMENTS. */
function instrument(
  which: keyof typeof INSTRUMENTS,
): [name: string, options: { description: string; unit: string }] {
  const [name, description, unit] = INSTRUMENTS[which];
  return [name, { description, unit }];
}

class Instruments {
  private readonly created: Otel.Counter;
  private readonly finished: Otel.Counter;
  private readonly duration: Otel.Histogram;
  private readonly inputWait: Otel.Histogram;
  private readonly activeRuns: Otel.UpDownCounter;
  private readonly tracer: Otel.Tracer;
  private readonly recordTaskIds: boolean;
  private readonly attributes = new Map<string | undefined, ToolAttributes>();

  constructor(
    private readonly api: typeof Otel,
    options: Readonly<TasksTelemetryOptions>,
  ) {
    const meterProvider = (options.meterProvider ??
      api.metrics.getMeterProvider()) as Otel.MeterProvider;
    const tracerProvider = (options.tracerProvider ??
      api.trace.getTracerProvider()) as Otel.TracerProvider;
    const meter = meterProvider.getMeter(SCOPE);
    this.tracer = tracerProvider.getTracer(SCOPE);
    this.recordTaskIds = options.recordTaskIds === true;
    this.created = meter.createCounter(...instrument('created'));
    this.finished = meter.createCounter(...instrument('finished'));
    this.duration = meter.createHistogram(...instrument('duration'));
    this.inputWait = meter.createHistogram(...instrument('inputWait'));
    this.activeRuns = meter.createUpDownCounter(...instrument('activeRuns'));
  }

  wrote(record: TaskRecord, previous: TaskRecord | undefined): void {
    if (previous === undefined) {
      this.created.add(1, this.of(record.toolName).tool);
      return;
    }
    if (record.status === previous.status) return;
    if (previous.status === 'input_required' && previous.inputRequiredSince !== undefined) {
      const stay = (record.lastUpdatedAt - previous.inputRequiredSince) / 1000;
      this.inputWait.record(stay, this.of(record.toolName).tool);
    }
    if (isTerminal(record.status)) {
      const attributes = this.withStatus(record.toolName, record.status);
      this.finished.add(1, attributes);
      this.duration.record((record.lastUpdatedAt - record.createdAt) / 1000, attributes);
    }
  }

  parentOf(carrier: TraceCarrier | undefined): Otel.Context {
    return parentContext(this.api, carrier);
  }

  fromFields(fields: unknown): Otel.Context | undefined {
    return contextFromFields(this.api, fields);
  }

  fieldsOf(parent: Otel.Context): TraceFields | undefined {
    return fieldsOfContext(this.api, parent);
  }

  startRun(tool: string, taskId: string, parent: Otel.Context | undefined): TelemetryRun {
    const attributes: Otel.Attributes = { 'gen_ai.operation.name': 'execute_tool', [TOOL]: tool };
    if (this.recordTaskIds) attributes[TASK_ID] = taskId;
    const span = this.tracer.startSpan(
      `execute_tool ${tool}`,
      { kind: this.api.SpanKind.INTERNAL, attributes },
      parent ?? this.api.context.active(),
    );
    const counted = this.of(tool);
    const active = counted.tool;
    this.activeRuns.add(1, active);
    if (!span.isRecording()) {
      return (counted.unrecorded ??= { end: () => this.activeRuns.add(-1, active) });
    }
    return {
      end: (latest, error) => {
        this.activeRuns.add(-1, active);
        this.endSpan(span, latest, error);
      },
    };
  }

  private endSpan(span: Otel.Span, latest: TaskRecord | undefined, error: unknown): void {
    const { SpanStatusCode } = this.api;
    if (latest !== undefined) span.setAttribute(STATUS, latest.status);
    if (latest?.status === 'failed') {
      const failure = latest.error;
      if (failure !== undefined) span.setAttribute('error.type', String(failure.code));
      span.setStatus({ code: SpanStatusCode.ERROR, message: failure?.message ?? 'failed' });
    } else if (error !== undefined) {
      span.setAttribute('error.type', (error as Error)?.name ?? typeof error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: messageOf(error) });
    }
    span.end();
  }

  private of(tool: string | undefined): ToolAttributes {
    let found = this.attributes.get(tool);
    if (found === undefined) {
      found = { tool: tool === undefined ? {} : { [TOOL]: tool }, byStatus: new Map() };
      this.attributes.set(tool, found);
    }
    return found;
  }

  private withStatus(tool: string | undefined, status: string): Otel.Attributes {
    const attributes = this.of(tool);
    let found = attributes.byStatus.get(status);
    if (found === undefined) {
      found = { ...attributes.tool, [STATUS]: status };
      attributes.byStatus.set(status, found);
    }
    return found;
  }
}
