import { jest } from '@jest/globals';
import {
  Controller,
  Get,
  type INestApplication,
  Logger,
  Module,
  Param,
  Post,
  type Type,
  UseFilters,
} from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import {
  DuplicateInputKeyError,
  InvalidTaskParamsError,
  ServerShuttingDownError,
  TaskConflictError,
  TaskStepError,
  TaskError,
  TaskErrorFilter,
  type TaskErrorKind,
  TaskNotFoundError,
  TaskQuotaError,
  TaskTooLargeError,
  TaskTerminalError,
  TasksModule,
  TasksService,
} from '../../src/index.js';
import { TaskInternalError, TaskStoreFullError } from '../../src/entries/store.js';
import { TASK_ERROR_HTTP_STATUS, taskErrorStatus } from '../../src/entries/front.js';
import { ADAPTERS, type AdapterName } from '../support/app.js';
import { mcpRequest, post } from '../support/raw.js';
import { elicit } from '../support/helpers.js';

const alice = { principal: 'alice' };

/** Routes of an ordinary REST controller that reach every kind of TaskError through TasksService. */
function routes() {
  @Controller('jobs')
  class JobsController {
    constructor(private readonly tasks: TasksService) {}

    @Get(':id')
    async get(@Param('id') id: string) {
      return await this.tasks.get(id, alice);
    }

    @Post('invalid')
    async invalid() {
      return await this.tasks.create(alice, { ttlMs: -1 });
    }

    @Post('terminal')
    async terminal() {
      const task = await this.tasks.create(alice);
      await this.tasks.complete(task.taskId, { content: [{ type: 'text', text: 'done' }] });
      return await this.tasks.progress(task.taskId, 'again');
    }

    @Post('duplicate')
    async duplicate() {
      const task = await this.tasks.create(alice);
      await this.tasks.requireInput(task.taskId, { name: elicit('Name?') });
      return await this.tasks.requireInput(task.taskId, { name: elicit('Name again?') });
    }

    @Post('full')
    async full() {
      // Fills the store, whatever the other routes left in it (maxRows 3).
      for (let i = 0; i < 4; i++) await this.tasks.create(alice);
      return 'never';
    }

    @Post('conflict')
    conflict(): never {
      throw new TaskConflictError(64);
    }

    @Post('internal')
    internal(): never {
      throw new TaskInternalError('Task store unavailable', { cause: new Error('ECONNREFUSED') });
    }
  }
  return JobsController;
}

type Way = 'useGlobalFilters' | 'APP_FILTER' | 'UseFilters' | 'none';

function appModule(way: Way): Type<unknown> {
  const controller = routes();
  if (way === 'UseFilters') UseFilters(TaskErrorFilter)(controller);
  @Module({
    imports: [TasksModule.forRoot({ maxRows: 3, janitor: false })],
    controllers: [controller],
    providers: way === 'APP_FILTER' ? [{ provide: APP_FILTER, useClass: TaskErrorFilter }] : [],
  })
  class AppModule {}
  return AppModule;
}

async function start(
  way: Way,
  adapter: AdapterName,
): Promise<{ app: INestApplication; base: string }> {
  const moduleRef = await Test.createTestingModule({ imports: [appModule(way)] }).compile();
  const app = moduleRef.createNestApplication(
    adapter === 'express' ? new ExpressAdapter() : new FastifyAdapter(),
    { forceCloseConnections: true, logger: false },
  );
  if (way === 'useGlobalFilters') app.useGlobalFilters(new TaskErrorFilter());
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return { app, base: `http://127.0.0.1:${port}` };
}

async function call(
  base: string,
  method: 'GET' | 'POST',
  path: string,
): Promise<{ status: number; type: string; body: Record<string, unknown> }> {
  const response = await fetch(`${base}${path}`, { method });
  const text = await response.text();
  return {
    status: response.status,
    type: response.headers.get('content-type') ?? '',
    body: JSON.parse(text) as Record<string, unknown>,
  };
}

const EXPECTED: [string, 'GET' | 'POST', string, Record<string, unknown>][] = [
  [
    'not found',
    'GET',
    '/jobs/no-such-task',
    { statusCode: 404, error: 'Not Found', message: 'Task not found', code: -32602 },
  ],
  [
    'invalid params',
    'POST',
    '/jobs/invalid',
    {
      statusCode: 400,
      error: 'Bad Request',
      message: 'ttlMs must be a positive integer or null, got -1',
      code: -32602,
    },
  ],
  [
    'terminal',
    'POST',
    '/jobs/terminal',
    { statusCode: 409, error: 'Conflict', message: 'Task is already completed', code: -32602 },
  ],
  [
    'duplicate input key',
    'POST',
    '/jobs/duplicate',
    {
      statusCode: 409,
      error: 'Conflict',
      message: 'Input request keys already used by this task: name',
      code: -32602,
      data: { keys: ['name'] },
    },
  ],
  [
    'conflict',
    'POST',
    '/jobs/conflict',
    {
      statusCode: 409,
      error: 'Conflict',
      message: 'Task changed concurrently; gave up after 64 attempts',
      code: -32603,
    },
  ],
  [
    'store full',
    'POST',
    '/jobs/full',
    {
      statusCode: 503,
      error: 'Service Unavailable',
      message: 'Task store is full (maxRows 3)',
      code: -32603,
      data: { limit: 'maxRows', max: 3 },
    },
  ],
  [
    'internal',
    'POST',
    '/jobs/internal',
    {
      statusCode: 503,
      error: 'Service Unavailable',
      message: 'Task store unavailable',
      code: -32603,
    },
  ],
];

describe('taskErrorStatus', () => {
  it('maps every kind: 404, 400, 409, 413, 429, 500, 503', () => {
    const cases: [TaskError, number][] = [
      [new TaskNotFoundError(), 404],
      [new InvalidTaskParamsError('x'), 400],
      [new TaskTerminalError('completed'), 409],
      [new DuplicateInputKeyError(['a']), 409],
      [new TaskConflictError(3), 409],
      [new TaskStoreFullError(5), 503],
      [new TaskQuotaError(5), 429],
      [new TaskTooLargeError(10, 11), 413],
      [new TaskInternalError(), 503],
      [new ServerShuttingDownError(), 503],
      [new TaskStepError('charge', 3, 'Step "charge" failed after 3 attempt(s)'), 500],
    ];
    for (const [error, status] of cases) expect(taskErrorStatus(error)).toBe(status);
    const kinds: TaskErrorKind[] = cases.map(([error]) => error.kind);
    expect(Object.keys(TASK_ERROR_HTTP_STATUS).sort()).toEqual([...kinds].sort());
  });
});

describe.each(ADAPTERS)('TaskErrorFilter over HTTP (%s)', (adapter) => {
  describe.each<Way>(['useGlobalFilters', 'APP_FILTER', 'UseFilters'])(
    'registered by %s',
    (way) => {
      let app: INestApplication;
      let base: string;
      let logged: jest.Spied<Logger['error']>;
      let warned: jest.Spied<Logger['warn']>;
      beforeAll(async () => {
        ({ app, base } = await start(way, adapter));
      });
      afterAll(async () => {
        await app.close();
      });
      beforeEach(() => {
        // The library's code calls Logger instances; app and test loggers are off (test/support/setup.ts).
        logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
        warned = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      });
      afterEach(() => {
        jest.restoreAllMocks();
      });

      it.each(EXPECTED)('%s', async (_kind, method, path, expected) => {
        const answer = await call(base, method, path);
        expect(answer.status).toBe(expected.statusCode);
        expect(answer.type).toMatch(/^application\/json/);
        expect(answer.body).toEqual(expected);
        expect(JSON.stringify(answer.body)).not.toMatch(/stack|\.ts:|ECONNREFUSED/);
        expect(logged).not.toHaveBeenCalled();
        if ((expected.statusCode as number) < 500) expect(warned).not.toHaveBeenCalled();
        else expect(warned).toHaveBeenCalledWith(expect.stringContaining(String(expected.message)));
      });

      it('the MCP endpoint still answers its own JSON-RPC errors', async () => {
        const answer = await post(
          `${base}/mcp`,
          mcpRequest('tasks/get', { taskId: 'no-such-task' }),
        );
        expect(answer.json?.error?.code).toBe(-32602);
        expect(answer.json).not.toHaveProperty('statusCode');
      });
    },
  );

  it('without the filter the same error is a 500 (what the filter is for)', async () => {
    const { app, base } = await start('none', adapter);
    try {
      const answer = await call(base, 'GET', '/jobs/no-such-task');
      expect(answer.status).toBe(500);
    } finally {
      await app.close();
    }
  });
});
