import {
  All,
  Controller,
  Req,
  Res,
  SetMetadata,
  type Type,
  UseFilters,
  UseGuards,
} from '@nestjs/common';
import { McpAppGuard } from './mcp-app.guard.js';
import { type FrameworkReply, type FrameworkRequest, McpEndpoint } from './mcp-endpoint.js';
import { McpHostGuard } from './mcp-host.guard.js';
import { McpRateLimitFilter } from './rate-limit.filter.js';

/**
 * What `@ApiExcludeController()` of `@nestjs/swagger` sets (its `DECORATORS.API_EXCLUDE_CONTROLLER`
 * key), written here so the library needs no dependency on it: the endpoint speaks JSON-RPC on
 * any method and has no place in an OpenAPI document.
 */
export const SWAGGER_EXCLUDE_CONTROLLER = 'swagger/apiExcludeController';

/**
 * Makes the endpoint's controller for `path`, with the host guard first and then the app's own
 * guards (McpAppGuard runs the `guards` extra): a controller like any other, so global guards,
 * interceptors and `request.user` behave as everywhere in the app. It is left out of Swagger
 * documents. The response is written by McpEndpoint (SSE needs the raw socket); a 429 thrown in
 * front of it (a rate limit) is answered in JSON-RPC by McpRateLimitFilter, and every other
 * exception by the app's filters as on any route.
 */
export function createMcpController(path: string): Type<unknown> {
  @Controller()
  @SetMetadata(SWAGGER_EXCLUDE_CONTROLLER, [true])
  @UseFilters(McpRateLimitFilter)
  class McpController {
    constructor(readonly endpoint: McpEndpoint) {}

    @All(path)
    @UseGuards(McpHostGuard, McpAppGuard)
    handle(@Req() request: FrameworkRequest, @Res() reply: FrameworkReply): Promise<void> {
      return this.endpoint.handle(request, reply);
    }
  }
  return McpController;
}
