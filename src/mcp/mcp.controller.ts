import { All, type CanActivate, Controller, Req, Res, type Type, UseGuards } from '@nestjs/common';
import { type FrameworkReply, type FrameworkRequest, McpEndpoint } from './mcp-endpoint.js';
import { McpHostGuard } from './mcp-host.guard.js';

/**
 * Makes the endpoint's controller for `path`, with the host guard first and then the app's own
 * guards: a controller like any other, so global guards, interceptors and `request.user` behave
 * as everywhere in the app. The response is written by McpEndpoint (SSE needs the raw socket).
 */
export function createMcpController(
  path: string,
  guards: (Type<CanActivate> | CanActivate)[],
): Type<unknown> {
  @Controller()
  class McpController {
    constructor(readonly endpoint: McpEndpoint) {}

    @All(path)
    @UseGuards(McpHostGuard, ...guards)
    handle(@Req() request: FrameworkRequest, @Res() reply: FrameworkReply): Promise<void> {
      return this.endpoint.handle(request, reply);
    }
  }
  return McpController;
}
