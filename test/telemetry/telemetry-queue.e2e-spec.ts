import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, Module } from '@nestjs/common';
import { BullModule } from '@nestjs/bullmq';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { TasksQueueModule } from '../../src/bullmq/index.js';
import { TaskTool, TasksModule } from '../../src/index.js';
import { connectTasksClient, type TasksClient } from '../../src/client/index.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';
import { type RunningApp, startApp } from '../support/app.js';
import { testContextFetch } from '../support/official-client.js';
import { eventually } from '../support/sse.js';

/**
 * A queue-run tool's job carries the request's W3C trace context (`QueuedCall.trace`): the span of
 * the run, made by the worker that takes the job, continues the trace the client sent.
 */

@Injectable()
class QueuedTools {
  @TaskTool({ name: 'queued_report', queue: 'telemetry', pollIntervalMs: 50 })
  report() {
    return 'report ready';
  }
}

describe('telemetry of a queue-run tool', () => {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  let redis: TestRedis;
  let app: RunningApp;
  let client: TasksClient;

  beforeAll(async () => {
    redis = await startTestRedis();
    @Module({
      imports: [
        BullModule.forRoot({
          connection: { host: '127.0.0.1', port: redis.port },
          prefix: `telemetry-${process.pid}`,
        }),
        BullModule.registerQueue({ name: 'telemetry' }),
        TasksQueueModule.forRoot(),
        TasksModule.forRoot({ janitor: false, telemetry: { tracerProvider } }),
      ],
      providers: [QueuedTools],
    })
    class QueueApp {}
    app = await startApp(QueueApp, 'express');
    client = await connectTasksClient(app.url, { fetch: testContextFetch, listen: false });
  }, 60_000);

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await redis?.stop();
    await tracerProvider.shutdown();
  });

  it('the worker’s span of the job continues the trace of the call', async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const call = await client.callTool(
      'queued_report',
      {},
      { headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } },
    );
    expect((await call.result()).content).toEqual([{ type: 'text', text: 'report ready' }]);
    const span = await eventually(() =>
      exporter.getFinishedSpans().find((s) => s.name === 'execute_tool queued_report'),
    );
    expect(span.spanContext().traceId).toBe(traceId);
    expect(span.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(span.attributes['mcp.task.status']).toBe('completed');
  });
});
