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
  UseFilters,
  UseGuards,
} from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SWAGGER_EXCLUDE_CONTROLLER } from '../mcp/mcp.controller.js';
import { CONSOLE_SCRIPTS, consoleFileName } from './console-assets.js';
import {
  CONSOLE_FILE_HEADERS,
  consolePageBase,
  createConsoleShellFilter,
} from './console-shell.filter.js';
import { ConsoleAppGuard, ConsoleHostGuard } from './console.guards.js';
import {
  type ConsolePage,
  type ConsoleTaskDetail,
  parseListQuery,
  TaskConsole,
} from './task-console.js';

const FILE_HEADERS = CONSOLE_FILE_HEADERS.map(([name, value]) => Header(name, value));
const ConsoleFile = (contentType: string) =>
  applyDecorators(Header('Content-Type', contentType), ...FILE_HEADERS);
const ConsoleApi = () =>
  applyDecorators(Header('Cache-Control', 'no-store'), Header('X-Content-Type-Options', 'nosniff'));

/**
 * Makes the console's controller for `path` (as the MCP endpoint's is made): the page, its script
 * modules and styles, the JSON API and the change stream, each behind the app's global guards, then
 * ConsoleHostGuard (host, origin, how a POST is sent) and ConsoleAppGuard (`console.guards`). A
 * caller those guards refuse with 401 or 403 still gets the page (with that status), its script
 * and its styles (see createConsoleShellFilter): files without task data, from which a browser
 * signs in with a bearer token. It is left out of Swagger documents.
 */
export function createConsoleController(path: string): Type<unknown> {
  const ShellFilter = createConsoleShellFilter(path);

  @Controller()
  @SetMetadata(SWAGGER_EXCLUDE_CONTROLLER, [true])
  @UseGuards(ConsoleHostGuard, ConsoleAppGuard)
  class TaskConsoleController {
    constructor(readonly console: TaskConsole) {}

    @Get(path)
    @UseFilters(ShellFilter)
    @ConsoleFile('text/html; charset=utf-8')
    page(@Req() request: { raw?: IncomingMessage; url?: string }): string {
      return this.console.page(consolePageBase((request.raw ?? request).url ?? '', path));
    }

    @Get(CONSOLE_SCRIPTS.map((name) => `${path}/${name}`))
    @UseFilters(ShellFilter)
    @ConsoleFile('text/javascript; charset=utf-8')
    script(@Req() request: { raw?: IncomingMessage; url?: string }): string {
      // Routed for CONSOLE_SCRIPTS' names only, so the module is there.
      return this.console.script(consoleFileName((request.raw ?? request).url ?? ''))!;
    }

    @Get(`${path}/console.css`)
    @UseFilters(ShellFilter)
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
