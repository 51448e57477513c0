import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable, Module } from '@nestjs/common';
import { BullModule } from '@nestjs/bullmq';
import { Test } from '@nestjs/testing';
import { TasksQueueModule } from '../../src/bullmq/index.js';
import { TasksConfigError } from '../../src/errors.js';
import { TaskTool, TasksModule } from '../../src/index.js';
import { type RunningApp, startApp } from '../support/app.js';
import { connectOfficialClient, type OfficialClient, textOf } from '../support/official-client.js';
import { rpc } from '../support/sse.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

/**
 * Issue 35, item 1: arguments never vanish. A `@TaskTool()` without `input` gets the client's
 * arguments as sent (and says so in tools/list: an open object schema), in process and on a
 * BullMQ queue alike; an `input` class without class-validator metadata fails the boot, naming
 * the class, the tool and the fix. Real HTTP on loopback, the official client, real Redis.
 */

const QUEUE = 'newcomer-args';

interface Sum {
  a: number;
  b: number;
}

const sum = ({ a, b }: Sum) => ({ content: [{ type: 'text' as const, text: String(a + b) }] });

@Injectable()
class AddTools {
  // No `input`: what a reader of @nestjs/microservices' `@Payload()` writes first.
  @TaskTool({ name: 'add', whenClientLacksTasks: 'inline', pollIntervalMs: 50 })
  add(input: Sum) {
    return sum(input);
  }

  @TaskTool({ name: 'add_queued', queue: QUEUE, pollIntervalMs: 50 })
  addQueued(input: Sum) {
    return sum(input);
  }
}

/** A DTO written for Swagger or by habit: properties, but no class-validator decorator on any. */
class UndecoratedInput {
  a!: number;
  b!: number;
}

@Injectable()
class UndecoratedTools {
  @TaskTool({ name: 'add_dto', input: UndecoratedInput })
  add(input: UndecoratedInput) {
    return sum(input);
  }
}

let redis: TestRedis;
let running: RunningApp;
let official: OfficialClient;

beforeAll(async () => {
  redis = await startTestRedis({ persistence: false });
  @Module({
    imports: [
      BullModule.forRoot({
        connection: { host: '127.0.0.1', port: redis.port },
        prefix: `newcomer-${process.pid}`,
      }),
      BullModule.registerQueue({ name: QUEUE }),
      TasksModule.forRoot({ janitor: false, shutdown: { drainMs: 0 } }),
      TasksQueueModule.forRoot(),
    ],
    providers: [AddTools],
  })
  class AppModule {}
  running = await startApp(AppModule, 'express');
  official = await connectOfficialClient(running.url, { principal: 'alice' });
}, 30_000);

afterAll(async () => {
  await official?.close();
  await running?.close();
  await redis?.stop();
});

const settledText = async (tool: string, args: Record<string, number>): Promise<string> => {
  const execution = await official.session.callTool(tool, args);
  expect(execution.kind).toBe('task');
  const { outcome } = await execution.settle();
  if (outcome.status !== 'completed') throw new Error(`${tool} ended ${outcome.status}`);
  return textOf(outcome.result);
};

describe('a @TaskTool without input', () => {
  it('gets the arguments as sent: add {a: 2, b: 3} completes with "5"', async () => {
    expect(await settledText('add', { a: 2, b: 3 })).toBe('5');
  });

  it('gets them on the queue-run path too (BullMQ worker in this process)', async () => {
    expect(await settledText('add_queued', { a: 2, b: 3 })).toBe('5');
  });

  it('gets them when it runs inline for a client without the tasks extension', async () => {
    const answer = await rpc(
      running.url,
      'tools/call',
      { name: 'add', arguments: { a: 20, b: 22 } },
      { principal: 'alice', declareTasks: false },
    );
    expect(answer.body.result).toMatchObject({ content: [{ type: 'text', text: '42' }] });
  });

  it('is listed with an open object schema', async () => {
    const { tools } = await official.client.listTools();
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    expect(byName.get('add')?.inputSchema).toEqual({ type: 'object' });
    expect(byName.get('add_queued')?.inputSchema).toEqual({ type: 'object' });
  });

  it('still refuses a __proto__ key and arguments that are not an object', async () => {
    const hostile = JSON.parse('{"a": 2, "b": {"__proto__": {"polluted": true}}}') as object;
    const proto = await rpc(
      running.url,
      'tools/call',
      { name: 'add', arguments: hostile },
      { principal: 'alice', declareTasks: true },
    );
    expect(proto.status).toBe(200);
    expect(proto.body.result).toMatchObject({
      isError: true,
      content: [
        { text: expect.stringContaining('b.__proto__: property __proto__ is not allowed') },
      ],
    });
    const list = await rpc(
      running.url,
      'tools/call',
      { name: 'add', arguments: [2, 3] },
      { principal: 'alice', declareTasks: true },
    );
    expect(list.body.error).toMatchObject({ code: -32602 });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('an input class without class-validator metadata', () => {
  it('fails the boot, naming the class, the tool and what to add', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [TasksModule.forRoot({ janitor: false })],
      providers: [UndecoratedTools],
    }).compile();
    const error = await moduleRef.init().then(
      async (app) => {
        await app.close();
        throw new Error('expected the boot to fail');
      },
      (failure: Error) => failure,
    );
    expect(error).toBeInstanceOf(TasksConfigError);
    expect(error.message).toContain('UndecoratedInput');
    expect(error.message).toContain('"add_dto"');
    expect(error.message).toContain('@IsNumber()');
    expect(error.message).toContain('@Allow()');
    expect(error.message).toContain('drop `input`');
  });
});
