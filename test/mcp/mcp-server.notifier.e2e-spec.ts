/**
 * McpServerNotifier: a change of the app's plain surface, announced from an injected provider or
 * from `configure`, reaches the listen streams that asked for it (and only those).
 */
import { Module } from '@nestjs/common';
import { TasksModule } from '../../src/index.js';
import { McpServerNotifier } from '../../src/entries/front.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { Catalogue, CatalogueModule } from './catalogue.js';
import { openListen } from '../support/sse.js';

@Module({
  imports: [
    TasksModule.forRoot({
      principal: () => 'alice',
      // A prompt, so the server advertises prompts and listen streams may ask for their changes.
      configure: (server) =>
        server.registerPrompt('hello', { description: 'Says hello' }, () => ({ messages: [] })),
    }),
    CatalogueModule,
  ],
})
class AppModule {}

describe.each(ADAPTERS)('McpServerNotifier (%s)', (adapter) => {
  let app: RunningApp;
  beforeEach(async () => {
    app = await startApp(AppModule, adapter);
  });
  afterEach(() => app.close());

  it('an injected notifier announces list changes to the streams that asked for them', async () => {
    const tools = await openListen(app.url, { notifications: { toolsListChanged: true } });
    const prompts = await openListen(app.url, { notifications: { promptsListChanged: true } });
    expect((await tools.stream!.next()).method).toBe('notifications/subscriptions/acknowledged');
    expect((await prompts.stream!.next()).method).toBe('notifications/subscriptions/acknowledged');

    const changes = app.app.get(Catalogue).changes;
    expect(changes).toBe(app.app.get(McpServerNotifier));
    changes.toolsChanged();
    expect((await tools.stream!.next()).method).toBe('notifications/tools/list_changed');
    changes.promptsChanged();
    expect((await prompts.stream!.next()).method).toBe('notifications/prompts/list_changed');
    // The tools stream did not ask for prompt changes, nor the prompts stream for tool changes.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(tools.stream!.messages.map((m) => m.method)).not.toContain(
      'notifications/prompts/list_changed',
    );
    expect(prompts.stream!.messages.map((m) => m.method)).not.toContain(
      'notifications/tools/list_changed',
    );
    await tools.stream!.close();
    await prompts.stream!.close();
  });
});
