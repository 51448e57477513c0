/**
 * A plain tool (or prompt) that asks the client while it runs. The 2025-11-25 path is served
 * statelessly, so there such a request fails at once with a clear error (src/mcp/
 * stateless-client-requests.ts) instead of waiting for an answer that cannot come back; on
 * 2026-07-28 nothing changes: a tool asks with an input_required result, and the SDK refuses the
 * push style itself.
 */
import { Client as V2Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { inputRequired, type McpServer, SdkError } from '@modelcontextprotocol/server';
import { Module } from '@nestjs/common';
import * as z from 'zod/v4';
import { TasksModule } from '../../src/index.js';
import { ADAPTERS, type RunningApp, startApp } from '../support/app.js';
import { testContextFetch } from '../support/official-client.js';

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

const SAMPLE = {
  messages: [{ role: 'user' as const, content: { type: 'text' as const, text: 'Say hi' } }],
  maxTokens: 10,
};
const FORM = {
  message: 'Your name?',
  requestedSchema: {
    type: 'object' as const,
    properties: { name: { type: 'string' as const } },
    required: ['name'],
  },
};

/** Plain tools and a prompt that ask the client in each of the ways the SDK offers. */
function registerAskingTools(server: McpServer): void {
  const empty = z.object({});
  server.registerTool('ask_sampling', { inputSchema: empty }, async (_args, ctx) => {
    const answer = await ctx.mcpReq.requestSampling(SAMPLE);
    return text(`sampled: ${(answer.content as { text?: string }).text}`);
  });
  server.registerTool('ask_elicitation', { inputSchema: empty }, async (_args, ctx) => {
    const answer = await ctx.mcpReq.elicitInput(FORM);
    return text(`elicited: ${answer.action}`);
  });
  server.registerTool('ask_roots', { inputSchema: empty }, async (_args, ctx) => {
    const { roots } = await ctx.mcpReq.send({ method: 'roots/list' });
    return text(`roots: ${roots.length}`);
  });
  // Sent on the call's own stream, so without the refusal it reaches the client, whose answer is
  // then lost.
  server.registerTool('ask_sampling_on_stream', { inputSchema: empty }, async (_args, ctx) => {
    await ctx.mcpReq.send({ method: 'sampling/createMessage', params: SAMPLE });
    return text('sampled');
  });
  // A tool may catch the refusal and do without the answer.
  server.registerTool('ask_or_do_without', { inputSchema: empty }, async (_args, ctx) => {
    try {
      await ctx.mcpReq.requestSampling(SAMPLE);
      return text('asked');
    } catch (error) {
      const code = error instanceof SdkError ? error.code : 'not an SdkError';
      return text(`did without (${code}, ${(error as SdkError).data ? 'with data' : 'no data'})`);
    }
  });
  // The 2026-07-28 way: the client fulfils the three requests and calls again with the answers.
  server.registerTool('ask_input_required', { inputSchema: empty }, (_args, ctx) => {
    const { sample, name, roots } = ctx.mcpReq.inputResponses ?? {};
    if (sample && name && roots) {
      const said = (sample as { content?: { text?: string } }).content?.text;
      const given = (name as { content?: { name?: string } }).content?.name;
      const count = (roots as { roots?: unknown[] }).roots?.length;
      return text(`asked: ${said}, ${given}, ${count} root(s)`);
    }
    return inputRequired({
      inputRequests: {
        sample: inputRequired.createMessage(SAMPLE),
        name: inputRequired.elicit(FORM),
        roots: inputRequired.listRoots(),
      },
    });
  });
  server.registerPrompt('ask_in_prompt', {}, async (ctx) => {
    await ctx.mcpReq.send({ method: 'sampling/createMessage', params: SAMPLE });
    return { messages: [] };
  });
}

@Module({
  imports: [
    TasksModule.forRoot({
      principal: () => 'alice',
      configure: (server) => registerAskingTools(server),
    }),
  ],
})
class AskingModule {}

/** What a client was asked, by method. */
type Asked = string[];

const CLIENT_CAPABILITIES = { sampling: {}, elicitation: { form: {} }, roots: {} };

/** A v1 (2025-11-25) client that would answer every question, and notes each one asked. */
async function connectV1(url: string, asked: Asked): Promise<Client> {
  const client = new Client(
    { name: 'v1', version: '1.0.0' },
    { capabilities: CLIENT_CAPABILITIES },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async () => {
    asked.push('sampling/createMessage');
    return { role: 'assistant', content: { type: 'text', text: 'hi' }, model: 'test' };
  });
  client.setRequestHandler(ElicitRequestSchema, async () => {
    asked.push('elicitation/create');
    return { action: 'accept', content: { name: 'Ada' } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    asked.push('roots/list');
    return { roots: [{ uri: 'file:///work' }] };
  });
  await client.connect(new V1Transport(new URL(url)));
  return client;
}

/** The same client on 2026-07-28 (the v2 SDK client, pinned to that revision). */
async function connectV2(url: string, asked: Asked): Promise<V2Client> {
  const client = new V2Client(
    { name: 'v2', version: '1.0.0' },
    {
      capabilities: CLIENT_CAPABILITIES,
      versionNegotiation: { mode: { pin: '2026-07-28' } },
    },
  );
  client.setRequestHandler('sampling/createMessage', async () => {
    asked.push('sampling/createMessage');
    return { role: 'assistant', content: { type: 'text', text: 'hi' }, model: 'test' };
  });
  client.setRequestHandler('elicitation/create', async () => {
    asked.push('elicitation/create');
    return { action: 'accept', content: { name: 'Ada' } };
  });
  client.setRequestHandler('roots/list', async () => {
    asked.push('roots/list');
    return { roots: [{ uri: 'file:///work' }] };
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { fetch: testContextFetch }),
  );
  return client;
}

const refused = (method: string) =>
  `Cannot send ${method} to the client: this server serves protocol revision 2025-11-25 ` +
  'without sessions, so a request from the server to the client cannot be answered. A task ' +
  '(tools/call with params.task) asks through tasks/result; on revision 2026-07-28 a tool asks ' +
  'with an input_required result.';

/**
 * Bounds each call well below the test's own timeout, so that a call left waiting fails with the
 * client's timeout error rather than a bare test timeout.
 */
const BOUND = { timeout: 15_000 };

describe.each(ADAPTERS)('a plain tool that asks the client (%s)', (adapter) => {
  let app: RunningApp;
  const closing: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    app = await startApp(AskingModule, adapter);
  });
  afterEach(async () => {
    for (const client of closing.splice(0)) await client.close();
  });
  afterAll(async () => {
    await app.close();
  });

  describe('on 2025-11-25 (stateless)', () => {
    const call = async (name: string, asked: Asked = []) => {
      const client = await connectV1(app.url, asked);
      closing.push(client);
      return client.request(
        { method: 'tools/call', params: { name, arguments: {} } },
        CallToolResultSchema,
        BOUND,
      );
    };

    it.each([
      ['ask_sampling', 'sampling/createMessage'],
      ['ask_elicitation', 'elicitation/create'],
      ['ask_roots', 'roots/list'],
      ['ask_sampling_on_stream', 'sampling/createMessage'],
    ])(
      '%s ends at once with an isError result naming %s; the client is not asked',
      async (name, method) => {
        const asked: Asked = [];
        expect(await call(name, asked)).toEqual({
          content: [{ type: 'text', text: refused(method) }],
          isError: true,
        });
        expect(asked).toEqual([]);
      },
    );

    it('the refusal is an SdkError (CapabilityNotSupported, with data) a tool can catch', async () => {
      expect(await call('ask_or_do_without')).toEqual(
        text('did without (CAPABILITY_NOT_SUPPORTED, with data)'),
      );
    });

    it('an input_required result is refused by the SDK itself, at once, as an isError result', async () => {
      const asked: Asked = [];
      const result = await call('ask_input_required', asked);
      expect(result.isError).toBe(true);
      expect(result.content).toEqual([
        {
          type: 'text',
          text: expect.stringContaining(
            'per-request legacy serving cannot receive server-to-client requests',
          ),
        },
      ]);
      expect(asked).toEqual([]);
    });

    it('a prompt that asks answers a JSON-RPC error naming the refusal', async () => {
      const client = await connectV1(app.url, []);
      closing.push(client);
      const error = await client.getPrompt({ name: 'ask_in_prompt' }, BOUND).catch((e) => e);
      expect(error).toBeInstanceOf(McpError);
      expect(error).toMatchObject({
        code: -32603,
        message: expect.stringContaining(refused('sampling/createMessage')),
      });
    });

    it('the same client is then served as before', async () => {
      const client = await connectV1(app.url, []);
      closing.push(client);
      await client.request(
        { method: 'tools/call', params: { name: 'ask_roots', arguments: {} } },
        CallToolResultSchema,
        BOUND,
      );
      const { tools } = await client.listTools(undefined, BOUND);
      expect(tools.map((tool) => tool.name)).toContain('ask_input_required');
    });
  });

  describe('on 2026-07-28 (unchanged)', () => {
    const call = async (name: string, asked: Asked = []) => {
      const client = await connectV2(app.url, asked);
      closing.push(client);
      return client.callTool({ name, arguments: {} }, BOUND);
    };

    it('a tool asks with input_required: the client answers all three and the tool completes', async () => {
      const asked: Asked = [];
      expect(await call('ask_input_required', asked)).toMatchObject(
        text('asked: hi, Ada, 1 root(s)'),
      );
      expect(asked.sort()).toEqual(['elicitation/create', 'roots/list', 'sampling/createMessage']);
    });

    it('the push style is the SDK’s own refusal, not the 2025-11-25 one', async () => {
      const result = await call('ask_sampling');
      expect(result.isError).toBe(true);
      const [content] = result.content as Array<{ text: string }>;
      expect(content.text).toContain(
        'Server-to-client requests are not available on protocol revision 2026-07-28',
      );
      expect(content.text).not.toContain('2025-11-25');
    });
  });
});
