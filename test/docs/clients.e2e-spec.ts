import { afterAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DemoModule } from '../../examples/demo.module.js';
import { SseReader } from '../e2e/sse.js';
import { type JsonRpcMessage, parseMessage } from '../e2e/wire.js';

/**
 * docs/clients.md, run against the demo (DemoModule in memory, as `npm start` runs it, on a free
 * port): every ```sh block (one curl command) is run, with the page's origin swapped for the
 * server's and the placeholders of earlier answers filled in, and its answer must equal the ```json
 * block that follows it. The page is walked twice on fresh servers: the requests parsed and sent
 * with `fetch`, then the commands themselves run by `sh` with the real curl (skipped without curl).
 * In a documented answer, `"<ISO time>"` matches any ISO 8601 time; any other `"<name>"` matches
 * any string or number the first time it appears in a `## ` section and must be that same value
 * afterwards (and later commands get it). Everything else must be equal, with no key missing or
 * extra, and the HTTP status is 400 for -32020/-32021/-32022, else 200. A `curl -N` answer (a
 * listen) is read on the side while the later steps run; its block lists the `data` of its events,
 * in order, and is checked at the end of its section. A tasks/get is read again (up to 5 s) until it
 * shows the documented state, as a client polls.
 */

const DOC = join(process.cwd(), 'docs/clients.md');
/** The origin the page's commands name (`npm start`'s). */
const DOC_ORIGIN = 'http://localhost:3000';
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/;
const PLACEHOLDER = /^<([^<>]+)>$/;
/** How long a `tasks/get` step may be retried until the task reaches the documented state. */
const SETTLE_MS = 5_000;
/** The errors answered with HTTP 400 (header mismatch, missing capability, unsupported version); all else is 200. */
const HTTP_400_CODES = [-32020, -32021, -32022];

interface Step {
  /** The `## ` section it belongs to: placeholders bind anew in each. */
  section: string;
  /** The heading the step stands under, for messages. */
  heading: string;
  command: string;
  answer: string;
}

/** The page's ```sh blocks, each with the ```json block that follows it. */
export function stepsOf(markdown: string): Step[] {
  const steps: Step[] = [];
  let section = '';
  let heading = '';
  let pending: { section: string; heading: string; command: string } | undefined;
  const fence = /^(#{1,6} .*)$|^```(\w*)\n([\s\S]*?)^```$/gm;
  for (const match of markdown.matchAll(fence)) {
    if (match[1] !== undefined) {
      heading = match[1];
      if (heading.startsWith('## ')) section = heading;
      continue;
    }
    const [, , lang, body] = match;
    if (lang === 'sh') {
      if (pending) throw new Error(`${pending.heading}: a sh block without its json answer`);
      pending = { section, heading, command: body! };
    } else if (lang === 'json') {
      if (!pending) throw new Error(`${heading}: a json block with no command before it`);
      steps.push({ ...pending, answer: body! });
      pending = undefined;
    }
  }
  if (pending) throw new Error(`${pending.heading}: a sh block without its json answer`);
  return steps;
}

/** Shell words of a command: bare words and single-quoted strings, `\` + newline continues. */
export function shellWords(command: string): string[] {
  const words: string[] = [];
  const text = command.replace(/\\\n/g, ' ').trim();
  let at = 0;
  while (at < text.length) {
    if (/\s/.test(text[at]!)) {
      at++;
      continue;
    }
    let word = '';
    while (at < text.length && !/\s/.test(text[at]!)) {
      if (text[at] === "'") {
        const end = text.indexOf("'", at + 1);
        if (end === -1) throw new Error(`an unclosed quote in: ${command}`);
        word += text.slice(at + 1, end);
        at = end + 1;
      } else if (/["$`\\;|&<>()]/.test(text[at]!)) {
        throw new Error(
          `the page's commands use single quotes only; found ${text[at]} in: ${command}`,
        );
      } else {
        word += text[at++];
      }
    }
    words.push(word);
  }
  return words;
}

interface CurlRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** The request a `curl` command sends (the flags the page uses: -sS, -N, -H, -d). */
export function parseCurl(command: string): CurlRequest {
  const words = shellWords(command);
  if (words[0] !== 'curl') throw new Error(`not a curl command: ${command}`);
  let url: string | undefined;
  const headers: Record<string, string> = {};
  let body: string | undefined;
  for (let i = 1; i < words.length; i++) {
    const word = words[i]!;
    if (word === '-sS' || word === '-N') continue;
    if (word === '-H') {
      const header = words[++i]!;
      const colon = header.indexOf(':');
      headers[header.slice(0, colon).trim().toLowerCase()] = header.slice(colon + 1).trim();
    } else if (word === '-d') {
      body = words[++i];
    } else if (!word.startsWith('-') && url === undefined) {
      url = word;
    } else {
      throw new Error(`a curl flag the test does not know: ${word}`);
    }
  }
  if (url === undefined || body === undefined) throw new Error(`no URL or no -d in: ${command}`);
  return { url, headers, body };
}

/**
 * Why `actual` differs from the documented `expected`, or `undefined` when it matches; binds the
 * placeholders it meets for the first time into `bound` (only when the whole value matches).
 */
export function mismatch(
  expected: unknown,
  actual: unknown,
  bound: Map<string, unknown>,
  path = '$',
): string | undefined {
  const fresh = new Map<string, unknown>();
  const why = compare(expected, actual, bound, fresh, path);
  if (why === undefined) for (const [name, value] of fresh) bound.set(name, value);
  return why;
}

function compare(
  expected: unknown,
  actual: unknown,
  bound: Map<string, unknown>,
  fresh: Map<string, unknown>,
  path: string,
): string | undefined {
  const placeholder = typeof expected === 'string' ? PLACEHOLDER.exec(expected) : null;
  if (placeholder) {
    const name = placeholder[1]!;
    if (name === 'ISO time') {
      return typeof actual === 'string' && ISO_TIME.test(actual)
        ? undefined
        : `${path}: expected an ISO time, got ${JSON.stringify(actual)}`;
    }
    if (typeof actual !== 'string' && typeof actual !== 'number')
      return `${path}: expected a value for ${expected}, got ${JSON.stringify(actual)}`;
    const known = bound.has(name) ? bound.get(name) : fresh.get(name);
    if (known === undefined) {
      fresh.set(name, actual);
      return undefined;
    }
    return known === actual
      ? undefined
      : `${path}: expected ${expected} = ${JSON.stringify(known)}, got ${JSON.stringify(actual)}`;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return `${path}: expected an array, got ${JSON.stringify(actual)}`;
    if (actual.length !== expected.length)
      return `${path}: expected ${expected.length} items, got ${actual.length}: ${JSON.stringify(actual)}`;
    for (let i = 0; i < expected.length; i++) {
      const why = compare(expected[i], actual[i], bound, fresh, `${path}[${i}]`);
      if (why) return why;
    }
    return undefined;
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual))
      return `${path}: expected an object, got ${JSON.stringify(actual)}`;
    const want = Object.keys(expected).sort();
    const got = Object.keys(actual).sort();
    const missing = want.filter((key) => !got.includes(key));
    const extra = got.filter((key) => !want.includes(key));
    if (missing.length || extra.length)
      return `${path}: keys missing ${JSON.stringify(missing)}, extra ${JSON.stringify(extra)}`;
    for (const key of want) {
      const why = compare(
        (expected as Record<string, unknown>)[key],
        (actual as Record<string, unknown>)[key],
        bound,
        fresh,
        `${path}.${key}`,
      );
      if (why) return why;
    }
    return undefined;
  }
  return Object.is(expected, actual)
    ? undefined
    : `${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
}

/** The command with the page's origin swapped for the server's and the placeholders filled in. */
function substitute(text: string, origin: string, bound: Map<string, unknown>): string {
  return text
    .split(DOC_ORIGIN)
    .join(origin)
    .replace(/<([A-Za-z][\w ]*)>/g, (whole, name: string) => {
      if (!bound.has(name)) throw new Error(`${whole} is used before an answer gave it`);
      return String(bound.get(name));
    });
}

/** The message of an SSE body that holds exactly one event (an answer sent as a stream). */
function onlyEvent(text: string, step: Step): unknown {
  const data = text
    .split(/\r?\n\r?\n/)
    .map((block) =>
      block
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n'),
    )
    .filter((payload) => payload !== '');
  if (data.length !== 1)
    throw new Error(`${step.heading}: ${data.length} events, expected one:\n${text}`);
  return parseMessage(data[0]!);
}

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** What one command got: a whole answer, or a stream that stays open (a listen). */
type Sent =
  | { kind: 'answer'; status: number; contentType: string; text: string }
  | { kind: 'stream'; messages(): unknown[]; close(): Promise<void> };

/** Sends one command (its placeholders filled in). */
type Send = (command: string) => Promise<Sent>;

const isSse = (contentType: string): boolean => /^text\/event-stream/i.test(contentType);

/** The command's request, sent with `fetch`. */
const sendWithFetch: Send = async (command) => {
  const request = parseCurl(command);
  const controller = new AbortController();
  const response = await fetch(request.url, {
    method: 'POST',
    headers: request.headers,
    body: request.body,
    signal: controller.signal,
  });
  const contentType = response.headers.get('content-type') ?? '';
  if (isSse(contentType) && command.includes(' -N ')) {
    const reader = new SseReader(response.body!, controller);
    return { kind: 'stream', messages: () => reader.messages, close: () => reader.close() };
  }
  return { kind: 'answer', status: response.status, contentType, text: await response.text() };
};

/** The command itself, run by `sh` with the real curl (a stream is read as curl prints it). */
const sendWithCurl: Send = async (command) => {
  const WRITE_OUT = " -w '\\n%{http_code} %{content_type}'";
  const streaming = command.includes(' -N ');
  const child = spawn('sh', ['-c', streaming ? command : command.trimEnd() + WRITE_OUT], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  if (streaming) {
    return {
      kind: 'stream',
      messages: () => sseMessages(out),
      close: async () => {
        if (child.exitCode === null) child.kill('SIGTERM');
        await exited;
      },
    };
  }
  const code = await exited;
  if (code !== 0) throw new Error(`curl exited with ${code}: ${err}`);
  const cut = out.lastIndexOf('\n');
  const [status, contentType = ''] = out.slice(cut + 1).split(' ');
  return { kind: 'answer', status: Number(status), contentType, text: out.slice(0, cut) };
};

/** The messages of an SSE text, in order (the `data` of each complete event). */
function sseMessages(text: string): unknown[] {
  const blocks = text.split(/\r?\n\r?\n/);
  blocks.pop(); // not ended yet, or empty
  return blocks
    .map((block) =>
      block
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trimStart())
        .join('\n'),
    )
    .filter((payload) => payload !== '')
    .map((payload) => parseMessage(payload));
}

/** Starts the demo as `npm start` builds it (in memory), on a free port. */
async function startDemo(): Promise<{ origin: string; app: INestApplication }> {
  const app = await NestFactory.create(DemoModule, { forceCloseConnections: true, logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return { app, origin: `http://127.0.0.1:${port}` };
}

/** Runs the page's steps in order against `origin`; throws at the first that does not match. */
async function walk(steps: Step[], origin: string, send: Send): Promise<void> {
  const bound = new Map<string, unknown>();
  const streams: { step: Step; sent: Extract<Sent, { kind: 'stream' }>; expected: unknown[] }[] =
    [];
  // The streams of a section are checked at its end, with its placeholders.
  const checkStreams = async (): Promise<void> => {
    for (const { step, sent, expected } of streams.splice(0)) {
      const deadline = Date.now() + SETTLE_MS;
      while (sent.messages().length < expected.length && Date.now() < deadline) await sleep(50);
      await sleep(200); // room for an event the page does not show
      const messages = sent.messages();
      await sent.close();
      const why = mismatch(expected, messages, bound);
      if (why) throw new Error(`${step.heading}: ${why}\nevents: ${JSON.stringify(messages)}`);
    }
  };
  let section: string | undefined;
  try {
    for (const step of steps) {
      if (step.section !== section) {
        await checkStreams();
        bound.clear();
      }
      section = step.section;
      const expected: unknown = JSON.parse(step.answer);
      const deadline = Date.now() + SETTLE_MS;
      for (;;) {
        const command = substitute(step.command, origin, bound);
        const isGet =
          (JSON.parse(parseCurl(command).body) as { method?: string }).method === 'tasks/get';
        const sent = await send(command);
        if (sent.kind === 'stream') {
          if (!Array.isArray(expected))
            throw new Error(`${step.heading}: a stream; its block must list its events`);
          streams.push({ step, sent, expected });
          break;
        }
        const answer = (
          isSse(sent.contentType) ? onlyEvent(sent.text, step) : parseMessage(sent.text)
        ) as JsonRpcMessage | undefined;
        const code = answer?.error?.code;
        const status = typeof code === 'number' && HTTP_400_CODES.includes(code) ? 400 : 200;
        if (sent.status !== status)
          throw new Error(`${step.heading}: HTTP ${sent.status}, expected ${status}`);
        const why = mismatch(expected, answer, bound);
        if (why === undefined) break;
        // A task changes on its own: a tasks/get is read again until it shows the documented state.
        if (!isGet || Date.now() > deadline)
          throw new Error(`${step.heading}: ${why}\nanswer: ${JSON.stringify(answer)}`);
        await sleep(100);
      }
    }
    await checkStreams();
  } finally {
    for (const { sent } of streams) await sent.close();
  }
}

const HAS_CURL = spawnSync('curl', ['--version']).status === 0;

describe('docs/clients.md against the demo', () => {
  const steps = stepsOf(readFileSync(DOC, 'utf8'));
  const apps: INestApplication[] = [];

  afterAll(async () => {
    for (const app of apps) await app.close();
  });

  it('has the steps of both revisions, each a curl command the test reads', () => {
    expect(steps.length).toBeGreaterThanOrEqual(21);
    expect(new Set(steps.map((step) => step.section)).size).toBe(2);
    for (const step of steps) parseCurl(step.command);
  });

  it('the self-checks: a placeholder binds once, a wrong value or an extra key fails', () => {
    const seen = new Map<string, unknown>();
    expect(
      mismatch(
        { id: '<taskId>', at: '<ISO time>' },
        { id: 'a', at: '2026-01-01T00:00:00.000Z' },
        seen,
      ),
    ).toBeUndefined();
    expect(seen.get('taskId')).toBe('a');
    expect(mismatch({ id: '<taskId>' }, { id: 'b' }, seen)).toMatch(/expected <taskId> = "a"/);
    expect(mismatch({ id: '<taskId>' }, { id: 'a', more: 1 }, seen)).toMatch(/extra \["more"\]/);
    expect(mismatch({ at: '<ISO time>' }, { at: 'yesterday' }, seen)).toMatch(/ISO time/);
    expect(mismatch([1, 2], [1], seen)).toMatch(/2 items/);
  });

  it('answers every step as the page shows it (the requests sent with fetch)', async () => {
    const demo = await startDemo();
    apps.push(demo.app);
    await walk(steps, demo.origin, sendWithFetch);
  }, 30_000);

  (HAS_CURL ? it : it.skip)(
    'answers every step as the page shows it (the commands run by sh and curl)',
    async () => {
      const demo = await startDemo();
      apps.push(demo.app);
      await walk(steps, demo.origin, sendWithCurl);
    },
    30_000,
  );

  it('fails when the page says something the server does not answer', async () => {
    const demo = await startDemo();
    apps.push(demo.app);
    const wrong = steps.map((step) =>
      step.command.includes("'mcp-name: greet'")
        ? { ...step, answer: step.answer.replace('"status": "working"', '"status": "completed"') }
        : step,
    );
    await expect(walk(wrong, demo.origin, sendWithFetch)).rejects.toThrow(
      /status: expected "completed", got "working"/,
    );
  }, 30_000);
});
