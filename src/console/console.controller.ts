import {
  applyDecorators,
  Controller,
  Get,
  Header,
  HttpCode,
  Param,
  Post,
  Query,
  Req,
  Res,
  SetMetadata,
  type Type,
  UseGuards,
} from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SWAGGER_EXCLUDE_CONTROLLER } from '../mcp/mcp.controller.js';
import { ConsoleAppGuard, ConsoleHostGuard } from './console.guards.js';
import {
  type ConsolePage,
  type ConsoleTaskDetail,
  parseListQuery,
  TaskConsole,
} from './task-console.js';

/**
 * The console's Content-Security-Policy: its own script, styles and API only; no inline code, no
 * plugins, no framing, no forms.
 */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const FILE_HEADERS = [
  Header('Content-Security-Policy', CONSOLE_CSP),
  Header('X-Content-Type-Options', 'nosniff'),
  Header('X-Frame-Options', 'DENY'),
  Header('Referrer-Policy', 'no-referrer'),
  Header('Cache-Control', 'no-store'),
];
const ConsoleFile = (contentType: string) =>
  applyDecorators(Header('Content-Type', contentType), ...FILE_HEADERS);
const ConsoleApi = () =>
  applyDecorators(Header('Cache-Control', 'no-store'), Header('X-Content-Type-Options', 'nosniff'));

/** `[A-Za-z0-9…]` path characters only: anything else falls back to the configured path. */
const SAFE_PATH = /^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/;

/**
 * Makes the console's controller for `path` (as the MCP endpoint's is made): the page, its script
 * and styles, the JSON API and the change stream, each behind the app's global guards, then
 * ConsoleHostGuard (host, origin, how a POST is sent) and ConsoleAppGuard (`console.guards`). It
 * is left out of Swagger documents.
 */
export function createConsoleController(path: string): Type<unknown> {
  @Controller()
  @SetMetadata(SWAGGER_EXCLUDE_CONTROLLER, [true])
  @UseGuards(ConsoleHostGuard, ConsoleAppGuard)
  class TaskConsoleController {
    constructor(readonly console: TaskConsole) {}

    @Get(path)
    @ConsoleFile('text/html; charset=utf-8')
    page(@Req() request: { raw?: IncomingMessage; url?: string }): string {
      const url = (request.raw ?? request).url ?? '';
      const requested = url.split('?')[0]!.replace(/\/+$/, '');
      return this.console.page(SAFE_PATH.test(requested) ? requested : `/${path}`);
    }

    @Get(`${path}/console.js`)
    @ConsoleFile('text/javascript; charset=utf-8')
    script(): string {
      return this.console.script;
    }

    @Get(`${path}/console.css`)
    @ConsoleFile('text/css; charset=utf-8')
    styles(): string {
      return this.console.styles;
    }

    @Get(`${path}/api/tasks`)
    @ConsoleApi()
    list(@Query() query: Record<string, unknown>): Promise<ConsolePage> {
      return this.console.list(parseListQuery(query ?? {}));
    }

    @Get(`${path}/api/tasks/:taskId`)
    @ConsoleApi()
    detail(@Param('taskId') taskId: string): Promise<ConsoleTaskDetail> {
      return this.console.detail(taskId);
    }

    @Post(`${path}/api/tasks/:taskId/cancel`)
    @HttpCode(200)
    @ConsoleApi()
    cancel(@Param('taskId') taskId: string): Promise<ConsoleTaskDetail> {
      return this.console.cancel(taskId);
    }

    @Get(`${path}/api/stream`)
    stream(@Res() reply: { raw?: ServerResponse; hijack?: () => void }): void {
      reply.hijack?.();
      this.console.openStream((reply.raw ?? reply) as ServerResponse);
    }
  }
  return TaskConsoleController;
}
