import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Global, Injectable, Module, type DynamicModule } from '@nestjs/common';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  AlwaysOffSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import {
  type QueuedCall,
  TaskQueue,
  TaskTool,
  type TaskContext,
  TasksModule,
  type TasksModuleOptions,
} from '../../src/index.js';
import { connectTasksClient, TaskFailedError, type TasksClient } from '../../src/client/index.js';
import { resolveTasksConfig } from '../../src/tasks.config.js';
import { TasksConfigError } from '../../src/errors.js';
import { TasksTelemetry } from '../../src/telemetry/tasks.telemetry.js';
import { type RunningApp, startApp } from '../support/app.js';
import { testContextFetch } from '../support/official-client.js';
import { eventually } from '../support/sse.js';
import { declaredCapabilities, envelope, parseMessage, standardHeaders } from '../support/wire.js';
import { rejection, sleep } from '../support/helpers.js';

/**
 * Metrics and traces through @opentelemetry/api, on a real app over loopback HTTP with the
 * OpenTelemetry SDK's in-memory exporters: what each instrument records, each run's span and the
 * trace it continues, and `telemetry: false`.
 */

/** Opened by the test to let a `gated` run end. */
let openGate: () => void = () => undefined;

@Injectable()
class Tools {
  @TaskTool({ name: 'add', pollIntervalMs: 50, whenClientLacksTasks: 'inline' })
  async add() {
    await sleep(20);
    return 'sum';
  }

  @TaskTool({ name: 'boom', pollIntervalMs: 50 })
  boom(): string {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'No such report');
  }

  @TaskTool({ name: 'crash', pollIntervalMs: 50 })
  crash(): string {
    throw new Error('a bug with a secret in it');
  }

  @TaskTool({ name: 'ask', pollIntervalMs: 50 })
  async ask(_input: unknown, task: TaskContext) {
    const { name } = await task.requireInput({
      name: {
        method: 'elicitation/create',
        params: {
          mode: 'form',
          message: 'Name?',
          requestedSchema: {
            type: 'object',
            properties: { name: { type: 'string' } },
            required: ['name'],
          },
        },
      },
    });
    return `Hi ${(name.content as { name: string }).name}`;
  }

  @TaskTool({ name: 'gated', pollIntervalMs: 50 })
  async gated(_input: unknown, task: TaskContext) {
    await new Promise<void>((resolve) => {
      openGate = resolve;
      task.signal.addEventListener('abort', () => resolve());
    });
    return 'through';
  }
}

/** The SDK pieces a test reads: metrics on demand, spans as they end. */
class Sdk {
  readonly metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  readonly reader = new PeriodicExportingMetricReader({
    exporter: this.metricExporter,
    exportIntervalMillis: 3_600_000,
  });
  readonly meterProvider = new MeterProvider({ readers: [this.reader] });
  readonly spanExporter = new InMemorySpanExporter();
  readonly tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(this.spanExporter)],
  });

  /** Every metric by name, collected now. */
  async metrics(): Promise<Map<string, MetricData>> {
    const { resourceMetrics } = await this.reader.collect();
    const found = new Map<string, MetricData>();
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) found.set(metric.descriptor.name, metric);
    }
    return found;
  }

  /** The data points of one metric whose attributes include `attributes`. */
  async points(
    name: string,
    attributes: Record<string, unknown> = {},
  ): Promise<DataPoint<unknown>[]> {
    const metric = (await this.metrics()).get(name);
    if (metric === undefined) return [];
    return (metric.dataPoints as DataPoint<unknown>[]).filter((point) =>
      Object.entries(attributes).every(([key, value]) => point.attributes[key] === value),
    );
  }

  /** The sum of a counter's points with these attributes (0 without any). */
  async count(name: string, attributes: Record<string, unknown>): Promise<number> {
    return (await this.points(name, attributes)).reduce((sum, p) => sum + (p.value as number), 0);
  }

  spans(name?: string): ReadableSpan[] {
    return this.spanExporter
      .getFinishedSpans()
      .filter((span) => name === undefined || span.name === name);
  }

  async shutdown(): Promise<void> {
    await this.meterProvider.shutdown();
    await this.tracerProvider.shutdown();
  }
}

function appModule(options: TasksModuleOptions): DynamicModule {
  @Module({
    imports: [TasksModule.forRoot({ janitor: false, ...options })],
    providers: [Tools],
  })
  class TelemetryApp {}
  return { module: TelemetryApp };
}

async function start(options: TasksModuleOptions): Promise<RunningApp> {
  @Module({ imports: [appModule(options)] })
  class Root {}
  return startApp(Root, 'express');
}

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const traceparent = (traceId = TRACE_ID, spanId = '00f067aa0ba902b7') =>
  `00-${traceId}-${spanId}-01`;

/**
 * A tools/call with a `params._meta` of our choice (the W3C keys beside the envelope), from a
 * client with the tasks extension or (`tasks: false`) without it, which the SDK's handler serves
 * inline; `headers` are added to the request's.
 */
async function callWithMeta(
  url: string,
  name: string,
  meta: Record<string, unknown>,
  { tasks = true, headers = {} }: { tasks?: boolean; headers?: Record<string, string> } = {},
) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { ...standardHeaders('tools/call', name), ...headers },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: {
        name,
        arguments: {},
        _meta: { ...envelope(declaredCapabilities(tasks), 'telemetry-e2e'), ...meta },
      },
    }),
  });
  return parseMessage(await response.text())!.result as { taskId?: string; content?: unknown };
}

describe('telemetry through the telemetry option', () => {
  const sdk = new Sdk();
  let app: RunningApp;
  let client: TasksClient;

  beforeAll(async () => {
    app = await start({
      telemetry: { meterProvider: sdk.meterProvider, tracerProvider: sdk.tracerProvider },
    });
    client = await connectTasksClient(app.url, {
      fetch: testContextFetch,
      listen: false,
      onInput: {
        elicitation: async () => {
          await sleep(150);
          return { action: 'accept', content: { name: 'Ada' } };
        },
      },
    });
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await sdk.shutdown();
  });

  it('counts a created and a completed task by tool, with its duration, and traces the run in the client’s trace', async () => {
    const call = await client.callTool('add', {}, { headers: { traceparent: traceparent() } });
    await call.result();
    await eventually(() => (sdk.spans('execute_tool add').length > 0 ? true : undefined));

    expect(await sdk.count('mcp.task.created', { 'gen_ai.tool.name': 'add' })).toBe(1);
    expect(
      await sdk.count('mcp.task.finished', {
        'gen_ai.tool.name': 'add',
        'mcp.task.status': 'completed',
      }),
    ).toBe(1);
    const [duration] = await sdk.points('mcp.task.duration', {
      'gen_ai.tool.name': 'add',
      'mcp.task.status': 'completed',
    });
    const histogram = duration!.value as Histogram;
    expect(histogram.count).toBe(1);
    expect(histogram.sum).toBeGreaterThanOrEqual(0.02);
    expect(histogram.sum).toBeLessThan(5);
    const metrics = await sdk.metrics();
    expect(metrics.get('mcp.task.duration')!.descriptor.unit).toBe('s');
    expect(metrics.get('mcp.task.created')!.descriptor.unit).toBe('{task}');

    const [span] = sdk.spans('execute_tool add');
    expect(span!.spanContext().traceId).toBe(TRACE_ID);
    expect(span!.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(span!.attributes).toEqual({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'add',
      'mcp.task.status': 'completed',
    });
    expect(span!.status.code).toBe(0); // UNSET: fine
    expect(span!.instrumentationScope.name).toBe('nestjs-mcp-tasks');
  });

  it('a failed task: counted as failed, its span ERROR with the task’s error message', async () => {
    const call = await client.callTool('boom', {});
    expect(await rejection(call.result())).toBeInstanceOf(TaskFailedError);
    const crashed = await client.callTool('crash', {});
    expect(await rejection(crashed.result())).toBeInstanceOf(TaskFailedError);
    await eventually(() => (sdk.spans('execute_tool crash').length > 0 ? true : undefined));

    expect(
      await sdk.count('mcp.task.finished', {
        'gen_ai.tool.name': 'boom',
        'mcp.task.status': 'failed',
      }),
    ).toBe(1);
    const [boom] = sdk.spans('execute_tool boom');
    expect(boom!.status).toEqual({ code: 2, message: 'No such report' });
    expect(boom!.attributes['error.type']).toBe(String(ProtocolErrorCode.InvalidParams));
    expect(boom!.attributes['mcp.task.status']).toBe('failed');
    // A thrown error that is no JSON-RPC error: the span says what the client was told.
    const [crash] = sdk.spans('execute_tool crash');
    expect(crash!.status.code).toBe(2);
    expect(crash!.status.message).not.toContain('secret');
    expect(crash!.attributes['error.type']).toBe(String(ProtocolErrorCode.InternalError));
  });

  it('times each stay in input_required, by tool', async () => {
    const call = await client.callTool('ask', {});
    expect((await call.result()).content).toEqual([{ type: 'text', text: 'Hi Ada' }]);
    const [stay] = await sdk.points('mcp.task.input_required.duration', {
      'gen_ai.tool.name': 'ask',
    });
    const histogram = stay!.value as Histogram;
    expect(histogram.count).toBe(1);
    expect(histogram.sum).toBeGreaterThanOrEqual(0.15);
    expect(histogram.sum).toBeLessThan(5);
    expect(
      await sdk.count('mcp.task.finished', {
        'gen_ai.tool.name': 'ask',
        'mcp.task.status': 'completed',
      }),
    ).toBe(1);
  });

  it('the active-runs count goes up while a run is on and back down when it ends', async () => {
    const active = () => sdk.count('mcp.task.active_runs', { 'gen_ai.tool.name': 'gated' });
    const call = await client.callTool('gated', {});
    await eventually(async () => ((await active()) === 1 ? true : undefined));
    openGate();
    await call.result();
    await eventually(async () => ((await active()) === 0 ? true : undefined));
  });

  it('a cancelled task: counted as cancelled; its span is no error', async () => {
    const call = await client.callTool('gated', {}, { headers: { traceparent: traceparent() } });
    await call.cancel();
    await eventually(async () =>
      (await sdk.count('mcp.task.finished', {
        'gen_ai.tool.name': 'gated',
        'mcp.task.status': 'cancelled',
      })) === 1
        ? true
        : undefined,
    );
    await eventually(() =>
      sdk.spans('execute_tool gated').some((s) => s.attributes['mcp.task.status'] === 'cancelled')
        ? true
        : undefined,
    );
    const span = sdk
      .spans('execute_tool gated')
      .find((s) => s.attributes['mcp.task.status'] === 'cancelled')!;
    expect(span.status.code).not.toBe(2);
  });

  it('continues the trace a request names in params._meta (traceparent, tracestate)', async () => {
    const traceId = 'a'.repeat(31) + 'b';
    await callWithMeta(app.url, 'add', {
      traceparent: traceparent(traceId, '1111111111111111'),
      tracestate: 'vendor=value',
    });
    const span = await eventually(() =>
      sdk.spans('execute_tool add').find((s) => s.spanContext().traceId === traceId),
    );
    expect(span.parentSpanContext?.spanId).toBe('1111111111111111');
    expect(span.parentSpanContext?.traceState?.get('vendor')).toBe('value');
  });

  it('a client without the tasks extension (run inline by the SDK’s handler): the run continues the trace of its _meta, else of its headers', async () => {
    const fromMeta = 'c'.repeat(31) + 'd';
    const inline = await callWithMeta(
      app.url,
      'add',
      { traceparent: traceparent(fromMeta, '2222222222222222') },
      { tasks: false, headers: { traceparent: traceparent('e'.repeat(32)) } },
    );
    expect(inline.taskId).toBeUndefined();
    expect(inline.content).toBeDefined();
    const span = await eventually(() =>
      sdk.spans('execute_tool add').find((s) => s.spanContext().traceId === fromMeta),
    );
    expect(span.parentSpanContext?.spanId).toBe('2222222222222222');

    const fromHeader = 'f'.repeat(31) + '0';
    await callWithMeta(
      app.url,
      'add',
      {},
      { tasks: false, headers: { traceparent: traceparent(fromHeader, '3333333333333333') } },
    );
    const headerSpan = await eventually(() =>
      sdk.spans('execute_tool add').find((s) => s.spanContext().traceId === fromHeader),
    );
    expect(headerSpan.parentSpanContext?.spanId).toBe('3333333333333333');
  });
});

describe('telemetry with spans sampled out', () => {
  const sdk = new Sdk();
  const sampledOut = new BasicTracerProvider({
    sampler: new AlwaysOffSampler(),
    spanProcessors: [new SimpleSpanProcessor(sdk.spanExporter)],
  });
  let app: RunningApp;
  let client: TasksClient;

  beforeAll(async () => {
    app = await start({
      telemetry: { meterProvider: sdk.meterProvider, tracerProvider: sampledOut },
    });
    client = await connectTasksClient(app.url, { fetch: testContextFetch, listen: false });
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await sampledOut.shutdown();
    await sdk.shutdown();
  });

  it('still counts active runs, run after run (the runs keep no span), and exports no span', async () => {
    const active = () => sdk.count('mcp.task.active_runs', { 'gen_ai.tool.name': 'gated' });
    for (let run = 0; run < 2; run++) {
      const call = await client.callTool('gated', {});
      await eventually(async () => ((await active()) === 1 ? true : undefined));
      openGate();
      await call.result();
      await eventually(async () => ((await active()) === 0 ? true : undefined));
    }
    expect(
      await sdk.count('mcp.task.finished', {
        'gen_ai.tool.name': 'gated',
        'mcp.task.status': 'completed',
      }),
    ).toBe(2);
    expect(sdk.spans()).toEqual([]);
  });
});

const enqueued: QueuedCall[] = [];

/** A queue that keeps the calls it is handed (no worker runs them). */
@Global()
@Module({
  providers: [
    {
      provide: TaskQueue,
      useValue: {
        enqueue: async (_queue: unknown, call: QueuedCall) => void enqueued.push(call),
      },
    },
  ],
  exports: [TaskQueue],
})
class KeepingQueueModule {}

@Injectable()
class QueuedTools {
  @TaskTool({ name: 'queued', queue: 'telemetry' })
  queued(): string {
    return 'never run here';
  }
}

/** Where @opentelemetry/api 1.x keeps what an SDK registers. */
const OTEL_GLOBALS = Symbol.for('opentelemetry.js.api.1');

describe('telemetry before any SDK registers', () => {
  const sdk = new Sdk();
  let app: RunningApp;
  let client: TasksClient;

  beforeAll(async () => {
    // The describes before this one pass their providers in the option: nothing is registered.
    expect((globalThis as Record<symbol, unknown>)[OTEL_GLOBALS]).toBeUndefined();
    @Module({ imports: [KeepingQueueModule, appModule({})], providers: [QueuedTools] })
    class Root {}
    app = await startApp(Root, 'express');
    client = await connectTasksClient(app.url, { fetch: testContextFetch, listen: false });
  });

  afterAll(async () => {
    metrics.disable();
    trace.disable();
    await client?.close();
    await app?.close();
    await sdk.shutdown();
  });

  it('waits with the API unloaded, yet a queued call carries the trace its request names', async () => {
    expect(app.app.get(TasksTelemetry).enabled).toBe(false);
    const traceId = '5'.repeat(31) + '6';
    await callWithMeta(app.url, 'queued', {
      traceparent: traceparent(traceId, '4444444444444444'),
      tracestate: 'vendor=value',
    });
    await callWithMeta(
      app.url,
      'queued',
      {},
      { headers: { traceparent: traceparent(TRACE_ID, '5555555555555555') } },
    );
    await callWithMeta(app.url, 'queued', {});
    expect(enqueued.map((call) => call.trace)).toEqual([
      { traceparent: traceparent(traceId, '4444444444444444'), tracestate: 'vendor=value' },
      { traceparent: traceparent(TRACE_ID, '5555555555555555') },
      undefined,
    ]);
    expect(app.app.get(TasksTelemetry).enabled).toBe(false);
  });

  it('records with the global providers once an SDK registers after the app started', async () => {
    metrics.setGlobalMeterProvider(sdk.meterProvider);
    trace.setGlobalTracerProvider(sdk.tracerProvider);
    // The first hook after the registration loads the API; calls until it has loaded go unseen.
    await eventually(async () => {
      await (await client.callTool('add', {})).result();
      return app.app.get(TasksTelemetry).enabled ? true : undefined;
    });
    const created = () => sdk.count('mcp.task.created', { 'gen_ai.tool.name': 'add' });
    const before = await created();
    const traceId = '7'.repeat(31) + '8';
    await (
      await client.callTool('add', {}, { headers: { traceparent: traceparent(traceId) } })
    ).result();
    const span = await eventually(() =>
      sdk.spans('execute_tool add').find((s) => s.spanContext().traceId === traceId),
    );
    expect(span.parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
    expect(await created()).toBe(before + 1);
  });
});

describe('telemetry through the global providers', () => {
  const sdk = new Sdk();
  const contextManager = new AsyncLocalStorageContextManager();

  beforeAll(() => {
    contextManager.enable();
    context.setGlobalContextManager(contextManager);
    metrics.setGlobalMeterProvider(sdk.meterProvider);
    trace.setGlobalTracerProvider(sdk.tracerProvider);
  });

  afterAll(async () => {
    metrics.disable();
    trace.disable();
    context.disable();
    propagation.disable();
    await sdk.shutdown();
  });

  it('records with the global providers, and parents a run on the active context of the request', async () => {
    // What OpenTelemetry's HTTP instrumentation does: the request runs in a context with its span.
    const tracer = trace.getTracer('test-http');
    const running = await startApp(
      (() => {
        @Module({ imports: [appModule({ telemetry: { recordTaskIds: true } })] })
        class Root {}
        return Root;
      })(),
      'express',
      '/mcp',
      (nest) =>
        nest.use((_req: unknown, _res: unknown, next: () => void) => {
          const span = tracer.startSpan('POST /mcp');
          context.with(trace.setSpan(context.active(), span), next);
          span.end();
        }),
    );
    const client = await connectTasksClient(running.url, {
      fetch: testContextFetch,
      listen: false,
    });
    try {
      const call = await client.callTool('add', {});
      await call.result();
      const run = await eventually(() => sdk.spans('execute_tool add')[0]);
      const request = sdk
        .spans('POST /mcp')
        .find((s) => s.spanContext().spanId === run.parentSpanContext?.spanId);
      expect(request?.spanContext().traceId).toBe(run.spanContext().traceId);
      expect(request).toBeDefined();
      expect(run.attributes['mcp.task.id']).toBe(call.taskId);
      expect(await sdk.count('mcp.task.created', { 'gen_ai.tool.name': 'add' })).toBe(1);
    } finally {
      await client.close();
      await running.close();
    }
  });

  it('telemetry: false records nothing, with global providers in place', async () => {
    const before = sdk.spans().length;
    const createdBefore = await sdk.count('mcp.task.created', {});
    const app = await start({ telemetry: false });
    const client = await connectTasksClient(app.url, { fetch: testContextFetch, listen: false });
    try {
      const call = await client.callTool('add', {}, { headers: { traceparent: traceparent() } });
      await call.result();
      const failed = await client.callTool('boom', {});
      await rejection(failed.result());
      await sleep(50);
      expect(await sdk.count('mcp.task.created', {})).toBe(createdBefore);
      expect(await sdk.count('mcp.task.finished', { 'gen_ai.tool.name': 'boom' })).toBe(0);
      expect(sdk.spans().length).toBe(before);
    } finally {
      await client.close();
      await app.close();
    }
  });
});

describe('the telemetry option', () => {
  it('is checked at startup, naming the key', () => {
    const bad = (telemetry: unknown) =>
      (() => {
        try {
          resolveTasksConfig({ telemetry } as TasksModuleOptions);
        } catch (error) {
          return error;
        }
        return undefined;
      })();
    expect(bad(true)).toBeInstanceOf(TasksConfigError);
    expect((bad(true) as Error).message).toBe('telemetry must be an object or false, got true');
    expect((bad({ meterProvider: {} }) as Error).message).toMatch(
      /^telemetry\.meterProvider must be/,
    );
    expect((bad({ tracerProvider: null }) as Error).message).toMatch(
      /^telemetry\.tracerProvider must be/,
    );
    expect((bad({ recordTaskIds: 'yes' }) as Error).message).toMatch(/^telemetry\.recordTaskIds/);
    expect((bad({ meter: {} }) as Error).message).toMatch(/telemetry\.meter is not an option/);
    expect(resolveTasksConfig({}).telemetry).toEqual({});
    expect(resolveTasksConfig({ telemetry: false }).telemetry).toBe(false);
  });
});
