import {
  type ArgumentsHost,
  Catch,
  type ExceptionFilter,
  ForbiddenException,
  type HttpException,
  Inject,
  Injectable,
  type Type,
  UnauthorizedException,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { IncomingMessage } from 'node:http';
import type { TasksConfig } from '../interfaces/tasks-module-options.interface.js';
import { TASKS_CONFIG } from '../tasks.constants.js';
import { consoleFileName } from './console-assets.js';
import { foreignRefusal } from './console.guards.js';
import { TaskConsole } from './task-console.js';

/**
 * The console's Content-Security-Policy: its own script, styles and API only; no inline code, no
 * plugins, no framing, no forms.
 */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The headers of the page, its script and its styles (beside their Content-Type). */
export const CONSOLE_FILE_HEADERS: readonly (readonly [string, string])[] = [
  ['Content-Security-Policy', CONSOLE_CSP],
  ['X-Content-Type-Options', 'nosniff'],
  ['X-Frame-Options', 'DENY'],
  ['Referrer-Policy', 'no-referrer'],
  ['Cache-Control', 'no-store'],
];

/** `[A-Za-z0-9…]` path characters only: anything else falls back to the configured path. */
const SAFE_PATH = /^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/;

/** Where the page names its files: the path it was requested at, else `/<path>`. */
export function consolePageBase(url: string, path: string): string {
  const requested = url.split('?')[0]!.replace(/\/+$/, '');
  return SAFE_PATH.test(requested) ? requested : `/${path}`;
}

/**
 * Makes the filter of the console's page, script and styles (served at `path`), for a caller the
 * guards refuse with 401 or 403 (UnauthorizedException or ForbiddenException, thrown by the
 * app-wide guards or by `console.guards`, or a guard that returned false).
 *
 * A browser sends no `Authorization: Bearer …` on a page load, so an app whose guard reads only a
 * bearer token refuses every page load. The page is answered anyway, with the refusal's status
 * and the headers the guard set (so a `WWW-Authenticate: Basic` challenge still brings up the
 * browser's prompt, as before), and the script and styles with 200 (a browser runs no module
 * script and applies no stylesheet answered with an error status). These are the same files for
 * everyone, the ones the package ships: they carry no task data. The page then asks for a token
 * and sends it on every API request; the API and the stream stay refused without it.
 *
 * A request the console's Host and Origin checks refuse gets their 403 here too, even when an
 * app-wide guard refused it first: a page of another site (DNS rebinding, a foreign Origin) never
 * gets the console's files. Those checks refuse with a plain HttpException, which is not caught.
 */
export function createConsoleShellFilter(path: string): Type<ExceptionFilter> {
  @Catch(UnauthorizedException, ForbiddenException)
  @Injectable()
  class ConsoleShellFilter implements ExceptionFilter<HttpException> {
    constructor(
      readonly console: TaskConsole,
      readonly adapterHost: HttpAdapterHost,
      @Inject(TASKS_CONFIG) readonly config: TasksConfig,
    ) {}

    catch(exception: HttpException, host: ArgumentsHost): void {
      if (host.getType() !== 'http') throw exception;
      const http = host.switchToHttp();
      const request = http.getRequest<{ raw?: IncomingMessage; url?: string }>();
      const response = http.getResponse<unknown>();
      const adapter = this.adapterHost.httpAdapter;
      const raw = (request.raw ?? request) as IncomingMessage;
      const foreign = foreignRefusal(raw, this.config);
      if (foreign !== undefined) {
        adapter.reply(response, foreign.getResponse(), foreign.getStatus());
        return;
      }
      const url = (raw.url ?? '').split('?')[0]!;
      const script = this.console.script(consoleFileName(url));
      let answer: [type: string, body: string, status: number];
      if (script !== undefined) {
        answer = ['text/javascript; charset=utf-8', script, 200];
      } else if (url.endsWith('/console.css')) {
        answer = ['text/css; charset=utf-8', this.console.styles, 200];
      } else {
        const page = this.console.page(consolePageBase(url, path));
        answer = ['text/html; charset=utf-8', page, exception.getStatus()];
      }
      adapter.setHeader(response, 'Content-Type', answer[0]);
      for (const [name, value] of CONSOLE_FILE_HEADERS) adapter.setHeader(response, name, value);
      adapter.reply(response, answer[1], answer[2]);
    }
  }
  return ConsoleShellFilter;
}
