/**
 * The plain (synchronous) tools, resources and prompts of the conformance suite's "everything
 * server" (examples/servers/typescript/everything-server.ts in the suite), registered on the
 * per-request McpServer through `TasksModule.forRoot({ configure })`: what the scored
 * `--requirements 2026-07-28` scenarios call, under the same names and with the same answers.
 * The multi-round-trip (`input_required`) tools use the SDK's own `inputRequired` results.
 */
import { createHmac, randomUUID } from 'node:crypto';
import {
  completable,
  fromJsonSchema,
  inputRequired,
  type McpServer,
  ProtocolError,
  ProtocolErrorCode,
  ResourceTemplate,
  type ServerContext,
  type ServerNotifier,
} from '@modelcontextprotocol/server';
import * as z from 'zod/v4';

/** 1×1 PNG and a minimal WAV, as the suite's reference fixture sends them. */
const IMAGE =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const AUDIO = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

/** The suite's JSON Schema 2020-12 fixture (json-schema-2020-12 scenario, SEP-1613/2106). */
const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      $anchor: 'addressDef',
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
    },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
} as const;

const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

/** requestState integrity (the tampered-state scenario): HMAC-signed JSON. */
const STATE_SECRET = `conformance-mrtr-${randomUUID()}`;
const sign = (payload: Record<string, unknown>): string => {
  const data = JSON.stringify(payload);
  const hmac = createHmac('sha256', STATE_SECRET).update(data).digest('hex');
  return JSON.stringify({ data, hmac });
};
const verify = (raw: string): Record<string, unknown> | undefined => {
  try {
    const { data, hmac } = JSON.parse(raw) as { data: string; hmac: string };
    const expected = createHmac('sha256', STATE_SECRET).update(data).digest('hex');
    return hmac === expected ? (JSON.parse(data) as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
};
/**
 * The `requestState.verify` hook the fixture app installs (TasksModule `serverOptions`): a signed
 * state must verify, or the SDK answers -32602 before the tool runs; the plain JSON states of the
 * other fixtures pass through unchanged.
 */
export const verifyRequestState = (state: string): string => {
  if (state.startsWith('{"data"') && verify(state) === undefined) {
    throw new Error('requestState integrity check failed');
  }
  return state;
};

const parseState = (raw: string | undefined): Record<string, unknown> | undefined => {
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw) as Record<string, unknown>;
  } catch {
    return undefined;
  }
};

const elicitText = (message: string, field: string) =>
  inputRequired.elicit({
    message,
    requestedSchema: {
      type: 'object',
      properties: { [field]: { type: 'string' } },
      required: [field],
    },
  });
const elicitBoolean = (message: string, field: string) =>
  inputRequired.elicit({
    message,
    requestedSchema: {
      type: 'object',
      properties: { [field]: { type: 'boolean' } },
      required: [field],
    },
  });
const sample = (prompt: string, maxTokens: number) =>
  inputRequired.createMessage({
    messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
    maxTokens,
  });

/** `content[field]` of an elicitation answer, when it is a string. */
const answerText = (response: unknown, field: string): string => {
  const content = (response as { content?: Record<string, unknown> } | undefined)?.content;
  const value = content?.[field];
  return typeof value === 'string' ? value : 'unknown';
};

/** What the request says about the client (its per-request capabilities). */
const clientCapabilities = (ctx: ServerContext): Record<string, unknown> =>
  ((ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[
    'io.modelcontextprotocol/clientCapabilities'
  ] as Record<string, unknown> | undefined) ?? {};

const responses = (ctx: ServerContext): Record<string, unknown> => ctx.mcpReq.inputResponses ?? {};
const rawState = (ctx: ServerContext): string | undefined => ctx.mcpReq.requestState<string>();

export function registerEverything(server: McpServer, changes: ServerNotifier): void {
  // Logging (`logging/setLevel`, `notifications/message`) and resource subscriptions, which the
  // 2025-11-25 scenarios use; the factory names the tools capability itself.
  server.server.registerCapabilities({ logging: {}, resources: { subscribe: true } });
  registerContentTools(server, changes);
  registerInputRequiredTools(server);
  registerClientRequestTools(server);
  registerResources(server);
  registerPrompts(server);
}

function registerContentTools(server: McpServer, changes: ServerNotifier): void {
  server.registerTool('test_simple_text', { description: 'Simple text content' }, () =>
    text('This is a simple text response for testing.'),
  );
  server.registerTool('test_image_content', { description: 'Image content' }, () => ({
    content: [{ type: 'image', data: IMAGE, mimeType: 'image/png' }],
  }));
  server.registerTool('test_audio_content', { description: 'Audio content' }, () => ({
    content: [{ type: 'audio', data: AUDIO, mimeType: 'audio/wav' }],
  }));
  server.registerTool('test_embedded_resource', { description: 'Embedded resource' }, () => ({
    content: [
      {
        type: 'resource',
        resource: {
          uri: 'test://embedded-resource',
          mimeType: 'text/plain',
          text: 'This is an embedded resource content.',
        },
      },
    ],
  }));
  server.registerTool(
    'test_multiple_content_types',
    { description: 'Text, image and resource content' },
    () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: IMAGE, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    }),
  );
  server.registerTool(
    'test_tool_with_progress',
    { description: 'Reports progress', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const progressToken = ctx.mcpReq._meta?.progressToken ?? 0;
      for (const progress of [0, 50, 100]) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken, progress, total: 100, message: `Completed step ${progress}` },
        });
        if (progress < 100) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return text(String(progressToken));
    },
  );
  // Three log messages while it runs (tools-call-with-logging), each sent on the call's stream.
  server.registerTool(
    'test_tool_with_logging',
    { description: 'Logs three messages while it runs', inputSchema: z.object({}) },
    async (_args, ctx) => {
      const steps = ['Tool execution started', 'Tool processing data', 'Tool execution completed'];
      for (const [index, step] of steps.entries()) {
        if (index > 0) await new Promise((resolve) => setTimeout(resolve, 50));
        await ctx.mcpReq.log('info', step);
      }
      return text('Tool with logging executed');
    },
  );
  server.registerTool('test_error_handling', { description: 'Always fails' }, () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  server.registerTool(
    'json_schema_2020_12_tool',
    {
      description: 'Tool with JSON Schema 2020-12 features (SEP-1613)',
      inputSchema: fromJsonSchema(JSON_SCHEMA_2020_12 as unknown as Record<string, unknown>),
    },
    (args: unknown) => text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`),
  );
  // A parameter mirrored into an `Mcp-Param-Region` header (SEP-2243, the custom-header scenario).
  server.registerTool(
    'test_custom_headers',
    {
      description: 'Echoes a parameter the client also sends as the Mcp-Param-Region header',
      inputSchema: fromJsonSchema({
        type: 'object',
        properties: { region: { type: 'string', 'x-mcp-header': 'Region' } },
        required: ['region'],
      } as Record<string, unknown>),
    },
    (args: unknown) => text(`Region: ${(args as { region?: unknown }).region}`),
  );
  // Diagnostic hooks of the server-stateless scenario: "mutate" a list, so open listen streams
  // that asked for its changes hear about them, through the notifier `configure` receives (the
  // per-request McpServer's own announcement would go nowhere).
  server.registerTool(
    'test_trigger_tool_change',
    { description: 'Diagnostic: announces a tool list change' },
    () => {
      changes.toolsChanged();
      return text('Mutation triggered');
    },
  );
  server.registerTool(
    'test_trigger_prompt_change',
    { description: 'Diagnostic: announces a prompt list change' },
    () => {
      changes.promptsChanged();
      return text('Mutation triggered');
    },
  );
  // Diagnostic tools of the server-stateless scenario.
  // Needs sampling: without the capability it asks for a sampling input anyway, which the SDK
  // answers with -32021 (MissingRequiredClientCapability, HTTP 400) naming `sampling`.
  server.registerTool(
    'test_missing_capability',
    { description: 'Requires the sampling capability', inputSchema: z.object({}) },
    (_args, ctx) => {
      if (clientCapabilities(ctx).sampling) return text('Success');
      return inputRequired({ inputRequests: { sample: sample('Needs sampling', 10) } });
    },
  );
  server.registerTool(
    'test_streaming_elicitation',
    { description: 'Diagnostic: response stream', inputSchema: z.object({}) },
    () => text('Streaming complete'),
  );
  server.registerTool(
    'test_logging_tool',
    { description: 'Diagnostic: logs only when the request names a log level' },
    () => text('Logging evaluated'),
  );
}

function registerInputRequiredTools(server: McpServer): void {
  const empty = z.object({});
  server.registerTool(
    'test_input_required_result_elicitation',
    { description: 'MRTR: elicitation', inputSchema: empty },
    (_args, ctx) => {
      const answer = responses(ctx).user_name;
      if (answer) return text(`Hello, ${answerText(answer, 'name')}!`);
      return inputRequired({
        inputRequests: { user_name: elicitText('What is your name?', 'name') },
      });
    },
  );
  server.registerTool(
    'test_input_required_result_sampling',
    { description: 'MRTR: sampling', inputSchema: empty },
    (_args, ctx) => {
      const answer = responses(ctx).sample_request as { content?: { text?: unknown } } | undefined;
      if (answer) {
        const said = typeof answer.content?.text === 'string' ? answer.content.text : 'no response';
        return text(`Sampling result: ${said}`);
      }
      return inputRequired({
        inputRequests: { sample_request: sample('What is the capital of France?', 100) },
      });
    },
  );
  server.registerTool(
    'test_input_required_result_list_roots',
    { description: 'MRTR: roots/list', inputSchema: empty },
    (_args, ctx) => {
      const answer = responses(ctx).roots_request as { roots?: unknown } | undefined;
      if (answer) {
        const roots = Array.isArray(answer.roots) ? answer.roots : [];
        return text(`Found ${roots.length} root(s)`);
      }
      return inputRequired({ inputRequests: { roots_request: inputRequired.listRoots() } });
    },
  );
  server.registerTool(
    'test_input_required_result_request_state',
    { description: 'MRTR: requestState', inputSchema: empty },
    (_args, ctx) => {
      const state = parseState(rawState(ctx));
      const ok = (responses(ctx).confirm as { content?: { ok?: unknown } } | undefined)?.content;
      if (state?.kind === 'request-state' && ok?.ok === true) {
        return text('state-ok: requestState validated');
      }
      return inputRequired({
        inputRequests: { confirm: elicitBoolean('Please confirm', 'ok') },
        requestState: JSON.stringify({ kind: 'request-state', nonce: randomUUID() }),
      });
    },
  );
  server.registerTool(
    'test_input_required_result_multiple_inputs',
    { description: 'MRTR: several input requests', inputSchema: empty },
    (_args, ctx) => {
      const state = parseState(rawState(ctx));
      const { user_name, greeting, client_roots } = responses(ctx) as Record<string, unknown>;
      if (state?.kind === 'multiple-inputs' && user_name && greeting && client_roots) {
        const said = (greeting as { content?: { text?: unknown } }).content?.text;
        const roots = (client_roots as { roots?: unknown }).roots;
        return text(
          `Name: ${answerText(user_name, 'name')}; ` +
            `Greeting: ${typeof said === 'string' ? said : 'Hello there!'}; ` +
            `Roots: ${Array.isArray(roots) ? roots.length : 0}`,
        );
      }
      return inputRequired({
        inputRequests: {
          user_name: elicitText('What is your name?', 'name'),
          greeting: sample('Generate a greeting', 50),
          client_roots: inputRequired.listRoots(),
        },
        requestState: JSON.stringify({ kind: 'multiple-inputs', nonce: randomUUID() }),
      });
    },
  );
  server.registerTool(
    'test_input_required_result_multi_round',
    { description: 'MRTR: two rounds', inputSchema: empty },
    (_args, ctx) => {
      const state = parseState(rawState(ctx));
      const { step1, step2 } = responses(ctx);
      if (state?.round === 1 && step1) {
        return inputRequired({
          inputRequests: { step2: elicitText('Step 2: What is your favorite color?', 'color') },
          requestState: JSON.stringify({
            round: 2,
            name: answerText(step1, 'name'),
            nonce: randomUUID(),
          }),
        });
      }
      if (state?.round === 2 && step2) {
        const name = typeof state.name === 'string' ? state.name : 'friend';
        return text(`Multi-round complete for ${name} who likes ${answerText(step2, 'color')}`);
      }
      return inputRequired({
        inputRequests: { step1: elicitText('Step 1: What is your name?', 'name') },
        requestState: JSON.stringify({ round: 1, nonce: randomUUID() }),
      });
    },
  );
  server.registerTool(
    'test_input_required_result_tampered_state',
    { description: 'MRTR: signed requestState', inputSchema: empty },
    (_args, ctx) => {
      const raw = rawState(ctx);
      if (raw !== undefined) {
        const verified = verify(raw);
        if (!verified) {
          throw new ProtocolError(
            ProtocolErrorCode.InvalidParams,
            'requestState integrity check failed',
          );
        }
        if (verified.kind === 'tamper-test' && responses(ctx).confirm) {
          return text('integrity-ok: state verified');
        }
      }
      return inputRequired({
        inputRequests: { confirm: elicitBoolean('Please confirm', 'ok') },
        requestState: sign({ kind: 'tamper-test', nonce: randomUUID() }),
      });
    },
  );
  server.registerTool(
    'test_input_required_result_capabilities',
    { description: 'MRTR: asks only for what the client supports', inputSchema: empty },
    (_args, ctx) => {
      const answers = responses(ctx);
      if (Object.keys(answers).length > 0) {
        return text(`capabilities-ok: received ${Object.keys(answers).join(',')}`);
      }
      const capabilities = clientCapabilities(ctx);
      const inputRequests: Record<string, ReturnType<typeof sample>> = {};
      if (capabilities.elicitation) {
        inputRequests.elicit_input = elicitText('Elicitation input', 'value');
      }
      if (capabilities.sampling) inputRequests.sample_input = sample('Sample request', 50);
      if (Object.keys(inputRequests).length === 0) {
        return text('No supported capabilities declared');
      }
      return inputRequired({
        inputRequests,
        requestState: sign({ kind: 'capabilities-test', nonce: randomUUID() }),
      });
    },
  );
}

/**
 * The 2025-11-25 scenarios' tools that ask the client in that revision's push style: the request
 * goes to the client while the tool runs (`ctx.mcpReq.requestSampling`, `ctx.mcpReq.elicitInput`).
 * This library serves 2025-11-25 statelessly, so such a call fails at once (the tool's answer is
 * then an `isError` result saying why, see docs/conformance.md); on 2026-07-28 the SDK refuses it
 * too, and the `test_input_required_result_*` tools above ask the way that revision does.
 */
function registerClientRequestTools(server: McpServer): void {
  server.registerTool(
    'test_sampling',
    {
      description: 'Asks the client for an LLM completion (sampling/createMessage)',
      inputSchema: z.object({ prompt: z.string() }),
    },
    async ({ prompt }, ctx) => {
      const answer = await ctx.mcpReq.requestSampling({
        messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
        maxTokens: 100,
      });
      const said = (answer.content as { text?: unknown }).text;
      return text(`LLM response: ${typeof said === 'string' ? said : 'no text'}`);
    },
  );
  server.registerTool(
    'test_elicitation',
    {
      description: 'Asks the user for a name and an email address (elicitation/create)',
      inputSchema: z.object({ message: z.string() }),
    },
    async ({ message }, ctx) =>
      elicitedText(
        'User response',
        await ctx.mcpReq.elicitInput({
          message,
          requestedSchema: {
            type: 'object',
            properties: {
              username: { type: 'string', description: "User's response" },
              email: { type: 'string', description: "User's email address" },
            },
            required: ['username', 'email'],
          },
        }),
      ),
  );
  // SEP-1034: a default for each primitive type.
  server.registerTool(
    'test_elicitation_sep1034_defaults',
    {
      description: 'Elicitation whose fields all have defaults (SEP-1034)',
      inputSchema: z.object({}),
    },
    async (_args, ctx) =>
      elicitedText(
        'Elicitation completed',
        await ctx.mcpReq.elicitInput({
          message: 'Please review the prefilled fields',
          requestedSchema: {
            type: 'object',
            properties: {
              name: { type: 'string', default: 'John Doe' },
              age: { type: 'integer', default: 30 },
              score: { type: 'number', default: 95.5 },
              status: {
                type: 'string',
                enum: ['active', 'inactive', 'pending'],
                default: 'active',
              },
              verified: { type: 'boolean', default: true },
            },
          },
        }),
      ),
  );
  // SEP-1330: the five enum shapes (untitled and titled single-select, the legacy enumNames,
  // untitled and titled multi-select).
  server.registerTool(
    'test_elicitation_sep1330_enums',
    { description: 'Elicitation with every enum shape (SEP-1330)', inputSchema: z.object({}) },
    async (_args, ctx) =>
      elicitedText(
        'Elicitation completed',
        await ctx.mcpReq.elicitInput({
          message: 'Please pick the options',
          requestedSchema: {
            type: 'object',
            properties: {
              untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
              titledSingle: {
                type: 'string',
                oneOf: [
                  { const: 'value1', title: 'First Option' },
                  { const: 'value2', title: 'Second Option' },
                  { const: 'value3', title: 'Third Option' },
                ],
              },
              legacyEnum: {
                type: 'string',
                enum: ['opt1', 'opt2', 'opt3'],
                enumNames: ['Option One', 'Option Two', 'Option Three'],
              },
              untitledMulti: {
                type: 'array',
                items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
              },
              titledMulti: {
                type: 'array',
                items: {
                  anyOf: [
                    { const: 'value1', title: 'First Choice' },
                    { const: 'value2', title: 'Second Choice' },
                    { const: 'value3', title: 'Third Choice' },
                  ],
                },
              },
            },
          },
        }),
      ),
  );
}

/** A tool's text answer naming an elicitation's outcome. */
const elicitedText = (label: string, answer: { action: string; content?: unknown }) =>
  text(`${label}: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`);

function registerResources(server: McpServer): void {
  // 2025-11-25 subscriptions (resources-subscribe, resources-unsubscribe) are acknowledged, no
  // more: served statelessly, that revision has no stream on which a later
  // `notifications/resources/updated` could reach the client (a 2026-07-28 client hears of
  // changes on subscriptions/listen).
  server.server.setRequestHandler('resources/subscribe', () => ({}));
  server.server.setRequestHandler('resources/unsubscribe', () => ({}));
  server.registerResource(
    'static-text',
    'test://static-text',
    { title: 'Static Text Resource', description: 'Static text', mimeType: 'text/plain' },
    () => ({
      contents: [
        {
          uri: 'test://static-text',
          mimeType: 'text/plain',
          text: 'This is the content of the static text resource.',
        },
      ],
    }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { title: 'Static Binary Resource', description: 'A PNG image', mimeType: 'image/png' },
    () => ({ contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: IMAGE }] }),
  );
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    {
      title: 'Resource Template',
      description: 'A resource template with parameter substitution',
      mimeType: 'application/json',
    },
    (uri, variables) => ({
      contents: [
        {
          uri: uri.toString(),
          mimeType: 'application/json',
          text: JSON.stringify({
            id: variables.id,
            templateTest: true,
            data: `Data for ID: ${String(variables.id)}`,
          }),
        },
      ],
    }),
  );
  server.registerResource(
    'watched-resource',
    'test://watched-resource',
    { title: 'Watched Resource', description: 'Watched text', mimeType: 'text/plain' },
    () => ({
      contents: [
        {
          uri: 'test://watched-resource',
          mimeType: 'text/plain',
          text: 'Watched resource content',
        },
      ],
    }),
  );
}

function registerPrompts(server: McpServer): void {
  server.registerPrompt(
    'test_simple_prompt',
    { title: 'Simple Test Prompt', description: 'A simple prompt without arguments' },
    () => ({
      messages: [
        { role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } },
      ],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      title: 'Prompt With Arguments',
      description: 'A prompt with required arguments',
      argsSchema: z.object({
        arg1: completable(z.string().describe('First test argument'), (value) =>
          ['paris', 'park', 'party'].filter((option) => option.startsWith(value ?? '')),
        ),
        arg2: z.string().describe('Second test argument'),
      }),
    },
    ({ arg1, arg2 }) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` },
        },
      ],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      title: 'Prompt With Embedded Resource',
      description: 'A prompt that includes an embedded resource',
      argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') }),
    },
    ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: {
              uri: resourceUri,
              mimeType: 'text/plain',
              text: 'Embedded resource content for testing.',
            },
          },
        },
        {
          role: 'user',
          content: { type: 'text', text: 'Please process the embedded resource above.' },
        },
      ],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_image',
    { title: 'Prompt With Image', description: 'A prompt that includes image content' },
    () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: IMAGE, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
      ],
    }),
  );
  // The non-tool MRTR scenario (input-required-result-non-tool-request).
  server.registerPrompt(
    'test_input_required_result_prompt',
    { description: 'MRTR: a prompt that needs elicitation input' },
    (ctx) => {
      const answer = ctx.mcpReq.inputResponses?.user_context;
      if (answer) {
        return {
          messages: [
            {
              role: 'user',
              content: {
                type: 'text',
                text: `Prompt with context: ${answerText(answer, 'context')}`,
              },
            },
          ],
        };
      }
      return inputRequired({
        inputRequests: {
          user_context: elicitText('What context should the prompt use?', 'context'),
        },
      });
    },
  );
}
