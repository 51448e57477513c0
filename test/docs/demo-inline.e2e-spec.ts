import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { v1Client, v1Transport } from '../support/v1-client.js';

/**
 * docs/inspector.md's fallback: the demo started with DEMO_WHEN_CLIENT_LACKS_TASKS=inline runs
 * its task tools inline for a client that does not declare tasks. The client here is the v1 SDK
 * (`@modelcontextprotocol/sdk` 1.32), which the Inspector 1.x is built on: without the switch it
 * refuses a task-only tool itself ("requires task-based execution"), with it the tools are
 * "optional" and the call answers the result. A 2026-07-28 request without the extension gets
 * the result too, where the default demo answers -32021 (docs/clients.md).
 */

describe('the demo with DEMO_WHEN_CLIENT_LACKS_TASKS=inline', () => {
  let app: INestApplication;
  let url: string;
  const before = process.env.DEMO_WHEN_CLIENT_LACKS_TASKS;

  beforeAll(async () => {
    // The tools read the switch when their module loads: set it, then load the demo.
    process.env.DEMO_WHEN_CLIENT_LACKS_TASKS = 'inline';
    const { DemoModule } = await import('../../examples/demo.module.js');
    app = await NestFactory.create(DemoModule, { forceCloseConnections: true, logger: false });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    url = `http://127.0.0.1:${port}/mcp`;
  });

  afterAll(async () => {
    await app?.close();
    if (before === undefined) delete process.env.DEMO_WHEN_CLIENT_LACKS_TASKS;
    else process.env.DEMO_WHEN_CLIENT_LACKS_TASKS = before;
  });

  it('a v1 SDK client calls the task tools as plain tools', async () => {
    const client = v1Client();
    await client.connect(v1Transport(url, 'alice'));
    try {
      const { tools } = await client.listTools();
      const execution = Object.fromEntries(tools.map((tool) => [tool.name, tool.execution]));
      expect(execution).toMatchObject({
        add_slowly: { taskSupport: 'optional' },
        greet: { taskSupport: 'optional' },
        wait_for_cancel: { taskSupport: 'optional' },
        fail_with: { taskSupport: 'optional' },
      });
      const sum = await client.callTool({ name: 'add_slowly', arguments: { a: 2, b: 3 } });
      expect(sum).toMatchObject({
        content: [{ type: 'text', text: '5' }],
        structuredContent: { sum: 5 },
      });
      // A tool that asks for input cannot run inline: it says so, as a tool error.
      const greet = await client.callTool({ name: 'greet', arguments: {} });
      expect(greet).toMatchObject({
        isError: true,
        content: [
          {
            type: 'text',
            text: 'This tool needs input from the client, which requires the tasks extension',
          },
        ],
      });
    } finally {
      await client.close();
    }
  });

  it('a 2026-07-28 request without the tasks extension gets the result', async () => {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': 'add_slowly',
        authorization: 'Bearer alice',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: {
          name: 'add_slowly',
          arguments: { a: 2, b: 3, delayMs: 0 },
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientInfo': { name: 'demo-inline.e2e-spec', version: '1' },
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    const body = JSON.parse(/^data: (.*)$/m.exec(text)?.[1] ?? text) as {
      result?: Record<string, unknown>;
    };
    expect(body.result).toMatchObject({
      content: [{ type: 'text', text: '5' }],
      structuredContent: { sum: 5 },
      resultType: 'complete',
    });
    expect(body.result).not.toHaveProperty('taskId');
  });
});
