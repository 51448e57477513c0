import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Module } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { TasksHealthIndicator, TasksHealthModule } from '../../src/health/index.js';
import { TasksModule } from '../../src/index.js';
import { RedisTaskStore, redisNotifier } from '../../src/redis/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { eventually } from '../support/sse.js';
import { startTestRedis, type TestRedis } from '../support/redis-server.js';

/**
 * `GET /health` of an app on RedisTaskStore and the Redis notifier, on a private redis-server:
 * healthy while Redis is up, unhealthy within the indicator's timeout once it is killed, healthy
 * again once it is back.
 */

/** The indicator's timeout in this app. */
const TIMEOUT_MS = 500;
/** What an answer may take beyond the timeout: the HTTP round trip and terminus itself. */
const MARGIN_MS = 250;

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly tasksHealth: TasksHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () => this.tasksHealth.isHealthy('tasks', { timeoutMs: TIMEOUT_MS }),
    ]);
  }
}

let redis: TestRedis;
let running: RunningApp;
let healthUrl: string;

interface HealthAnswer {
  code: number;
  body: {
    status: string;
    info?: Record<string, Record<string, unknown>>;
    error?: Record<string, Record<string, unknown>>;
    details: Record<string, Record<string, unknown>>;
  };
  ms: number;
}

async function health(): Promise<HealthAnswer> {
  const started = Date.now();
  const response = await fetch(healthUrl);
  const body = (await response.json()) as HealthAnswer['body'];
  return { code: response.status, body, ms: Date.now() - started };
}

beforeAll(async () => {
  redis = await startTestRedis();
  // Each run gets its own keys and channel, also on a shared REDIS_URL.
  const options = { connection: redis.url, prefix: `e2e-health-${process.pid}-${Date.now()}:` };

  @Module({
    imports: [
      TasksModule.forRoot({
        store: new RedisTaskStore(options),
        notifier: redisNotifier(options),
        janitor: false,
      }),
      TerminusModule,
      TasksHealthModule,
    ],
    controllers: [HealthController],
  })
  class HealthApp {}

  running = await startApp(HealthApp, 'express');
  healthUrl = running.url.replace(/\/mcp$/, '/health');
});

afterAll(async () => {
  await running?.close();
  await redis?.stop();
});

describe('GET /health on Redis', () => {
  it('is 200 with the tasks indicator up while Redis is up', async () => {
    const answer = await eventually(async () => {
      const current = await health();
      return current.code === 200 ? current : undefined;
    });
    expect(answer.body.status).toBe('ok');
    expect(answer.body.details.tasks).toEqual({
      status: 'up',
      store: 'RedisTaskStore',
      notifier: 'redis',
      storeLatencyMs: expect.any(Number),
    });
    expect(answer.body.details.tasks!.storeLatencyMs).toBeLessThan(TIMEOUT_MS);
  });

  // This test stops the private server; with REDIS_URL (a server that is not ours) it does nothing.
  const ownRedis = process.env.REDIS_URL ? it.skip : it;

  ownRedis(
    'is 503 with the indicator down within its timeout once Redis is killed, 200 once it is back',
    async () => {
      await redis.kill();
      const killedAt = Date.now();
      const down = await health();
      const untilDown = Date.now() - killedAt;
      expect(down.code).toBe(503);
      expect(down.body.status).toBe('error');
      expect(down.body.error?.tasks).toMatchObject({
        status: 'down',
        store: 'RedisTaskStore',
        notifier: 'redis',
        reason: expect.any(String),
      });
      const reason = down.body.error!.tasks!.reason as string;
      expect(reason).not.toContain('\n');
      expect(reason.length).toBeLessThanOrEqual(200);
      expect(down.ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
      expect(untilDown).toBeLessThan(TIMEOUT_MS + MARGIN_MS);

      // Every answer while Redis is away is down, each within the timeout.
      for (let i = 0; i < 3; i++) {
        const again = await health();
        expect([again.code, again.body.error?.tasks?.status]).toEqual([503, 'down']);
        expect(again.ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
      }

      await redis.start();
      const back = await eventually(
        async () => {
          const current = await health();
          return current.code === 200 ? current : undefined;
        },
        10_000,
        'a healthy answer after the restart',
      );
      expect(back.body.details.tasks).toMatchObject({ status: 'up', notifier: 'redis' });
    },
    30_000,
  );
});
