/**
 * The app of test/http/throttler.e2e-spec.ts, run by Node itself from the compiled copy in
 * .build/throttler: `@nestjs/throttler` 6 is CommonJS and loads `@nestjs/common` 12 (ES modules
 * only) through Node's require(esm), which Jest's module runtime does not do before Node 24.9.
 *
 * It is the recipe of docs/rate-limits.md: a ThrottlerGuard keyed by principal in front of the
 * endpoint, with a per-principal limit and a per-task `tasks/get` limit of one per poll interval.
 * `ADAPTER` (express | fastify) picks the HTTP adapter; `MODE=global` makes the auth guard and
 * the ThrottlerGuard global guards (APP_GUARD) instead of the endpoint's `guards`, beside a REST
 * route. It prints one JSON line, `{"event":"ready","port":…}`, once it listens.
 */
import 'reflect-metadata';
import { createHash } from 'node:crypto';
import { Controller, type ExecutionContext, Get, Injectable, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { defaultPrincipal, type TaskContext, TasksModule, TaskTool } from '../../../src/index.js';
import { BearerGuard } from '../../support/bearer.guard.js';

const globalGuards = process.env.MODE === 'global';

/** Requests per principal per minute (low, so that the test reaches it). */
export const PRINCIPAL_LIMIT = Number(process.env.PRINCIPAL_LIMIT ?? 8);
/** The poll interval the task tool suggests, and the fastest one task may be polled. */
export const POLL_INTERVAL_MS = 3_000;

@Injectable()
class Tools {
  @TaskTool({ name: 'wait_for_cancel', pollIntervalMs: POLL_INTERVAL_MS })
  async waitForCancel(_input: unknown, task: TaskContext): Promise<never> {
    await new Promise((resolve) => task.signal.addEventListener('abort', resolve));
    throw task.signal.reason;
  }

  /** Works for one and a half poll intervals, then answers: a client polls it about twice. */
  @TaskTool({ name: 'finish_soon', pollIntervalMs: POLL_INTERVAL_MS })
  async finishSoon(_input: unknown, task: TaskContext) {
    await task.progress('working');
    await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS * 1.5));
    return { content: [{ type: 'text' as const, text: 'done' }] };
  }
}

/** A REST route of the same app (MODE=global): its 429 stays Nest's own. */
@Controller('ping')
class PingController {
  @Get()
  ping(): { pong: true } {
    return { pong: true };
  }
}

// ----- the recipe of docs/rate-limits.md ------------------------------------------------------

/** The JSON-RPC request of a call to the endpoint: its body, parsed before any guard runs. */
function rpcOf(context: ExecutionContext): { method?: unknown; params?: { taskId?: unknown } } {
  const { body } = context.switchToHttp().getRequest<{ body?: unknown }>();
  return body !== null && typeof body === 'object' ? body : {};
}

const rateLimits = ThrottlerModule.forRoot({
  // Each principal has its own budget (anonymous callers one per address).
  getTracker: (req) => {
    const principal = defaultPrincipal(req);
    return principal === null ? `ip:${String(req.ip)}` : `principal:${principal}`;
  },
  throttlers: [
    { name: 'principal', ttl: 60_000, limit: PRINCIPAL_LIMIT },
    {
      // One `tasks/get` of a given task per poll interval and principal.
      name: 'poll',
      ttl: POLL_INTERVAL_MS,
      limit: 1,
      // No block: a poll that came too early does not push the next one back.
      blockDuration: 0,
      skipIf: (context) => rpcOf(context).method !== 'tasks/get',
      generateKey: (context, tracker, name) =>
        createHash('sha256')
          .update(`${name}\n${tracker}\n${String(rpcOf(context).params?.taskId)}`)
          .digest('hex'),
    },
  ],
});

@Module({
  imports: [
    rateLimits,
    TasksModule.forRoot(globalGuards ? {} : { guards: [BearerGuard, ThrottlerGuard] }),
  ],
  controllers: globalGuards ? [PingController] : [],
  providers: [
    Tools,
    ...(globalGuards
      ? [
          { provide: APP_GUARD, useClass: BearerGuard },
          { provide: APP_GUARD, useClass: ThrottlerGuard },
        ]
      : []),
  ],
})
class AppModule {}

// ----- boot -----------------------------------------------------------------------------------

async function main(): Promise<void> {
  const adapter = process.env.ADAPTER === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
  const app = await NestFactory.create(AppModule, adapter, {
    logger: process.env.FIXTURE_LOG ? ['error', 'warn', 'log'] : false,
    forceCloseConnections: true,
  });
  app.enableShutdownHooks();
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  process.stdout.write(`${JSON.stringify({ event: 'ready', port })}\n`);
}

main().catch((error: unknown) => {
  process.stdout.write(`${JSON.stringify({ event: 'crashed', error: String(error) })}\n`);
  process.exit(1);
});
