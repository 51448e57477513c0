/**
 * A rekog route fronted by TaskHttpTransport refuses a malformed request exactly as the package's
 * own endpoint does (issue 34): both routes' bodies are read by the same reader with the same
 * limits (`maxBodyBytes`, 64 levels of nesting) and refused by the same rule (bodyRefusal), under
 * Express (Nest's body parser on and off) and Fastify, on a controller route under a global prefix
 * and on the route the transport mounts itself.
 *
 * One app serves both routes (test/rekog/fixture/parity.ts, a real process, real HTTP on
 * loopback). A corpus of malformed requests goes to each route in turn: named cases (nesting 65,
 * 8,000 and 100,000 levels deep, also in the answer to a real input_required task; bodies over
 * the limit, declared and chunked; broken JSON, an empty body, JSON that is an array, a number, a
 * string or null; no `jsonrpc`; long ids and ids holding NUL; media types other than JSON; a
 * foreign Host or Origin) and cases drawn from the endpoint's own fuzz generators
 * (test/support/fuzz/: broken JSON, sizes near the limit, deep nesting, content types, envelopes)
 * from a fixed seed. Each answer is reduced to HTTP status, JSON-RPC error code, message and id
 * (or the kind of answer when it is no error), and the two must be equal, case by case.
 *
 * As in the other rekog specs, nothing here imports rekog: the fixture is compiled with the others
 * (./harness.ts) and started with `node`.
 */
import { request } from 'node:http';
import { join } from 'node:path';
import fc from 'fast-check';
import type { FuzzCase, Header, Targets } from '../support/fuzz/cases.js';
import { families } from '../support/fuzz/index.js';
import { obj, Raw, ser } from '../support/fuzz/json.js';
import { bearer, rpc as fuzzRpc, standardHeaders } from '../support/fuzz/requests.js';
import { rpc } from '../support/sse.js';
import { type ServerProcess, startServer } from '../hostile/server.js';
import { PARITY_SETUPS } from './fixture/parity-setups.js';
import { buildRekogApps, eventually, FIXTURES } from './harness.js';

const PARITY_ENTRY = join(FIXTURES, 'parity.js');
/** The fixture's `maxBodyBytes`. */
const MAX_BODY_BYTES = 256 * 1024;
const OWNER = 'alice';
const SEED = 20_260_728;

/** One request of the corpus: headers as sent (repeated names stay repeated), body bytes. */
interface Case {
  label: string;
  headers: readonly Header[];
  body: Buffer;
  /** Sent with chunked transfer encoding, no Content-Length. */
  chunked: boolean;
  /** What the package's endpoint must answer (the corpus's own check that a case is what it says). */
  core?: Partial<Answer>;
}

/** What the comparison reads of an answer. */
interface Answer {
  status: number;
  /** `error` (with code, message, id), `result` (with what it is), or what else came. */
  kind: string;
  code?: unknown;
  message?: unknown;
  id?: unknown;
  /** For an answer that is not a JSON-RPC message: the start of the body. */
  text?: string;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** POSTs a case to `path` on its own connection and reduces the answer (see Answer). */
function send(port: number, path: string, c: Case): Promise<Answer> {
  return new Promise((resolve) => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of c.headers) {
      const key = name.toLowerCase();
      const existing = headers[key];
      if (existing === undefined) headers[key] = value;
      else if (key !== 'host') headers[key] = [existing, value].flat();
    }
    if (!c.chunked) headers['content-length'] = String(c.body.length);
    const req = request(
      { host: '127.0.0.1', port, path, method: 'POST', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        const stream = /^text\/event-stream/i.test(String(res.headers['content-type']));
        // A stream that stays open (a listen stream let through) is read for a moment.
        const timer = stream ? setTimeout(() => res.destroy(), 500) : undefined;
        const done = (): void => {
          clearTimeout(timer);
          const status = res.statusCode ?? 0;
          if (stream) return resolve({ status, kind: 'event stream' });
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            return resolve({ status, kind: 'not JSON', text: text.slice(0, 120) });
          }
          if (isObject(json) && isObject(json.error)) {
            const { code, message } = json.error;
            return resolve({ status, kind: 'error', code, message, id: json.id });
          }
          if (isObject(json) && isObject(json.result)) {
            const { resultType, isError } = json.result;
            const what = resultType === 'task' ? 'a task' : isError === true ? 'a tool error' : '';
            return resolve({ status, kind: `result ${what}`.trim(), id: json.id });
          }
          resolve({ status, kind: 'other JSON', text: text.slice(0, 120) });
        };
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', done);
        res.on('close', done);
        res.on('error', done);
      },
    );
    req.setTimeout(15_000, () => req.destroy(new Error('no answer within 15 s')));
    req.on('error', (error) => resolve({ status: 0, kind: `no answer: ${error.message}` }));
    if (c.chunked) {
      // Three chunks, the first and last small: the size shows only as the body comes.
      req.write(c.body.subarray(0, 16));
      req.write(c.body.subarray(16, c.body.length - 16));
      req.end(c.body.subarray(c.body.length - 16));
    } else {
      req.end(c.body);
    }
  });
}

// ----- the corpus -------------------------------------------------------------------------------

/** `[` nested `levels` deep around `1` (valid JSON). */
const nested = (levels: number): Raw => new Raw(`${'['.repeat(levels)}1${']'.repeat(levels)}`);
/** `{"a":` nested `levels` deep around `1`: an object, as an input response is. */
const nestedObject = (levels: number): Raw =>
  new Raw(`${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`);

/** A 2026-07-28 request as a client sends it (standard headers, envelope), to change. */
function request2026(
  method: string,
  params: Record<string, Parameters<typeof obj>[0][string]>,
  id: string | number = 1,
): { headers: Header[]; body: string } {
  const message = fuzzRpc(method, obj(params), { id });
  return { headers: standardHeaders(message, bearer(OWNER)), body: ser(message) };
}

const named = (
  label: string,
  headers: readonly Header[],
  body: string | Buffer,
  core?: Partial<Answer>,
): Case => ({
  label,
  headers,
  body: Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8'),
  chunked: false,
  ...(core !== undefined && { core }),
});

/** What the package's endpoint answers: the refusals of bodyRefusal, and its host check's. */
const TOO_DEEP = {
  status: 400,
  code: -32600,
  id: null,
  message: expect.stringMatching(/deeper than 64 levels$/),
};
const TOO_LARGE = { status: 413, code: -32600, id: null, message: 'Request body too large' };
const PARSE_ERROR = { status: 400, code: -32700, id: null };
const NOT_JSON_TYPE = { status: 415, code: -32600, id: null };
const ID_TOO_LONG = {
  status: 400,
  code: -32600,
  id: null,
  message: expect.stringMatching(/^Bad Request: the JSON-RPC id is longer/),
};
const FORBIDDEN = { status: 403, code: -32000, id: null };
const NOT_FOUND = { status: 200, code: -32602, message: 'Task not found' };
const SERVED = { status: 200, kind: 'result' };

/** With `name` set to `value` (or left out with `undefined`). */
function withHeader(headers: readonly Header[], name: string, value?: string): Header[] {
  const kept = headers.filter(([key]) => key.toLowerCase() !== name);
  return value === undefined ? kept : [...kept, [name, value]];
}

/** The cases of the issue, by name; `greet` is an input_required task of OWNER's (key `name`). */
function namedCases(greet: string, port: number): Case[] {
  const cases: Case[] = [];
  const echo = request2026('tools/call', { name: 'echo', arguments: obj({ text: 'hi' }) });
  const get = request2026('tasks/get', { taskId: greet });

  // Nesting: an accepted answer to a tasks/update whose content is nested so the whole body is
  // `depth` levels deep (the root, params, inputResponses and the answer hold it), the limit being
  // 64. 100,000 levels of objects would be over maxBodyBytes: that content holds arrays.
  const content = (depth: number) =>
    depth <= 10_000 ? nestedObject(depth - 4) : obj({ a: nested(depth - 5) });
  const answer = (depth: number) => obj({ action: 'accept', content: content(depth) });
  const update = (taskId: string, depth: number) =>
    request2026('tasks/update', { taskId, inputResponses: obj({ name: answer(depth) }) });
  for (const depth of [64, 65, 8_000, 100_000]) {
    const made = update('no-such-task', depth);
    const core = depth > 64 ? TOO_DEEP : NOT_FOUND;
    cases.push(
      named(`tasks/update of an unknown task, ${depth} levels`, made.headers, made.body, core),
    );
  }
  // A good answer to the input_required task, beside a params member nested `depth` levels deep
  // with the root and params: served, it would resume the task.
  for (const depth of [65, 8_000, 100_000]) {
    const made = request2026('tasks/update', {
      taskId: greet,
      inputResponses: obj({ name: obj({ action: 'accept', content: obj({ name: 'Ada' }) }) }),
      deep: depth <= 10_000 ? nestedObject(depth - 2) : nested(depth - 2),
    });
    const label = `tasks/update answering the input_required task, a member ${depth} levels deep`;
    cases.push(named(label, made.headers, made.body, TOO_DEEP));
  }
  const deepEcho = request2026('tools/call', {
    name: 'echo',
    arguments: obj({ text: nested(8_000) }),
  });
  cases.push(
    named('rekog’s echo, an argument 8,000 levels deep', deepEcho.headers, deepEcho.body, TOO_DEEP),
  );
  cases.push(
    named('the whole body 100,000 arrays deep', get.headers, ser(nested(100_000)), TOO_DEEP),
  );

  // Size: over maxBodyBytes by Content-Length, and chunked (no length to go by).
  const pad = 'x'.repeat(MAX_BODY_BYTES + 1_024);
  for (const [what, made] of [
    ['rekog’s echo', request2026('tools/call', { name: 'echo', arguments: obj({ text: pad }) })],
    ['tasks/get', request2026('tasks/get', { taskId: greet, pad })],
  ] as const) {
    cases.push(named(`${what}, over maxBodyBytes`, made.headers, made.body, TOO_LARGE));
    cases.push({
      ...named(`${what}, over maxBodyBytes, chunked`, made.headers, made.body, TOO_LARGE),
      chunked: true,
    });
  }
  const under = request2026('tools/call', {
    name: 'echo',
    arguments: obj({ text: 'y'.repeat(MAX_BODY_BYTES - 4_096) }),
  });
  cases.push({
    ...named('rekog’s echo, under maxBodyBytes, chunked', under.headers, under.body, SERVED),
    chunked: true,
  });

  // Not JSON, or JSON that is no JSON-RPC message.
  for (const [what, body] of [
    ['cut short', echo.body.slice(0, 40)],
    ['one brace', '{'],
    ['trailing garbage', `${echo.body}x`],
    ['empty', ''],
  ] as const) {
    cases.push(named(`body: ${what}`, echo.headers, body, PARSE_ERROR));
  }
  for (const [what, body] of [
    ['an empty array', '[]'],
    ['an array of a number', '[1]'],
    ['a number', '5'],
    ['a string', '"x"'],
    ['null', 'null'],
    ['true', 'true'],
  ] as const) {
    cases.push(named(`body: ${what}`, echo.headers, body, { status: 400, code: -32600, id: null }));
  }
  const noJsonrpc = (text: string): string => text.replace('"jsonrpc":"2.0",', '');
  cases.push(named('rekog’s echo without jsonrpc', echo.headers, noJsonrpc(echo.body)));
  cases.push(named('tasks/get without jsonrpc', get.headers, noJsonrpc(get.body)));

  // Ids: over 256 characters, holding NUL.
  for (const [what, id] of [
    ['257 characters', 'i'.repeat(257)],
    ['10,000 characters', 'i'.repeat(10_000)],
    ['NUL inside', 'a\u0000b'],
    ['only NUL', '\u0000'],
    ['NUL and 300 characters', `\u0000${'i'.repeat(300)}`],
  ] as const) {
    const long = id.length > 256;
    const call = request2026('tools/call', { name: 'echo', arguments: obj({ text: 'hi' }) }, id);
    const served = long ? ID_TOO_LONG : { ...SERVED, id };
    cases.push(named(`rekog’s echo, an id of ${what}`, call.headers, call.body, served));
    const task = request2026('tasks/get', { taskId: 'no-such-task' }, id);
    const notFound = long ? ID_TOO_LONG : { ...NOT_FOUND, id };
    cases.push(named(`tasks/get, an id of ${what}`, task.headers, task.body, notFound));
  }

  // Media types other than JSON (the body is a good request).
  for (const type of [
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/jsonx',
    undefined,
  ]) {
    for (const [what, made] of [
      ['rekog’s echo', echo],
      ['tasks/get', get],
    ] as const) {
      const headers = withHeader(made.headers, 'content-type', type);
      cases.push(
        named(`${what}, Content-Type: ${type ?? '(none)'}`, headers, made.body, NOT_JSON_TYPE),
      );
    }
  }
  const form = withHeader(echo.headers, 'content-type', 'application/x-www-form-urlencoded');
  cases.push(named('a form body', form, 'jsonrpc=2.0&id=1&method=tools%2Fcall', NOT_JSON_TYPE));

  // Host and Origin: refused alike (403) before the body is looked at; same-origin is served.
  for (const [what, name, value, refused] of [
    ['Origin: http://evil.example', 'origin', 'http://evil.example', true],
    ['Origin: null', 'origin', 'null', true],
    ['Host: evil.example', 'host', 'evil.example', true],
    ['a same-origin Origin', 'origin', `http://127.0.0.1:${port}`, false],
    ['Origin: http://localhost', 'origin', 'http://localhost', false],
  ] as const) {
    for (const [kind, made, served] of [
      ['rekog’s echo', echo, SERVED],
      ['tasks/get', get, { status: 200, kind: 'result' }],
      ['broken JSON', { headers: echo.headers, body: '{' }, PARSE_ERROR],
    ] as const) {
      const headers = withHeader(made.headers, name, value);
      cases.push(named(`${kind}, ${what}`, headers, made.body, refused ? FORBIDDEN : served));
    }
  }
  return cases;
}

/** Cases drawn from the endpoint's fuzz generators, from a fixed seed. */
function generatedCases(): Case[] {
  const targets: Targets = {
    owner: OWNER,
    working: ['no-such-task-1', 'no-such-task-2'],
    inputRequired: 'no-such-task-3',
    inputKey: 'name',
    completed: 'no-such-task-4',
    failed: 'no-such-task-5',
    victim: 'no-such-task-6',
    victimKey: 'name',
    maxBodyBytes: MAX_BODY_BYTES,
  };
  const plan: [string, (t: Targets) => fc.Arbitrary<FuzzCase>, number][] = [
    ['broken JSON', families.brokenJson, 40],
    ['near and over the size limit', families.hugeBodies, 10],
    ['deep nesting', families.deepNesting, 12],
    ['content types', families.contentTypes, 20],
    ['envelopes', families.envelopes, 20],
  ];
  return plan.flatMap(([what, make, numRuns]) =>
    fc.sample(make(targets), { seed: SEED, numRuns }).map((c) => ({
      label: `${what}: ${c.label}`,
      headers: c.headers,
      body: c.body,
      chunked: c.chunked,
    })),
  );
}

/** Whether an answer has the fields `expected` names (as Jest's toMatchObject would). */
function matches(answer: Answer, expected: Partial<Answer>): boolean {
  try {
    expect(answer).toMatchObject(expected);
    return true;
  } catch {
    return false;
  }
}

/** The label of a case and its two answers, for a failure to list. */
interface Difference {
  label: string;
  core: Answer;
  rekog: Answer;
}

beforeAll(async () => {
  await buildRekogApps([PARITY_ENTRY]);
}, 300_000);

describe.each(PARITY_SETUPS)(
  'the rekog route and the package’s endpoint, one app (%s)',
  (setup) => {
    let server: ServerProcess | undefined;
    let routes: { core: string; rekog: string };

    beforeAll(async () => {
      server = await startServer(PARITY_ENTRY, { env: { PARITY: setup } });
      routes = JSON.parse(/^PARITY (.*)$/m.exec(server.output())![1]!) as typeof routes;
    }, 60_000);
    afterAll(async () => {
      await server?.stop();
    });

    it('every request of the corpus gets the same answer on both: status, error code, message, id', async () => {
      const { port } = server!;
      // A task waiting for input, which a deep answer must not reach on either route.
      const created = await rpc(
        `http://127.0.0.1:${port}${routes.core}`,
        'tools/call',
        { name: 'greet', arguments: {} },
        { principal: OWNER },
      );
      const greet = String(created.body.result?.taskId);
      await eventually(async () => {
        const got = await rpc(
          `http://127.0.0.1:${port}${routes.core}`,
          'tasks/get',
          { taskId: greet },
          { principal: OWNER },
        );
        return got.body.result?.status === 'input_required' ? true : undefined;
      }, 'greet to ask for input');

      const cases = [...namedCases(greet, port), ...generatedCases()];
      const differences: Difference[] = [];
      const unexpected: { label: string; expected: Partial<Answer>; core: Answer }[] = [];
      for (const c of cases) {
        const core = await send(port, routes.core, c);
        const rekog = await send(port, routes.rekog, c);
        if (JSON.stringify(core) !== JSON.stringify(rekog)) {
          differences.push({ label: c.label, core, rekog });
        }
        if (c.core !== undefined && !matches(core, c.core)) {
          unexpected.push({ label: c.label, expected: c.core, core });
        }
      }
      process.stdout.write(
        `${setup}: ${cases.length} requests, ${differences.length} answered differently\n`,
      );
      // The corpus is what it says: the package's endpoint answers each named case as it should.
      expect(unexpected).toEqual([]);
      expect(differences).toEqual([]);

      // Nothing reached the task: it still waits for its answer.
      const after = await rpc(
        `http://127.0.0.1:${port}${routes.rekog}`,
        'tasks/get',
        { taskId: greet },
        { principal: OWNER },
      );
      expect(after.body.result?.status).toBe('input_required');
      expect(server!.alive()).toBe(true);
    }, 60_000);
  },
);
