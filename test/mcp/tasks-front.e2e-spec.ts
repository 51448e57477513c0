import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type CanActivate,
  Controller,
  type ExecutionContext,
  Injectable,
  Module,
  Post,
  Req,
  Res,
  UseGuards,
} from '@nestjs/common';
import * as z from 'zod/v4';
import { TaskTool, TasksModule } from '../../src/index.js';
import { McpTasksFront } from '../../src/entries/front.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { mcpRequest, post } from '../support/raw.js';
import { legacyHeaders } from '../support/wire.js';

/**
 * McpTasksFront in front of an MCP handler of the app's own (here a stand-in that answers every
 * request it gets with `handledBy: "app"`), on both adapters: task traffic is the front's, on both
 * revisions, with the owner read from the app's guard; everything else reaches the app's handler
 * untouched, and the table of routes says what each serves.
 */

@Injectable()
class Tools {
  @TaskTool({ name: 'add', input: z.object({ a: z.number(), b: z.number() }) })
  add({ a, b }: { a: number; b: number }) {
    return { content: [{ type: 'text' as const, text: String(a + b) }] };
  }
}

@Injectable()
class Bearer implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{
      headers: Record<string, string | undefined>;
      user?: { sub: string };
    }>();
    const match = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '');
    if (match) request.user = { sub: match[1]! };
    return true;
  }
}

interface AppRequest {
  raw?: IncomingMessage;
  headers: IncomingMessage['headers'];
  body?: unknown;
}
interface AppReply {
  raw?: ServerResponse;
  hijack?: () => void;
}

@Controller('own')
@UseGuards(Bearer)
class OwnMcpController {
  constructor(private readonly front: McpTasksFront) {}

  @Post()
  async handle(@Req() request: AppRequest, @Res() reply: AppReply): Promise<void> {
    const req = request.raw ?? (request as unknown as IncomingMessage);
    const res = reply.raw ?? (reply as unknown as ServerResponse);
    const served = await this.front.serve(request, req, res, request.body, () => reply.hijack?.());
    if (served) return;
    // The app's own handler: whatever it is, it gets every request the front passed on.
    reply.hijack?.();
    const id = (request.body as { id?: unknown } | undefined)?.id ?? null;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id, result: { handledBy: 'app' } }));
  }
}

@Module({
  imports: [TasksModule.forRoot({ path: false })],
  controllers: [OwnMcpController],
  providers: [Tools, Bearer],
})
class OwnHandlerModule {}

describe.each(ADAPTERS)('McpTasksFront before an app’s own MCP handler (%s)', (adapter) => {
  let running: RunningApp;

  beforeAll(async () => {
    running = await startApp(OwnHandlerModule, adapter, '/own');
  });
  afterAll(() => running.close());

  it('serves a task tool’s call and tasks/get (2026-07-28), owned by the guard’s principal', async () => {
    const created = await post(
      running.url,
      mcpRequest('tools/call', { name: 'add', arguments: { a: 2, b: 3 } }, { principal: 'alice' }),
    );
    expect(created.status).toBe(200);
    const task = created.json!.result as { taskId: string; resultType: string };
    expect(task.resultType).toBe('task');

    const own = await post(
      running.url,
      mcpRequest('tasks/get', { taskId: task.taskId }, { principal: 'alice' }),
    );
    expect((own.json!.result as { taskId: string }).taskId).toBe(task.taskId);

    const foreign = await post(
      running.url,
      mcpRequest('tasks/get', { taskId: task.taskId }, { principal: 'bob' }),
    );
    expect(foreign.json!.error).toMatchObject({ code: -32602, message: 'Task not found' });
  });

  it('serves 2025-11-25 tasks/list from the same store', async () => {
    await post(
      running.url,
      mcpRequest('tools/call', { name: 'add', arguments: { a: 1, b: 1 } }, { principal: 'carol' }),
    );
    const listed = await post(running.url, {
      headers: legacyHeaders('carol'),
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tasks/list', params: {} }),
    });
    expect(listed.status).toBe(200);
    expect((listed.json!.result as { tasks: unknown[] }).tasks).toHaveLength(1);
  });

  it('leaves everything else to the app’s handler, untouched', async () => {
    for (const [method, params] of [
      ['tools/list', {}],
      ['tools/call', { name: 'echo', arguments: {} }],
      ['server/discover', {}],
    ] as const) {
      const answer = await post(running.url, mcpRequest(method, params, { id: 9 }));
      expect(answer.json).toEqual({ jsonrpc: '2.0', id: 9, result: { handledBy: 'app' } });
    }
  });

  it('answers a malformed task request itself, with the SDK classifier’s error', async () => {
    const answer = await post(
      running.url,
      mcpRequest('tasks/get', { taskId: 'x' }, { methodHeader: 'tasks/cancel' }),
    );
    expect(answer.status).toBe(400);
    expect(answer.json!.error).toMatchObject({ code: expect.any(Number) });
    expect((answer.json as { result?: unknown }).result).toBeUndefined();
  });

  it('says what each route serves, per revision', () => {
    const routes = running.app.get(McpTasksFront).describeRoutes();
    expect(routes['2026-07-28']).toHaveLength(5);
    expect(routes['2026-07-28'][0]).toMatch(/tasks\/get/);
    expect(routes['2026-07-28'].join('\n')).toMatch(/shuts down: -32000, HTTP 503/);
    expect(routes['2025-11-25']).toHaveLength(5);
    expect(routes['2025-11-25'].join('\n')).toMatch(/shuts down: -32000 \(HTTP 200\)/);
    expect(routes['2025-11-25'].join('\n')).toMatch(/input request/);
  });
});
