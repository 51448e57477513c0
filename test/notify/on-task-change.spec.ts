import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, type INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { OnTaskChange, type TaskRecord, TasksModule, TasksService } from '../../src/index.js';
import { ListenNotifier, TaskNotifier } from '../../src/entries/store.js';

/** `@OnTaskChange()`: every write this process makes, beside the notifier, which stays. */

@Injectable()
class Audit {
  readonly heard: TaskRecord[] = [];

  @OnTaskChange()
  record(task: TaskRecord) {
    this.heard.push(task);
  }
}

@Injectable()
class Broken {
  calls = 0;

  @OnTaskChange()
  throws() {
    this.calls++;
    throw new Error('the audit sink is down');
  }

  @OnTaskChange()
  async rejects() {
    this.calls++;
    throw new Error('the metrics sink is down');
  }
}

/** Inherits its listener: only the parent class carries the decorator. */
@Injectable()
class InheritedAudit extends Audit {}

const apps: INestApplicationContext[] = [];

async function boot(providers: unknown[]): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({
    imports: [TasksModule.forRoot({ janitor: false })],
    providers: providers as never[],
  }).compile();
  const app = await moduleRef.init();
  apps.push(app);
  return app;
}

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
});

describe('@OnTaskChange', () => {
  it('hears every write in order, the creation included, with the default notifier kept', async () => {
    const app = await boot([Audit]);
    const tasks = app.get(TasksService);
    const owner = { principal: 'alice' };
    const created = await tasks.create(owner);
    await tasks.progress(created.taskId, 'halfway');
    await tasks.progress(created.taskId, 'halfway');
    const done = await tasks.complete(created.taskId, { content: [] });
    const heard = app.get(Audit).heard;
    expect(heard.map((task) => [task.status, task.statusMessage])).toEqual([
      ['working', undefined],
      ['working', 'halfway'],
      ['completed', 'halfway'],
    ]);
    const versions = heard.map((task) => task.version);
    expect(versions[0]).toBe(1);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(3);
    expect(heard.at(-1)).toEqual(done);
    expect(app.get(TaskNotifier)).toBeInstanceOf(ListenNotifier);
  });

  it('a listener that throws or rejects changes nothing: the write stands, the others still hear', async () => {
    const app = await boot([Broken, Audit]);
    const tasks = app.get(TasksService);
    const created = await tasks.create({ principal: 'bob' });
    const done = await tasks.complete(created.taskId, { content: [] });
    expect(done.status).toBe('completed');
    expect((await tasks.status(created.taskId)).status).toBe('completed');
    expect(app.get(Broken).calls).toBe(4);
    expect(app.get(Audit).heard).toHaveLength(2);
  });

  it('a subclass hears through the listener it inherits', async () => {
    const app = await boot([InheritedAudit]);
    const created = await app.get(TasksService).create({ principal: 'carol' });
    expect(app.get(InheritedAudit).heard.map((task) => task.taskId)).toEqual([created.taskId]);
  });
});
