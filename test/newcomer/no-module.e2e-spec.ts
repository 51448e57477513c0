import { afterEach, describe, expect, it } from '@jest/globals';
import {
  type INestApplication,
  Injectable,
  type LoggerService,
  Module,
  type OnApplicationBootstrap,
  Scope,
  type Type,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TaskTool, TasksModule } from '../../src/index.js';

/**
 * Issue 35, item 2: a `@TaskTool` provider in an app without TasksModule gets one boot warning
 * naming its class and the fix, instead of an app that boots without a word and answers 404 on
 * /mcp. An app with TasksModule gets none, its providers' own bootstrap hooks run as before, and
 * transient providers (one instance per consumer) are seen too.
 */

/** Every line the app logs, with its level and context. */
class CapturingLogger implements LoggerService {
  readonly lines: { level: string; message: string; context?: string }[] = [];
  private record(level: string, message: unknown, context?: unknown): void {
    this.lines.push({
      level,
      message: String(message),
      ...(typeof context === 'string' && { context }),
    });
  }
  log(message: unknown, context?: unknown) {
    this.record('log', message, context);
  }
  warn(message: unknown, context?: unknown) {
    this.record('warn', message, context);
  }
  error(message: unknown, context?: unknown) {
    this.record('error', message, context);
  }
  debug(message: unknown, context?: unknown) {
    this.record('debug', message, context);
  }
  verbose(message: unknown, context?: unknown) {
    this.record('verbose', message, context);
  }
  fatal(message: unknown, context?: unknown) {
    this.record('fatal', message, context);
  }

  /** The warnings that speak of TasksModule. */
  get moduleWarnings(): string[] {
    return this.lines
      .filter((line) => line.level === 'warn' && line.message.includes('TasksModule'))
      .map((line) => line.message);
  }
}

const apps: INestApplication[] = [];

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
});

/** Boots `providers` (and `imports`) on real HTTP on loopback, logging into a fresh logger. */
async function boot(providers: Type[], imports: unknown[] = []): Promise<CapturingLogger> {
  @Module({ imports: imports as never[], providers })
  class AppModule {}
  const logger = new CapturingLogger();
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication({ logger, forceCloseConnections: true });
  apps.push(app);
  await app.listen(0, '127.0.0.1');
  return logger;
}

const tasksModule = () => TasksModule.forRoot({ janitor: false, shutdown: { drainMs: 0 } });

@Injectable()
class ReportTools {
  @TaskTool({ name: 'report' })
  report() {
    return { content: [] };
  }

  @TaskTool({ name: 'export' })
  export() {
    return { content: [] };
  }
}

@Injectable()
class ServedTools {
  @TaskTool({ name: 'served' })
  served() {
    return { content: [] };
  }
}

/** Counts its own bootstrap hook's runs: the warning check must leave it as it is. */
@Injectable()
class HookedTools implements OnApplicationBootstrap {
  static boots = 0;
  onApplicationBootstrap() {
    HookedTools.boots++;
  }

  @TaskTool({ name: 'hooked' })
  hooked() {
    return { content: [] };
  }
}

/** Inherits a bootstrap hook of its parent and adds a tool. */
@Injectable()
class HookedChildTools extends HookedTools {
  @TaskTool({ name: 'hooked_child' })
  child() {
    return { content: [] };
  }
}

@Injectable({ scope: Scope.TRANSIENT })
class TransientTools {
  @TaskTool({ name: 'transient' })
  transient() {
    return { content: [] };
  }
}

@Injectable()
class TransientConsumer {
  constructor(readonly tools: TransientTools) {}
}

describe('a @TaskTool provider without TasksModule', () => {
  it('logs one warning naming the class, its tools and the fix', async () => {
    const logger = await boot([ReportTools]);
    expect(logger.moduleWarnings).toEqual([
      'ReportTools has @TaskTool methods (report, export), but no TasksModule in this app serves them: import TasksModule.forRoot() (or forRootAsync) in the app module',
    ]);
    expect(logger.lines.find((line) => line.level === 'warn')?.context).toBe('TaskTool');
  });

  it('warns for a subclass, and the hooks of the classes still run once each boot', async () => {
    const before = HookedTools.boots;
    const logger = await boot([HookedChildTools]);
    expect(logger.moduleWarnings).toEqual([
      expect.stringMatching(/^HookedChildTools has @TaskTool methods \(child, hooked\), but no/),
    ]);
    expect(HookedTools.boots).toBe(before + 1);
  });
});

describe('a @TaskTool provider with TasksModule', () => {
  it('logs no warning, for plain, hooked, inherited and transient providers', async () => {
    const before = HookedTools.boots;
    const logger = await boot(
      [ServedTools, HookedChildTools, TransientTools, TransientConsumer],
      [tasksModule()],
    );
    expect(logger.moduleWarnings).toEqual([]);
    expect(logger.lines.filter((line) => line.level === 'warn' || line.level === 'error')).toEqual(
      [],
    );
    expect(HookedTools.boots).toBe(before + 1);
  });
});
