import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { connectTasksClient, type TasksClient } from '../../src/client/index.js';
import { TasksService } from '../../src/index.js';
import { startApp, type RunningApp } from '../support/app.js';
import { testContextFetch } from '../support/official-client.js';
import { findChromium } from '../support/chromium.js';
import { consoleApp } from './console-app.js';
import { ConsoleTools, Gate, HTML_MESSAGE } from './console-tools.js';

/**
 * The task console in a real browser (the system's Chromium through puppeteer-core): an admin
 * opens the page, sees the tasks there, sees new ones appear and change without a reload, opens
 * one, cancels it, and reads a status message full of HTML as text. The browser sends the
 * credentials itself here (every request carries the same header, as with HTTP Basic or a
 * cookie): the page never asks for a token. A non-admin gets 403 and the sign-in form. The page
 * with its detail open is saved to .artifacts/console.png. The bearer-token sign-in is
 * console-bearer.browser.e2e-spec.ts.
 */

/** What the functions run in the page use of it (this project compiles without the DOM types). */
interface PageElement {
  textContent: string | null;
  hidden?: boolean;
  dataset?: Record<string, string | undefined>;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): { length: number };
};

const ROOT = resolve(import.meta.dirname, '../..');

describe('task console in a browser', () => {
  let running: RunningApp;
  let base: string;
  let tasks: TasksService;
  let gate: Gate;
  let browser: Browser | undefined;
  let page: Page;
  let mcp: TasksClient;
  const problems: string[] = [];

  const statusOf = (taskId: string): Promise<string | null> =>
    page.$eval(`tr[data-task-id="${taskId}"] td.state`, (cell) => cell.textContent);

  const waitForStatus = (taskId: string, status: string): Promise<unknown> =>
    page.waitForFunction(
      (id, text) =>
        document.querySelector(`tr[data-task-id="${id}"] td.state`)?.textContent === text,
      { timeout: 5_000 },
      taskId,
      status,
    );

  beforeAll(async () => {
    const executablePath = findChromium();
    running = await startApp(consoleApp({}, {}, [Gate, ConsoleTools]), 'express');
    base = new URL('/', running.url).href;
    tasks = running.app.get(TasksService);
    gate = running.app.get(Gate);
    mcp = await connectTasksClient(running.url, {
      fetch: testContextFetch,
      headers: { Authorization: 'Bearer alice' },
    });
    browser = await puppeteer.launch({
      executablePath,
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1440, height: 900 });
    page.on('pageerror', (error) => problems.push(`pageerror: ${String(error)}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !/favicon/.test(message.location().url ?? '')) {
        problems.push(`console: ${message.text()} (${message.location().url ?? ''})`);
      }
    });
    page.on('dialog', (dialog) => {
      problems.push(`dialog: ${dialog.message()}`);
      void dialog.dismiss();
    });
  });

  afterAll(async () => {
    await browser?.close();
    await mcp?.close();
    await running?.close();
  });

  it('lists, follows live, shows, cancels, and renders task data as text only', async () => {
    const seeded = await tasks.create({ principal: 'bob' }, {}, { toolName: 'seeded_job' });
    await page.setExtraHTTPHeaders({ Authorization: 'Bearer admin' });
    const response = await page.goto(`${base}mcp-tasks`, { waitUntil: 'domcontentloaded' });
    expect(response?.status()).toBe(200);

    // The page lists what exists, and goes live.
    await page.waitForSelector(`tr[data-task-id="${seeded.taskId}"]`, { timeout: 5_000 });
    expect(await statusOf(seeded.taskId)).toBe('working');
    await page.waitForSelector('#connection[data-state="live"]', { timeout: 5_000 });

    // A task made through the MCP endpoint appears without a reload, then completes live.
    const held = await mcp.callTool('hold');
    const heldId = held.taskId!;
    await page.waitForSelector(`tr[data-task-id="${heldId}"]`, { timeout: 5_000 });
    await page.waitForFunction(
      (id) =>
        document.querySelector(`tr[data-task-id="${id}"] td.message`)?.textContent ===
        'Holding until told',
      { timeout: 5_000 },
      heldId,
    );
    expect(await statusOf(heldId)).toBe('working');
    // Newest first: the new task sits above the seeded one.
    const order = await page.$$eval('#task-rows tr', (rows) =>
      rows.map((row) => (row as unknown as PageElement).dataset!.taskId),
    );
    expect(order.indexOf(heldId)).toBeLessThan(order.indexOf(seeded.taskId));
    gate.open();
    await waitForStatus(heldId, 'completed');

    // Open a task, cancel it from the detail: cancelled in the page and in the store.
    const doomed = await mcp.callTool('wait_for_cancel');
    const doomedId = doomed.taskId!;
    await page.waitForSelector(`tr[data-task-id="${doomedId}"]`, { timeout: 5_000 });
    await page.click(`tr[data-task-id="${doomedId}"]`);
    await page.waitForFunction(
      (id) => document.querySelector('#detail-body .task-id')?.textContent === id,
      { timeout: 5_000 },
      doomedId,
    );
    expect(await page.$eval('#detail', (detail) => (detail as unknown as PageElement).hidden)).toBe(
      false,
    );
    await page.click('#cancel-task');
    await waitForStatus(doomedId, 'cancelled');
    await page.waitForFunction(
      () =>
        document.querySelector('#detail-body .facts .status')?.textContent === 'cancelled' &&
        document.querySelector('#cancel-task') === null,
      { timeout: 5_000 },
    );
    expect((await tasks.status(doomedId)).status).toBe('cancelled');
    const history = await page.$$eval('#detail-body .history li .status', (pills) =>
      pills.map((pill) => pill.textContent),
    );
    expect(history[0]).toBe('working');
    expect(history[history.length - 1]).toBe('cancelled');

    // A status message full of HTML is shown as text, in the table and in the detail.
    const html = await mcp.callTool('html_status');
    const htmlId = html.taskId!;
    await page.waitForFunction(
      (id, text) =>
        document.querySelector(`tr[data-task-id="${id}"] td.message`)?.textContent === text,
      { timeout: 5_000 },
      htmlId,
      HTML_MESSAGE,
    );
    await page.click(`tr[data-task-id="${htmlId}"]`);
    await page.waitForFunction(
      (id) => document.querySelector('#detail-body .task-id')?.textContent === id,
      { timeout: 5_000 },
      htmlId,
    );
    expect(await page.$$eval('img, b', (found) => found.length)).toBe(0);
    const facts = await page.$eval('#detail-body .facts', (list) => list.textContent);
    expect(facts).toContain(HTML_MESSAGE);

    mkdirSync(join(ROOT, '.artifacts'), { recursive: true });
    await page.screenshot({ path: join(ROOT, '.artifacts/console.png') as `${string}.png` });
    expect(problems).toEqual([]);
  });

  it('filters by tool and owner, and loads more with the cursor', async () => {
    for (let index = 0; index < 55; index++) {
      await tasks.create({ principal: 'carol' }, {}, { toolName: 'bulk_job' });
    }
    const rows = (): Promise<string[]> =>
      page.$$eval('#task-rows tr td.tool', (cells) => cells.map((cell) => cell.textContent ?? ''));
    const moreHidden = (): Promise<boolean> =>
      page.$eval('#more', (more) => (more as unknown as PageElement).hidden === true);

    await page.click('#close-detail');
    await page.type('#filter-tool', 'bulk_job');
    await page.click('#filters button[type="submit"]');
    await page.waitForFunction(() => document.querySelectorAll('#task-rows tr').length === 50, {
      timeout: 5_000,
    });
    expect(new Set(await rows())).toEqual(new Set(['bulk_job']));
    expect(await moreHidden()).toBe(false);
    await page.click('#more');
    await page.waitForFunction(() => document.querySelectorAll('#task-rows tr').length === 55, {
      timeout: 5_000,
    });
    expect(await moreHidden()).toBe(true);

    await page.type('#filter-owner', 'nobody');
    await page.click('#filters button[type="submit"]');
    await page.waitForFunction(() => document.querySelectorAll('#task-rows tr').length === 0, {
      timeout: 5_000,
    });
    expect(await page.$eval('#empty', (empty) => (empty as unknown as PageElement).hidden)).toBe(
      false,
    );
    await page.click('#filters button[type="reset"]');
    await page.waitForFunction(() => document.querySelectorAll('#task-rows tr').length === 50, {
      timeout: 5_000,
    });
    expect(problems).toEqual([]);
  });

  it('a non-admin gets 403 for the page, a sign-in form that says so, and no task', async () => {
    const other = await browser!.newPage();
    try {
      await other.setExtraHTTPHeaders({ Authorization: 'Bearer alice' });
      const response = await other.goto(`${base}mcp-tasks`, { waitUntil: 'domcontentloaded' });
      expect(response?.status()).toBe(403);
      await other.waitForSelector('#sign-in:not([hidden])', { timeout: 5_000 });
      expect(await other.$eval('#sign-in-why', (why) => why.textContent)).toBe(
        'You are not allowed to use this console (403: Admins only). Sign in with a token that is.',
      );
      expect(await other.$$eval('#task-rows tr', (rows) => rows.length)).toBe(0);
      expect(await other.$eval('#main', (main) => (main as unknown as PageElement).hidden)).toBe(
        true,
      );
    } finally {
      await other.close();
    }
  });
});

/**
 * The console's admin rule for the browser's own credentials: HTTP Basic `admin` (any password),
 * with the challenge that brings up a browser's prompt, or the cookie `session=<SESSION>`.
 */
const SESSION = 'cookie-session-for-admin';
@Injectable()
class BrowserCredentialsGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const headers = http.getRequest<{ headers: Record<string, string | undefined> }>().headers;
    const basic = /^Basic (\S+)$/.exec(headers.authorization ?? '')?.[1];
    if (basic && Buffer.from(basic, 'base64').toString().startsWith('admin:')) return true;
    if ((headers.cookie ?? '').split(/;\s*/).includes(`session=${SESSION}`)) return true;
    http
      .getResponse<{ setHeader(name: string, value: string): void }>()
      .setHeader('WWW-Authenticate', 'Basic realm="console"');
    throw new UnauthorizedException('Sign in as admin');
  }
}

describe('task console in a browser, with HTTP Basic or a cookie session', () => {
  let running: RunningApp;
  let base: string;
  let tasks: TasksService;
  let browser: Browser | undefined;

  beforeAll(async () => {
    running = await startApp(
      consoleApp({}, { console: { guards: [BrowserCredentialsGuard] } }),
      'express',
    );
    base = new URL('/', running.url).href;
    tasks = running.app.get(TasksService);
    browser = await puppeteer.launch({
      executablePath: findChromium(),
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await running?.close();
  });

  it.each(['basic', 'cookie'] as const)(
    '%s: the page opens as before, never asks for a token, and follows changes live',
    async (how) => {
      const context = await browser!.createBrowserContext();
      try {
        const tab = await context.newPage();
        const problems: string[] = [];
        tab.on('pageerror', (error) => problems.push(String(error)));
        if (how === 'basic') await tab.authenticate({ username: 'admin', password: 'any' });
        else
          await context.setCookie({
            name: 'session',
            value: SESSION,
            domain: '127.0.0.1',
            path: '/',
          });
        const response = await tab.goto(`${base}mcp-tasks`, { waitUntil: 'domcontentloaded' });
        expect(response?.status()).toBe(200);
        // Live: the stream, read with fetch, was let in with the browser's own credentials.
        await tab.waitForSelector('#connection[data-state="live"]', { timeout: 5_000 });
        const record = await tasks.create({ principal: 'zed' }, {}, { toolName: `${how}_job` });
        await tab.waitForSelector(`tr[data-task-id="${record.taskId}"]`, { timeout: 5_000 });
        await tasks.complete(record.taskId, { content: [] });
        await tab.waitForFunction(
          (id) =>
            document.querySelector(`tr[data-task-id="${id}"] td.state`)?.textContent ===
            'completed',
          { timeout: 5_000 },
          record.taskId,
        );
        const hidden = (selector: string): Promise<boolean | undefined> =>
          tab.$eval(selector, (node) => (node as unknown as PageElement).hidden);
        expect(await hidden('#sign-in')).toBe(true);
        expect(await hidden('#sign-out')).toBe(true);
        expect(problems).toEqual([]);
      } finally {
        await context.close();
      }
    },
  );
});
