import { DemoModule } from '../../examples/demo.module.js';
import { ADAPTERS, startApp } from '../support/app.js';
import { declaredCapabilities, envelope, PROTOCOL_VERSION } from '../support/wire.js';

const META = envelope(declaredCapabilities(true), 'smoke');

describe.each(ADAPTERS)('smoke (%s)', (adapter) => {
  it('tools/call answers a task that tasks/get follows to completed', async () => {
    const { url, close } = await startApp(DemoModule, adapter);
    try {
      const post = (method: string, name: string | undefined, params: object) =>
        fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'mcp-protocol-version': PROTOCOL_VERSION,
            'mcp-method': method,
            ...(name && { 'mcp-name': name }),
          },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method,
            params: { ...params, _meta: META },
          }),
        });
      const call = await post('tools/call', 'add_slowly', {
        name: 'add_slowly',
        arguments: { a: 2, b: 3, delayMs: 40 },
      });
      const text = await call.text();
      const created = JSON.parse(text) as { result: { resultType: string; taskId: string } };
      expect(created.result.resultType).toBe('task');
      let status = 'working';
      let body: { result: { status: string; result?: unknown } } | undefined;
      for (let i = 0; i < 50 && status === 'working'; i++) {
        await new Promise((r) => setTimeout(r, 20));
        const response = await post('tasks/get', created.result.taskId, {
          taskId: created.result.taskId,
        });
        body = (await response.json()) as typeof body;
        status = body!.result.status;
      }
      expect(body!.result).toMatchObject({
        status: 'completed',
        result: { structuredContent: { sum: 5 } },
      });
    } finally {
      await close();
    }
  });
});
