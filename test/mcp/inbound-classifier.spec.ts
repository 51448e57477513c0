import { classifyInboundRequest, type InboundHttpRequest } from '@modelcontextprotocol/server';
import { classifyCommon, classifyInbound } from '../../src/mcp/inbound-classifier.js';

const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const INFO_KEY = 'io.modelcontextprotocol/clientInfo';
const CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
const LOG_LEVEL_KEY = 'io.modelcontextprotocol/logLevel';
const TASKS = 'io.modelcontextprotocol/tasks';
const TASK_ID = 'dNoIr7LW84tKHWa0_lpQ9aIuXIw-AdMeX0-Exh0h8ok';

/** A 2026-07-28 envelope as the official client sends it (tasks extension declared). */
const envelope = (capabilities: unknown = { extensions: { [TASKS]: {} } }) => ({
  [VERSION_KEY]: '2026-07-28',
  [INFO_KEY]: { name: 'spec-client', version: '1.0.0' },
  [CAPABILITIES_KEY]: capabilities,
});

const modernGet = () => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tasks/get',
  params: { taskId: TASK_ID, _meta: envelope() },
});
const modernCall = () => ({
  jsonrpc: '2.0',
  id: 'call-1',
  method: 'tools/call',
  params: { name: 'quick', arguments: { text: 'hi' }, _meta: envelope() },
});
const legacyCall = () => ({
  jsonrpc: '2.0',
  id: 7,
  method: 'tools/call',
  params: { name: 'quick', arguments: {}, task: { ttl: 5000 } },
});

const headersOf = (body: unknown): Omit<InboundHttpRequest, 'body' | 'httpMethod'> => {
  const { method, params } = (body ?? {}) as { method?: unknown; params?: unknown };
  const meta = (params as { _meta?: Record<string, unknown> } | undefined)?._meta;
  const version = meta?.[VERSION_KEY];
  return {
    ...(typeof version === 'string' && { protocolVersionHeader: version }),
    ...(typeof method === 'string' && { mcpMethodHeader: method }),
  };
};

const post = (body: unknown, headers = headersOf(body)): InboundHttpRequest => ({
  httpMethod: 'POST',
  ...headers,
  body,
});

/** The shortcut, when it answers, answers what the SDK's classifier answers. */
function expectAgreement(request: InboundHttpRequest): boolean {
  const sdk = classifyInboundRequest(request);
  const common = classifyCommon(request);
  if (common !== undefined) expect(common).toEqual(sdk);
  expect(classifyInbound(request)).toEqual(sdk);
  return common !== undefined;
}

/** A small seeded PRNG (mulberry32), so a failure reproduces. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Values a mutation may put anywhere: each kind the schemas tell apart. */
const VALUES: unknown[] = [
  undefined,
  null,
  0,
  -1,
  1.5,
  2 ** 60,
  Number.MAX_SAFE_INTEGER,
  '',
  ' ',
  '2.0',
  '1.0',
  '2026-07-28',
  '2025-11-25',
  '2099-01-01',
  'tasks/get',
  'initialize',
  'debug',
  'verbose',
  true,
  false,
  [],
  [1],
  {},
  { a: 1 },
  { a: [{ b: null }] },
  { form: {} },
  { form: { applyDefaults: true } },
  { form: { applyDefaults: 'yes' } },
  { url: {} },
  { url: [] },
  { listChanged: true },
  { listChanged: 1 },
  { name: 'n', version: '1' },
  { name: 'n', version: 1 },
  { name: 'n', version: '1', title: 't', websiteUrl: 'u', description: 'd' },
  { name: 'n', version: '1', icons: [{ src: 'x' }] },
  { name: 'n', version: '1', title: 2 },
  { extensions: { [TASKS]: {} } },
  { extensions: { [TASKS]: [] } },
  { extensions: { [TASKS]: { nested: { deep: [1, 'two', null, { x: false }] } } } },
  { extensions: [] },
  { experimental: {} },
  { tasks: { list: {} } },
  { sampling: { context: {}, tools: { a: 1 } } },
  { sampling: { context: [] } },
  { elicitation: {} },
  { elicitation: { form: {}, url: {} } },
  { elicitation: { form: [] } },
  { roots: { listChanged: false } },
  { taskId: 'abc' },
  { taskId: 1 },
];

/** Paths a mutation may change, in the bodies above. */
const PATHS: string[][] = [
  ['jsonrpc'],
  ['id'],
  ['method'],
  ['params'],
  ['result'],
  ['error'],
  ['extra'],
  ['params', 'taskId'],
  ['params', 'name'],
  ['params', '_meta'],
  ['params', '_meta', VERSION_KEY],
  ['params', '_meta', INFO_KEY],
  ['params', '_meta', INFO_KEY, 'name'],
  ['params', '_meta', INFO_KEY, 'version'],
  ['params', '_meta', INFO_KEY, 'icons'],
  ['params', '_meta', CAPABILITIES_KEY],
  ['params', '_meta', CAPABILITIES_KEY, 'extensions'],
  ['params', '_meta', CAPABILITIES_KEY, 'extensions', TASKS],
  ['params', '_meta', CAPABILITIES_KEY, 'elicitation'],
  ['params', '_meta', CAPABILITIES_KEY, 'elicitation', 'form'],
  ['params', '_meta', CAPABILITIES_KEY, 'sampling'],
  ['params', '_meta', CAPABILITIES_KEY, 'roots'],
  ['params', '_meta', CAPABILITIES_KEY, 'experimental'],
  ['params', '_meta', LOG_LEVEL_KEY],
  ['params', '_meta', 'progressToken'],
  ['params', '_meta', 'io.modelcontextprotocol/related-task'],
];

function setPath(target: unknown, path: readonly string[], value: unknown): void {
  let node = target as Record<string, unknown>;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (next === null || typeof next !== 'object') return;
    node = next as Record<string, unknown>;
  }
  const last = path.at(-1)!;
  if (value === undefined) delete node[last];
  else node[last] = structuredClone(value);
}

describe('inbound classification shortcut', () => {
  it('takes the common requests of both eras, answering as the SDK does', () => {
    const common = [
      post(modernGet()),
      post(modernCall()),
      post(
        { ...modernGet(), method: 'tasks/update' },
        headersOf({ ...modernGet(), method: 'tasks/update' }),
      ),
      // Without the headers: the classifier is body-primary (the standard-header checks come later).
      post(modernGet(), {}),
      post({ ...modernCall(), params: { ...modernCall().params, _meta: envelope({}) } }),
      post({
        ...modernCall(),
        params: {
          ...modernCall().params,
          _meta: {
            ...envelope({
              extensions: { [TASKS]: {}, 'x.example/other': { level: 2, tags: ['a'] } },
              elicitation: { form: { applyDefaults: true }, url: {} },
              sampling: { context: {}, tools: {} },
              roots: { listChanged: true },
            }),
            [INFO_KEY]: {
              name: 'c',
              version: '2',
              title: 'C',
              websiteUrl: 'https://c',
              description: 'd',
            },
            [LOG_LEVEL_KEY]: 'warning',
            progressToken: 'p-1',
          },
        },
      }),
      post(legacyCall(), { protocolVersionHeader: '2025-11-25' }),
      post(legacyCall(), {}),
      post({ jsonrpc: '2.0', id: 'g', method: 'tasks/get', params: { taskId: TASK_ID } }, {}),
      post(
        { jsonrpc: '2.0', id: 3, method: 'tasks/list' },
        { protocolVersionHeader: '2025-06-18' },
      ),
    ];
    for (const request of common) expect(expectAgreement(request)).toBe(true);
  });

  it('leaves to the SDK what it does not check, and the two still agree', () => {
    const others: InboundHttpRequest[] = [
      // A response, a notification, a batch, initialize, a GET.
      post({ jsonrpc: '2.0', id: 1, result: {} }, {}),
      post({ jsonrpc: '2.0', id: 1, error: { code: 1, message: 'x' } }, {}),
      post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { _meta: envelope() } }),
      post([modernGet()]),
      post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25' },
      }),
      { httpMethod: 'GET', protocolVersionHeader: '2026-07-28' },
      // Headers that disagree with the body, or carry whitespace the SDK strips.
      post(modernGet(), { protocolVersionHeader: '2025-11-25', mcpMethodHeader: 'tasks/get' }),
      post(modernGet(), { protocolVersionHeader: '2026-07-28', mcpMethodHeader: 'tasks/cancel' }),
      post(modernGet(), { protocolVersionHeader: ' 2026-07-28', mcpMethodHeader: 'tasks/get ' }),
      post({ ...modernGet(), method: ' tasks/get' }, { mcpMethodHeader: ' tasks/get' }),
      post(legacyCall(), { protocolVersionHeader: '2026-07-28' }),
      post(legacyCall(), { protocolVersionHeader: ' 2025-11-25\t' }),
      // Bodies the schemas refuse, or accept in ways not checked here.
      post({ ...modernGet(), id: 1.5 }),
      post({ ...modernGet(), id: null }),
      post({ ...modernGet(), jsonrpc: '1.0' }),
      post({ ...modernGet(), extra: true }),
      post({ ...modernGet(), params: [] }),
      post({ ...modernGet(), params: { _meta: [] } }),
      post({ ...modernGet(), params: { _meta: { ...envelope(), [VERSION_KEY]: 7 } } }),
      post({ ...modernGet(), params: { _meta: { ...envelope(), [VERSION_KEY]: '2099-01-01' } } }),
      post({ ...modernGet(), params: { _meta: { ...envelope(), [INFO_KEY]: { name: 'x' } } } }),
      post({ ...modernGet(), params: { _meta: envelope([]) } }),
      post({ ...modernGet(), params: { _meta: envelope({ experimental: {} }) } }),
      ...[
        { elicitation: [] },
        { elicitation: { form: [] } },
        { elicitation: { form: 'x' } },
        { elicitation: { form: { applyDefaults: 'x' } } },
        { elicitation: { url: [] } },
        { elicitation: { url: 'x' } },
        { sampling: { context: [] } },
        { sampling: { tools: 'x' } },
        { sampling: [] },
        { roots: { listChanged: 1 } },
        { roots: [] },
        { extensions: [] },
      ].map((capabilities) => post({ ...modernGet(), params: { _meta: envelope(capabilities) } })),
      post({ ...modernGet(), params: { _meta: envelope({ extensions: { [TASKS]: [] } }) } }),
      post({
        ...modernGet(),
        params: { _meta: envelope({ extensions: { [TASKS]: Object.create(null) } }) },
      }),
      post({
        ...modernGet(),
        params: { _meta: envelope({ extensions: { [TASKS]: new (class Settings {})() } }) },
      }),
      post({
        ...modernGet(),
        params: { _meta: envelope({ extensions: { [TASKS]: { [Symbol('s')]: 1 } } }) },
      }),
      post({ ...modernGet(), params: { _meta: { ...envelope(), [LOG_LEVEL_KEY]: 'verbose' } } }),
      post({ ...modernGet(), params: { _meta: { ...envelope(), progressToken: 0.5 } } }),
      post(JSON.parse(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","__proto__":{}}`)),
    ];
    for (const request of others) expectAgreement(request);
  });

  it('agrees with the SDK on thousands of mutated requests', () => {
    const random = prng(24);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    let taken = 0;
    const runs = 6_000;
    for (let run = 0; run < runs; run++) {
      const body = pick([modernGet, modernCall, legacyCall])();
      const mutations = 1 + Math.floor(random() * 3);
      for (let m = 0; m < mutations; m++) setPath(body, pick(PATHS), pick(VALUES));
      const headers = random() < 0.8 ? headersOf(body) : {};
      if (random() < 0.2) headers.protocolVersionHeader = pick(VALUES.filter(isString));
      if (random() < 0.2) headers.mcpMethodHeader = pick(VALUES.filter(isString));
      if (expectAgreement(post(body, headers))) taken++;
    }
    // Both sides of the line are exercised: some requests taken, many left to the SDK.
    expect(taken).toBeGreaterThan(runs / 20);
    expect(taken).toBeLessThan(runs);
  });
});

function isString(value: unknown): value is string {
  return typeof value === 'string';
}
