import { afterAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DemoModule } from '../../examples/demo.module.js';
import { SseReader } from '../support/sse.js';
import { type JsonRpcMessage, parseMessage } from '../support/wire.js';

/**
 * docs/clients.md, run against the demo (DemoModule in memory, as `npm start` runs it, on a free
 * port): every ```sh block (one curl command) is run, with the page's origin swapped for the
 * server's and the placeholders of earlier answers filled in, and its answer must equal the ```json
 * block that follows it. The page is walked twice on fresh servers: the requests parsed and sent
 * with `fetch`, then the commands themselves run by `sh` with the real curl (skipped without curl).
 * In a documented answer, `"<ISO time>"` matches any ISO 8601 time; any other `"<name>"` matches
 * any string or number the first time it appears in a `## ` section and must be that same value
 * afterwards (and later commands get it); inside a longer string (`"prefix:<name>:key"`) it stands
 * for a part of that string the same way. An array item `"<N more like the one before>"` stands for
 * exactly N items, each matching the item before it (binding nothing). Everything else must be
 * equal, with no key missing or extra, and the HTTP status is 400 for -32020/-32021/-32022, else
 * 200. A `curl -N` answer (a listen, a streamed tasks/result) is read on the side while the later
 * steps run, once its first event has come; its block lists the `data` of its events, in order, and
 * is checked at the end of its section. A tasks/get or tasks/list is read again (up to 5 s) until it
 * shows the documented state, as a client polls. A ```text block after a command is what curl
 * prints, exactly (`-w '%{http_code}\n'` prints the status). A loop, `for i in $(seq N); do <curl
 * -o /dev/null …> done`, has no answer block: its curl runs N times, each a JSON-RPC result on HTTP
 * 200, and it prints nothing.
 */

const DOC = join(process.cwd(), 'docs/clients.md');
/** The origin the page's commands name (`npm start`'s). */
const DOC_ORIGIN = 'http://localhost:3000';
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/;
const PLACEHOLDER = /^<([^<>]+)>$/;
/** A placeholder inside a longer string (the names commands are filled in with). */
const EMBEDDED = /<([A-Za-z][\w ]*)>/;
/** An array item standing for N more items like the one before it. */
const MORE = /^<(\d+) more like the one before>$/;
/** A loop of one curl command: `for i in $(seq N); do` … `done`. */
const LOOP = /^for i in \$\(seq (\d+)\); do\n([\s\S]*?)\ndone\n?$/;
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
  /** The block that follows the command: a JSON answer, or what curl prints; none for a loop. */
  answer?: { lang: 'json' | 'text'; body: string };
}

/** The page's ```sh blocks, each with the ```json or ```text block that follows it (a loop has none). */
export function stepsOf(markdown: string): Step[] {
  const steps: Step[] = [];
  let section = '';
  let heading = '';
  let pending: { section: string; heading: string; command: string } | undefined;
  let afterSnippet = false;
  const fence = /^(#{1,6} .*)$|^```(\w*)\n([\s\S]*?)^```$/gm;
  for (const match of markdown.matchAll(fence)) {
    if (match[1] !== undefined) {
      heading = match[1];
      if (heading.startsWith('## ')) section = heading;
      continue;
    }
    const [, , lang, body] = match;
    // A TypeScript snippet and what it prints: test/docs/clients-code.e2e-spec.ts runs those.
    const ofSnippet = lang === 'ts' || (lang === 'text' && afterSnippet);
    afterSnippet = lang === 'ts';
    if (ofSnippet) continue;
    if (lang === 'sh') {
      if (pending) throw new Error(`${pending.heading}: a sh block without its json answer`);
      if (LOOP.test(body!)) steps.push({ section, heading, command: body! });
      else pending = { section, heading, command: body! };
    } else if (lang === 'json' || lang === 'text') {
      if (!pending) throw new Error(`${heading}: a ${lang} block with no command before it`);
      steps.push({ ...pending, answer: { lang, body: body! } });
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
  /** `-o /dev/null`: the body is not printed. */
  discard: boolean;
  /** `-w`'s format, printed after the body (the page uses `%{http_code}` and `\n` only). */
  writeOut?: string;
}

/** The request a `curl` command sends (the flags the page uses: -sS, -N, -H, -d, -o /dev/null, -w). */
export function parseCurl(command: string): CurlRequest {
  const words = shellWords(command);
  if (words[0] !== 'curl') throw new Error(`not a curl command: ${command}`);
  let url: string | undefined;
  const headers: Record<string, string> = {};
  let body: string | undefined;
  let discard = false;
  let writeOut: string | undefined;
  for (let i = 1; i < words.length; i++) {
    const word = words[i]!;
    if (word === '-sS' || word === '-N') continue;
    if (word === '-o' && words[i + 1] === '/dev/null') {
      discard = true;
      i++;
    } else if (word === '-w' && /^(?:%\{http_code\}|\\n)+$/.test(words[i + 1] ?? '')) {
      writeOut = words[++i];
    } else if (word === '-H') {
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
  return { url, headers, body, discard, ...(writeOut !== undefined && { writeOut }) };
}

/** What curl prints for an answer, given the command's -o and -w. */
function printed(request: CurlRequest, status: number, body: string): string {
  const after = (request.writeOut ?? '').replaceAll('%{http_code}', String(status));
  return (request.discard ? '' : body) + after.replaceAll('\\n', '\n');
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
  const placeholder =
    typeof expected === 'string' && !MORE.test(expected) ? PLACEHOLDER.exec(expected) : null;
  if (!placeholder && typeof expected === 'string' && EMBEDDED.test(expected)) {
    return compareEmbedded(expected, actual, bound, fresh, path);
  }
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
    const items = expandMore(expected, path);
    if (actual.length !== items.length)
      return `${path}: expected ${items.length} items, got ${actual.length}: ${JSON.stringify(actual)}`;
    for (let i = 0; i < items.length; i++) {
      const { item, repeat } = items[i]!;
      // A repeat binds into a map of its own: its placeholders take any value, each time.
      const why = compare(item, actual[i], bound, repeat ? new Map() : fresh, `${path}[${i}]`);
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

/** The documented items of an array, its `"<N more like the one before>"` items spelled out. */
function expandMore(expected: unknown[], path: string): { item: unknown; repeat: boolean }[] {
  const items: { item: unknown; repeat: boolean }[] = [];
  for (const item of expected) {
    const more = typeof item === 'string' ? MORE.exec(item) : null;
    if (!more) {
      items.push({ item, repeat: false });
      continue;
    }
    const before = items.at(-1);
    if (before === undefined || before.repeat)
      throw new Error(`${path}: ${item} must follow an item of its own`);
    for (let n = 0; n < Number(more[1]); n++) items.push({ item: before.item, repeat: true });
  }
  return items;
}

/** A string with placeholders inside: the rest must be equal, each placeholder one part. */
function compareEmbedded(
  expected: string,
  actual: unknown,
  bound: Map<string, unknown>,
  fresh: Map<string, unknown>,
  path: string,
): string | undefined {
  const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const parts = expected.split(new RegExp(EMBEDDED.source.replace('(', '(?:'), 'g'));
  const names = [...expected.matchAll(new RegExp(EMBEDDED.source, 'g'))].map((m) => m[1]!);
  const unbound: string[] = [];
  let source = escape(parts[0]!);
  names.forEach((name, i) => {
    const known = bound.has(name) ? bound.get(name) : fresh.get(name);
    if (known === undefined) {
      unbound.push(name);
      source += '(.+?)';
    } else source += escape(String(known));
    source += escape(parts[i + 1]!);
  });
  const match = typeof actual === 'string' ? new RegExp(`^${source}$`).exec(actual) : null;
  if (!match) return `${path}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`;
  unbound.forEach((name, i) => fresh.set(name, match[i + 1]));
  return undefined;
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
function onlyEvent(text: string, where: string): unknown {
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
  if (data.length !== 1) throw new Error(`${where}: ${data.length} events, expected one:\n${text}`);
  return parseMessage(data[0]!);
}

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** What one command got: a whole answer, or a stream that stays open (a listen). */
type Sent =
  | { kind: 'answer'; status: number; contentType: string; text: string }
  | { kind: 'stream'; messages(): unknown[]; close(): Promise<void> };

/** Runs the page's commands (their placeholders filled in), one way. */
interface Runner {
  /** A command whose answer the page shows as JSON. */
  send(command: string): Promise<Sent>;
  /** A command whose output the page shows as text: what curl prints. */
  print(command: string): Promise<string>;
  /** A loop: its curl command, `times` times (each must answer a result on HTTP 200). */
  repeat(command: string, curl: string, times: number): Promise<void>;
}

const isSse = (contentType: string): boolean => /^text\/event-stream/i.test(contentType);

/** The command's request, sent with `fetch`. */
const sendWithFetch = async (command: string): Promise<Sent> => {
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

/** The commands' requests, sent with `fetch` (curl's output made from the answer). */
const withFetch: Runner = {
  send: sendWithFetch,
  async print(command) {
    const request = parseCurl(command);
    const response = await fetch(request.url, {
      method: 'POST',
      headers: request.headers,
      body: request.body,
    });
    return printed(request, response.status, await response.text());
  },
  async repeat(_command, curl, times) {
    const request = parseCurl(curl);
    if (!request.discard)
      throw new Error(`a loop's curl must print nothing (-o /dev/null): ${curl}`);
    for (let n = 0; n < times; n++) {
      const sent = await sendWithFetch(curl);
      if (sent.kind !== 'answer') throw new Error(`a loop's curl got a stream: ${curl}`);
      const answer = (
        isSse(sent.contentType) ? onlyEvent(sent.text, 'a loop') : parseMessage(sent.text)
      ) as JsonRpcMessage | undefined;
      if (sent.status !== 200 || answer?.result === undefined)
        throw new Error(`a loop's curl, run ${n + 1}: HTTP ${sent.status} ${sent.text}`);
    }
  },
};

/** Runs a command with `sh`; its exit code and what it printed. */
async function shell(command: string): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn('sh', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const code = await new Promise<number | null>((done) => child.once('exit', done));
  return { code, out, err };
}

/** The commands themselves, run by `sh` with the real curl. */
const withCurl: Runner = {
  send: (command) => sendWithCurl(command),
  async print(command) {
    const { code, out, err } = await shell(command);
    if (code !== 0) throw new Error(`curl exited with ${code}: ${err}`);
    return out;
  },
  async repeat(command) {
    const { code, out, err } = await shell(command);
    if (code !== 0 || out !== '' || err !== '')
      throw new Error(`the loop exited with ${code}, printing ${JSON.stringify(out + err)}`);
  },
};

/** The command itself, run by `sh` with the real curl (a stream is read as curl prints it). */
const sendWithCurl = async (command: string): Promise<Sent> => {
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
async function walk(
  steps: Step[],
  origin: string,
  run: Runner,
  settleMs = SETTLE_MS,
): Promise<void> {
  const bound = new Map<string, unknown>();
  const streams: { step: Step; sent: Extract<Sent, { kind: 'stream' }>; expected: unknown[] }[] =
    [];
  // The streams of a section are checked at its end, with its placeholders.
  const checkStreams = async (): Promise<void> => {
    for (const { step, sent, expected } of streams.splice(0)) {
      const deadline = Date.now() + settleMs;
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
      if (step.answer === undefined) {
        const [, times, curl] = LOOP.exec(step.command)!;
        const command = substitute(step.command, origin, bound);
        await run.repeat(command, substitute(curl!, origin, bound), Number(times));
        continue;
      }
      if (step.answer.lang === 'text') {
        const out = await run.print(substitute(step.command, origin, bound));
        if (out !== step.answer.body)
          throw new Error(
            `${step.heading}: curl printed ${JSON.stringify(out)}, the page shows ${JSON.stringify(step.answer.body)}`,
          );
        continue;
      }
      const expected: unknown = JSON.parse(step.answer.body);
      const deadline = Date.now() + settleMs;
      for (;;) {
        const command = substitute(step.command, origin, bound);
        const { method } = JSON.parse(parseCurl(command).body) as { method?: string };
        const sent = await run.send(command);
        if (sent.kind === 'stream') {
          if (!Array.isArray(expected))
            throw new Error(`${step.heading}: a stream; its block must list its events`);
          streams.push({ step, sent, expected });
          // The next step may answer what the stream asks: it waits for the first event.
          while (sent.messages().length === 0 && Date.now() < deadline) await sleep(20);
          if (sent.messages().length === 0)
            throw new Error(`${step.heading}: no event on the stream within ${settleMs} ms`);
          break;
        }
        const answer = (
          isSse(sent.contentType) ? onlyEvent(sent.text, step.heading) : parseMessage(sent.text)
        ) as JsonRpcMessage | undefined;
        const code = answer?.error?.code;
        const status = typeof code === 'number' && HTTP_400_CODES.includes(code) ? 400 : 200;
        if (sent.status !== status)
          throw new Error(`${step.heading}: HTTP ${sent.status}, expected ${status}`);
        const why = mismatch(expected, answer, bound);
        if (why === undefined) break;
        // A task changes on its own: a tasks/get or tasks/list is read again until it shows the
        // documented state.
        const rereads = method === 'tasks/get' || method === 'tasks/list';
        if (!rereads || Date.now() > deadline)
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
    expect(steps.length).toBeGreaterThanOrEqual(29);
    expect(new Set(steps.map((step) => step.section)).size).toBe(2);
    for (const step of steps) parseCurl(LOOP.exec(step.command)?.[2] ?? step.command);
  });

  it('links only to headings the page has (GitHub-style anchors)', () => {
    const markdown = readFileSync(DOC, 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
    const seen = new Map<string, number>();
    const anchors = new Set<string>();
    for (const [, text] of markdown.matchAll(/^#{1,6} (.*)$/gm)) {
      const slug = text!
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-');
      const times = seen.get(slug) ?? 0;
      seen.set(slug, times + 1);
      anchors.add(times === 0 ? slug : `${slug}-${times}`);
    }
    const links = [...markdown.matchAll(/\]\(#([^)]+)\)/g)].map((match) => match[1]!);
    expect(links.length).toBeGreaterThanOrEqual(5);
    expect(links.filter((link) => !anchors.has(link))).toEqual([]);
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
    // A placeholder inside a string, bound or not.
    expect(mismatch({ id: 'input:<taskId>:name' }, { id: 'input:a:name' }, seen)).toBeUndefined();
    expect(mismatch({ id: 'input:<taskId>:name' }, { id: 'input:b:name' }, seen)).toMatch(
      /expected "input:<taskId>:name"/,
    );
    expect(mismatch({ id: 'x:<key>' }, { id: 'x:k1' }, seen)).toBeUndefined();
    expect(seen.get('key')).toBe('k1');
    // "<N more like the one before>": exactly N more, each like the item before, binding nothing.
    const more = [{ id: '<first>', n: 1 }, '<2 more like the one before>', { id: '<last>' }];
    const list = (...ids: string[]) => ids.map((id) => ({ id, n: 1 }));
    const once = new Map<string, unknown>();
    expect(mismatch(more, [...list('f', 'g', 'h'), { id: 'a' }], once)).toBeUndefined();
    expect([...once]).toEqual([
      ['first', 'f'],
      ['last', 'a'],
    ]);
    expect(mismatch(more, [...list('f', 'g'), { id: 'a' }], new Map())).toMatch(/4 items, got 3/);
    expect(mismatch(more, [...list('f', 'g'), { id: 'h', n: 2 }, { id: 'a' }], new Map())).toMatch(
      /\[2\]\.n: expected 1, got 2/,
    );
  });

  it('answers every step as the page shows it (the requests sent with fetch)', async () => {
    const demo = await startDemo();
    apps.push(demo.app);
    await walk(steps, demo.origin, withFetch);
  }, 30_000);

  (HAS_CURL ? it : it.skip)(
    'answers every step as the page shows it (the commands run by sh and curl)',
    async () => {
      const demo = await startDemo();
      apps.push(demo.app);
      await walk(steps, demo.origin, withCurl);
    },
    30_000,
  );

  /** The 2025-11-25 steps, one answer block changed: the step whose command includes `where`. */
  const changed = (where: string, from: string, to: string): Step[] => {
    const legacy = steps.filter((step) => step.section === '## The 2025-11-25 revision');
    const hits = legacy.filter((step) => step.command.includes(where) && step.answer);
    if (hits.length !== 1) throw new Error(`${hits.length} steps include ${where}`);
    if (!hits[0]!.answer!.body.includes(from)) throw new Error(`no ${from} in ${where}'s answer`);
    return legacy.map((step) =>
      step === hits[0]
        ? { ...step, answer: { ...step.answer!, body: step.answer!.body.replace(from, to) } }
        : step,
    );
  };

  it.each([
    {
      what: 'the elicitation request on the tasks/result stream with another id',
      page: () =>
        changed('"method": "tasks/result", "params": {"taskId": "<greetTaskId>"}', ':name', ':nom'),
      error: /expected "nestjs-mcp-tasks\/input:<greetTaskId>:nom"/,
    },
    {
      what: 'the answer POST printing another status',
      page: () => changed('"id": "nestjs-mcp-tasks/input:', '202', '200'),
      error: /curl printed "202\\n", the page shows "200\\n"/,
    },
    {
      what: 'a first page of 49 tasks',
      page: () => changed('"id": 13, ', '<47 more', '<46 more'),
      error: /\$\.result\.tasks: expected 49 items, got 50/,
    },
    {
      what: 'a first page without nextCursor',
      page: () => changed('"id": 13, ', '"nextCursor": "<cursor>",', ''),
      error: /keys missing \[\], extra \["nextCursor"\]/,
    },
    {
      what: 'the greeting on the second page',
      page: () => changed('"id": 14, ', '<taskId>', '<greetTaskId>'),
      error: /expected <greetTaskId> = /,
    },
  ])(
    'fails on a wrong 2025-11-25 page: $what',
    async ({ page, error }) => {
      const demo = await startDemo();
      apps.push(demo.app);
      await expect(walk(page(), demo.origin, withFetch, 1_000)).rejects.toThrow(error);
    },
    30_000,
  );

  it('fails when the page says something the server does not answer', async () => {
    const demo = await startDemo();
    apps.push(demo.app);
    const wrong = steps.map((step) =>
      step.command.includes("'mcp-name: greet'")
        ? {
            ...step,
            answer: {
              lang: 'json' as const,
              body: step.answer!.body.replace('"status": "working"', '"status": "completed"'),
            },
          }
        : step,
    );
    await expect(walk(wrong, demo.origin, withFetch)).rejects.toThrow(
      /status: expected "completed", got "working"/,
    );
  }, 30_000);
});
