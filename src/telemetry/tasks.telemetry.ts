import type { IncomingHttpHeaders } from 'node:http';
import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import type * as Otel from '@opentelemetry/api';
import { messageOf } from '../errors.js';
import type {
  TasksConfig,
  TasksTelemetryOptions,
} from '../interfaces/tasks-module-options.interface.js';
import { isTerminal, type TaskRecord } from '../task/record.js';
import { TASKS_CONFIG } from '../tasks.constants.js';

/*
 * Metrics and traces through `@opentelemetry/api`, an optional peer: it is loaded with `import()`
 * once, at module init, and when it is missing (or `telemetry: false`) nothing is recorded and
 * every hook below is one property check. OpenTelemetry's types stay inside this file's private
 * members and local declarations, so no public declaration names them.
 */

/** The instrumentation scope of everything this package records. */
const SCOPE = 'nestjs-mcp-tasks';

/** Attribute names: the GenAI conventions' tool name; the rest in the `mcp.` namespace. */
const TOOL = 'gen_ai.tool.name';
const STATUS = 'mcp.task.status';
const TASK_ID = 'mcp.task.id';

/**
 * Where a tool call's trace comes from: the request's `params._meta` (W3C `traceparent` and
 * `tracestate` keys, as the 2026-07-28 revision names them) and its HTTP headers.
 */
export interface TraceCarrier {
  readonly meta?: unknown;
  readonly headers?: IncomingHttpHeaders;
}

/** The W3C trace context a queued call carries to its worker (see `QueuedCall.trace`). */
export type TraceFields = Readonly<{ traceparent: string; tracestate?: string }>;

/**
 * The context a run's span is a child of, as captured when the call arrived. Opaque outside this
 * file (it is an OpenTelemetry Context).
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

const W3C_TRACEPARENT = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(?:-|$)/;

/**
 * The recorder of one registration: the instruments, made once the API has loaded, and the hooks
 * TasksService (each write) and TaskToolRunner (each run) call.
 */
@Injectable()
export class TasksTelemetry implements OnModuleInit {
  private readonly logger = new Logger('TasksTelemetry');
  /** Set once the API has loaded and telemetry is on: every hook checks it first. */
  private on: Instruments | undefined;

  constructor(@Inject(TASKS_CONFIG) private readonly config: TasksConfig) {}

  async onModuleInit(): Promise<void> {
    const options = this.config.telemetry;
    if (options === false) return;
    let api: typeof Otel;
    try {
      api = await import('@opentelemetry/api');
    } catch {
      return; // Not installed: nothing is recorded.
    }
    try {
      this.on = new Instruments(api, options);
    } catch (error) {
      this.logger.error(`Telemetry is off: its instruments could not be made: ${messageOf(error)}`);
    }
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
    this.on?.wrote(record, previous);
  }

  /**
   * The parent of the spans of a call arriving now: the active context when it has a span (an
   * app with OpenTelemetry's HTTP instrumentation), else the trace the request names in
   * `params._meta`, else in its headers. Undefined when telemetry is off.
   */
  parentOf(carrier: TraceCarrier | undefined): TraceParent | undefined {
    return this.on?.parentOf(carrier) as TraceParent | undefined;
  }

  /** The W3C fields of a parent, for a queued call to carry to its worker. */
  fieldsOf(parent: TraceParent | undefined): TraceFields | undefined {
    return parent === undefined ? undefined : this.on?.fieldsOf(parent as unknown as Otel.Context);
  }

  /** The parent a queued call carries (its `trace` fields). */
  parentFrom(fields: unknown): TraceParent | undefined {
    return this.on?.fromFields(fields) as TraceParent | undefined;
  }

  /** Starts one run of a tool: its span, and one more in the active-runs count. */
  startRun(
    tool: string,
    taskId: string,
    parent: TraceParent | undefined,
  ): TelemetryRun | undefined {
    return this.on?.startRun(tool, taskId, parent as unknown as Otel.Context | undefined);
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
    this.created = meter.createCounter('mcp.task.created', {
      description: 'Tasks created, by the instance that created them.',
      unit: '{task}',
    });
    this.finished = meter.createCounter('mcp.task.finished', {
      description: 'Tasks that reached a terminal status, by the instance that wrote it.',
      unit: '{task}',
    });
    this.duration = meter.createHistogram('mcp.task.duration', {
      description: 'Time from a task’s creation to its terminal status.',
      unit: 's',
    });
    this.inputWait = meter.createHistogram('mcp.task.input_required.duration', {
      description: 'Time a task spent in input_required, each stay from entering to leaving it.',
      unit: 's',
    });
    this.activeRuns = meter.createUpDownCounter('mcp.task.active_runs', {
      description: 'Tool calls running in this process (in-process calls and queue jobs).',
      unit: '{run}',
    });
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
    const { api } = this;
    const active = api.context.active();
    if (api.trace.getSpanContext(active) !== undefined || carrier === undefined) return active;
    const meta = carrier.meta as Record<string, unknown> | null | undefined;
    if (meta !== null && typeof meta === 'object') {
      const fromMeta = this.fromFields(meta);
      if (fromMeta !== undefined) return fromMeta;
    }
    const headers = carrier.headers;
    if (headers === undefined) return active;
    // The app's propagator first (it may speak B3 or another format), then plain W3C.
    const extracted = api.propagation.extract(active, headers, api.defaultTextMapGetter);
    if (api.trace.getSpanContext(extracted) !== undefined) return extracted;
    return this.fromFields(headers) ?? active;
  }

  /** A context whose remote parent is the W3C `traceparent` / `tracestate` of `fields`. */
  fromFields(fields: unknown): Otel.Context | undefined {
    if (fields === null || typeof fields !== 'object') return undefined;
    const { traceparent, tracestate } = fields as Record<string, unknown>;
    if (typeof traceparent !== 'string') return undefined;
    const match = W3C_TRACEPARENT.exec(traceparent.trim().toLowerCase());
    if (match === null || match[1] === 'ff') return undefined;
    const spanContext: Otel.SpanContext = {
      traceId: match[2]!,
      spanId: match[3]!,
      traceFlags: Number.parseInt(match[4]!, 16) & 1,
      isRemote: true,
    };
    if (!this.api.isSpanContextValid(spanContext)) return undefined;
    if (typeof tracestate === 'string' && tracestate.length > 0) {
      spanContext.traceState = this.api.createTraceState(tracestate);
    }
    return this.api.trace.setSpanContext(this.api.ROOT_CONTEXT, spanContext);
  }

  fieldsOf(parent: Otel.Context): TraceFields | undefined {
    const span = this.api.trace.getSpanContext(parent);
    if (span === undefined || !this.api.isSpanContextValid(span)) return undefined;
    const flags = (span.traceFlags & 0xff).toString(16).padStart(2, '0');
    const traceparent = `00-${span.traceId}-${span.spanId}-${flags}`;
    const tracestate = span.traceState?.serialize();
    return tracestate ? { traceparent, tracestate } : { traceparent };
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
