import puppeteer, { type Browser, type HTTPRequest, type Page } from 'puppeteer-core';
import { connectTasksClient, type TasksClient } from '../../src/client/index.js';
import { TasksService } from '../../src/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { testContextFetch } from '../support/official-client.js';
import { findChromium } from '../support/chromium.js';
import { bearerOnlyConsoleApp, TOKENS } from './console-app.js';
import { ConsoleTools, Gate } from './console-tools.js';

/**
 * The task console in Chromium for an app whose every route needs `Authorization: Bearer …` (an
 * app-wide guard that reads nothing else and refuses with 401; the console lets in `admin`
 * only). No Basic credentials, no cookie, no extra headers set on the browser: the page asks for
 * a token, keeps it for the tab, and sends it itself, on the stream too. Every request the
 * browser makes is watched: the tokens never appear in a URL, a Referer or the console log.
 */

interface PageElement {
  textContent: string | null;
  hidden?: boolean;
  value?: string;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): { length: number };
  documentElement: { outerHTML: string };
};
declare const sessionStorage: { length: number; key(index: number): string | null };

const ADMIN_TOKEN = TOKENS.admin;
const ALICE_TOKEN = TOKENS.alice;

describe('task console in a browser, bearer token only', () => {
  let running: RunningApp;
  let base: string;
  let tasks: TasksService;
  let gate: Gate;
  let browser: Browser | undefined;
  let page: Page;
  let mcp: TasksClient;
  const problems: string[] = [];
  const seen: { url: string; type: string; method: string; headers: Record<string, string> }[] = [];
  /** While true, the page's listing requests fail: only the stream can bring changes. */
  let blockListing = false;
  /** While true, the server is cutting connections: the browser logs the stream it lost. */
  let dropping = false;

  const watch = (tab: Page): void => {
    tab.on('pageerror', (error) => problems.push(`pageerror: ${String(error)}`));
    tab.on('console', (message) => {
      const text = message.text();
      if (text.includes(ADMIN_TOKEN) || text.includes(ALICE_TOKEN)) {
        problems.push(`a token in the console log: ${text}`);
      }
      // The refusals the page is made to meet (401, 403, the listings blocked below) are logged
      // by the browser itself; anything else is a problem.
      const expected =
        /status of 40[13]/.test(text) ||
        (blockListing && /ERR_FAILED|Failed to fetch/.test(text)) ||
        (dropping && /ERR_INCOMPLETE_CHUNKED_ENCODING/.test(text)) ||
        /favicon/.test(message.location().url ?? '');
      if (message.type() === 'error' && !expected) problems.push(`console: ${text}`);
    });
    tab.on('dialog', (dialog) => {
      problems.push(`dialog: ${dialog.message()}`);
      void dialog.dismiss();
    });
    tab.on('response', (response) => {
      if (response.headers()['www-authenticate'] !== undefined) {
        problems.push(`a challenge from ${response.url()}`);
      }
    });
    tab.on('request', (request: HTTPRequest) => {
      seen.push({
        url: request.url(),
        type: request.resourceType(),
        method: request.method(),
        headers: request.headers(),
      });
      const url = new URL(request.url());
      if (blockListing && url.pathname.endsWith('/api/tasks')) void request.abort('failed');
      else void request.continue();
    });
  };

  const statusOf = (tab: Page, taskId: string): Promise<string | null> =>
    tab.$eval(`tr[data-task-id="${taskId}"] td.state`, (cell) => cell.textContent);
  const waitForStatus = (taskId: string, status: string): Promise<unknown> =>
    page.waitForFunction(
      (id, text) =>
        document.querySelector(`tr[data-task-id="${id}"] td.state`)?.textContent === text,
      { timeout: 5_000 },
      taskId,
      status,
    );
  const signIn = async (tab: Page, token: string): Promise<void> => {
    await tab.waitForSelector('#sign-in:not([hidden]) #token', { timeout: 5_000 });
    await tab.type('#token', token);
    await tab.click('#sign-in-form button[type="submit"]');
  };
  const hidden = (tab: Page, selector: string): Promise<boolean | undefined> =>
    tab.$eval(selector, (node) => (node as unknown as PageElement).hidden);
  const storedTokens = (tab: Page): Promise<number> => tab.evaluate(() => sessionStorage.length);

  beforeAll(async () => {
    const executablePath = findChromium();
    running = await startApp(bearerOnlyConsoleApp([Gate, ConsoleTools]), 'express');
    base = new URL('/', running.url).href;
    tasks = running.app.get(TasksService);
    gate = running.app.get(Gate);
    mcp = await connectTasksClient(running.url, {
      fetch: testContextFetch,
      headers: { Authorization: `Bearer ${ALICE_TOKEN}` },
    });
    browser = await puppeteer.launch({
      executablePath,
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    });
    page = await browser.newPage();
    await page.setRequestInterception(true);
    watch(page);
  });

  afterAll(async () => {
    await browser?.close();
    await mcp?.close();
    await running?.close();
  });

  afterEach(() => {
    // The tokens never travel in a URL or a Referer; every API request carries one of them, or
    // none before the sign-in.
    for (const request of seen) {
      for (const token of [ADMIN_TOKEN, ALICE_TOKEN]) {
        expect(request.url).not.toContain(token);
        expect(request.headers.referer ?? '').not.toContain(token);
      }
      expect(request.headers.authorization ?? 'Bearer').toMatch(/^Bearer\b/);
    }
    expect(problems).toEqual([]);
  });

  it('opens on a sign-in form; a wrong token gets a clear error and is not kept', async () => {
    const response = await page.goto(`${base}mcp-tasks`, { waitUntil: 'domcontentloaded' });
    // The app's guard refuses the page load (no token on it): the page comes with that refusal.
    expect(response?.status()).toBe(401);
    await page.waitForSelector('#sign-in:not([hidden])', { timeout: 5_000 });
    expect(await hidden(page, '#main')).toBe(true);
    expect(await page.$eval('#sign-in-why', (why) => why.textContent)).toBe(
      'This console needs a bearer token.',
    );
    expect(await page.$eval('#connection-text', (text) => text.textContent)).toBe('Signed out');

    await signIn(page, 'not-a-real-token');
    await page.waitForFunction(() => document.querySelector('#sign-in-error')?.hidden === false, {
      timeout: 5_000,
    });
    expect(await page.$eval('#sign-in-error', (error) => error.textContent)).toBe(
      'The token was refused (401: Unknown bearer token).',
    );
    expect(await hidden(page, '#main')).toBe(true);
    expect(await storedTokens(page)).toBe(0);

    await signIn(page, 'two words');
    expect(await page.$eval('#sign-in-error', (error) => error.textContent)).toBe(
      'A bearer token is one word of printable ASCII characters, without spaces.',
    );
  });

  it('with the admin token: every owner’s tasks, changes live through the fetch stream, cancel', async () => {
    const bobs = await tasks.create({ principal: 'bob' }, {}, { toolName: 'bobs_job' });
    const held = await mcp.callTool('hold');
    const heldId = held.taskId!;
    await signIn(page, ADMIN_TOKEN);
    await page.waitForSelector(`tr[data-task-id="${heldId}"]`, { timeout: 5_000 });
    await page.waitForSelector(`tr[data-task-id="${bobs.taskId}"]`, { timeout: 5_000 });
    expect(await page.$eval(`tr[data-task-id="${heldId}"] td.owner`, (c) => c.textContent)).toBe(
      'alice',
    );
    await page.waitForSelector('#connection[data-state="live"]', { timeout: 5_000 });
    expect(await hidden(page, '#sign-in')).toBe(true);
    expect(await hidden(page, '#sign-out')).toBe(false);
    // The token is in this tab's session storage only: not in the form, not in the page.
    expect(await page.$eval('#token', (input) => (input as unknown as PageElement).value)).toBe('');
    expect(await page.evaluate(() => document.documentElement.outerHTML)).not.toContain(
      ADMIN_TOKEN,
    );
    expect(await storedTokens(page)).toBe(1);

    // The stream is a fetch carrying the token (an EventSource could not), and so is every API
    // request since the sign-in.
    const stream = seen.filter((request) => request.url.endsWith('/mcp-tasks/api/stream'));
    expect(stream.map((request) => request.type)).not.toContain('eventsource');
    const streamAsAdmin = stream.filter(
      (request) => request.headers.authorization === `Bearer ${ADMIN_TOKEN}`,
    );
    expect(streamAsAdmin.length).toBeGreaterThan(0);
    expect(streamAsAdmin.every((request) => request.type === 'fetch')).toBe(true);

    // With the listing blocked, a change and a new task can only come through the stream.
    blockListing = true;
    try {
      gate.open();
      await waitForStatus(heldId, 'completed');
      const fresh = await mcp.callTool('wait_for_cancel');
      await page.waitForSelector(`tr[data-task-id="${fresh.taskId!}"]`, { timeout: 5_000 });
      expect(await statusOf(page, fresh.taskId!)).toBe('working');
    } finally {
      blockListing = false;
    }

    // Cancel from the page: the POST carries the token, the task ends cancelled in the store.
    const doomed = await mcp.callTool('wait_for_cancel');
    const doomedId = doomed.taskId!;
    await page.waitForSelector(`tr[data-task-id="${doomedId}"]`, { timeout: 5_000 });
    await page.click(`tr[data-task-id="${doomedId}"]`);
    await page.waitForFunction(
      (id) => document.querySelector('#detail-body .task-id')?.textContent === id,
      { timeout: 5_000 },
      doomedId,
    );
    await page.click('#cancel-task');
    await waitForStatus(doomedId, 'cancelled');
    expect((await tasks.status(doomedId)).status).toBe('cancelled');
    const cancel = seen.find((request) => request.url.endsWith(`/${doomedId}/cancel`));
    expect(cancel?.method).toBe('POST');
    expect(cancel?.headers.authorization).toBe(`Bearer ${ADMIN_TOKEN}`);
  });

  it('reconnects when the stream drops, with the token again, and goes on live', async () => {
    const before = seen.filter((request) => request.url.endsWith('/api/stream')).length;
    // Every open connection ends, the page's stream among them.
    dropping = true;
    try {
      (running.app.getHttpServer() as { closeAllConnections(): void }).closeAllConnections();
      await page.waitForSelector('#connection[data-state="reconnecting"]', { timeout: 5_000 });
      await page.waitForSelector('#connection[data-state="live"]', { timeout: 10_000 });
    } finally {
      dropping = false;
    }
    const again = seen.filter((request) => request.url.endsWith('/api/stream')).slice(before);
    expect(again.map((request) => request.headers.authorization)).toEqual([
      `Bearer ${ADMIN_TOKEN}`,
    ]);
    blockListing = true;
    try {
      const after = await mcp.callTool('wait_for_cancel');
      await page.waitForSelector(`tr[data-task-id="${after.taskId!}"]`, { timeout: 5_000 });
    } finally {
      blockListing = false;
    }
  });

  it('a reload keeps the session (the tab’s token); Sign out forgets it', async () => {
    const response = await page.reload({ waitUntil: 'domcontentloaded' });
    expect(response?.status()).toBe(401);
    await page.waitForSelector('#connection[data-state="live"]', { timeout: 5_000 });
    await page.waitForFunction(() => document.querySelectorAll('#task-rows tr').length > 0, {
      timeout: 5_000,
    });
    expect(await hidden(page, '#sign-in')).toBe(true);

    await page.click('#sign-out');
    await page.waitForSelector('#sign-in:not([hidden])', { timeout: 5_000 });
    expect(await page.$$eval('#task-rows tr', (rows) => rows.length)).toBe(0);
    expect(await storedTokens(page)).toBe(0);
    const streams = seen.filter((request) => request.url.endsWith('/api/stream')).length;
    await page.reload({ waitUntil: 'domcontentloaded' });
    await page.waitForSelector('#sign-in:not([hidden])', { timeout: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Signed out, the page asked once without a token and stopped (no reconnection loop).
    expect(seen.filter((request) => request.url.endsWith('/api/stream')).length).toBe(streams + 1);
  });

  it('another tab starts signed out; a token the console refuses sees no task', async () => {
    const before = await tasks.create({ principal: 'alice' }, {}, { toolName: 'alices_job' });
    await signIn(page, ADMIN_TOKEN);
    await page.waitForSelector(`tr[data-task-id="${before.taskId}"]`, { timeout: 5_000 });

    const other = await browser!.newPage();
    await other.setRequestInterception(true);
    watch(other);
    try {
      const response = await other.goto(`${base}mcp-tasks`, { waitUntil: 'domcontentloaded' });
      expect(response?.status()).toBe(401);
      await signIn(other, ALICE_TOKEN);
      await other.waitForFunction(
        () => document.querySelector('#sign-in-error')?.hidden === false,
        { timeout: 5_000 },
      );
      expect(await other.$eval('#sign-in-error', (error) => error.textContent)).toBe(
        'This token may not use this console (403: Admins only).',
      );
      expect(await other.$$eval('#task-rows tr', (rows) => rows.length)).toBe(0);
      expect(await other.evaluate(() => document.documentElement.outerHTML)).not.toContain(
        before.taskId,
      );
      // The first tab is still signed in as admin.
      expect(await hidden(page, '#sign-in')).toBe(true);
      expect(await statusOf(page, before.taskId)).toBe('working');
    } finally {
      await other.close();
    }
  });
});
