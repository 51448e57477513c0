import {
  type ArgumentsHost,
  Catch,
  type ExceptionFilter,
  HttpStatus,
  Injectable,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { SERVER_ERROR } from '../errors.js';
import { idOf } from './json-rpc.js';

/**
 * What the endpoint's rate-limit filter catches: an HttpException (or anything of its shape) with
 * status 429, whoever threw it. The ThrottlerGuard of `@nestjs/throttler` throws a
 * ThrottlerException; an app's own guard may throw its own. Matching on the status, not on the
 * class, keeps this package free of a dependency on `@nestjs/throttler`, and leaves every other
 * exception to the app's filters as before (Nest picks a filter by `instanceof` of what it
 * catches, which this class answers through Symbol.hasInstance).
 */
abstract class TooManyRequests {
  static [Symbol.hasInstance](value: unknown): boolean {
    const status = (value as { getStatus?: unknown } | null)?.getStatus;
    return (
      value instanceof Error &&
      typeof status === 'function' &&
      status.call(value) === HttpStatus.TOO_MANY_REQUESTS
    );
  }
}

/** The `error.data` of a rate-limit answer. */
export interface RateLimitData {
  limit: 'rate';
  /** When the client may send again, from the answer's Retry-After; absent when it has none. */
  retryAfterMs?: number;
}

/** The message of every rate-limit answer (the figures are in `data` and Retry-After). */
export const TOO_MANY_REQUESTS_MESSAGE = 'Too many requests';

/** The request and reply as this filter reads them: Express's and Fastify's both have these. */
interface RequestLike {
  body?: unknown;
}
interface ReplyLike {
  getHeaders?: () => Record<string, unknown>;
}

/**
 * Turns a 429 thrown in front of the MCP endpoint (by a guard in `guards`, a global guard, an
 * interceptor) into a JSON-RPC answer, HTTP 429 with `Retry-After`:
 * `{ jsonrpc: '2.0', id, error: { code: -32000, message: 'Too many requests', data: { limit:
 * 'rate', retryAfterMs } } }`, where `id` is the request's own (the body is read before any guard
 * runs) or `null`.
 *
 * -32000 is JSON-RPC's implementation-defined server error, which the endpoint's other answers
 * about the HTTP exchange carry too (403 host, 404 path, 405 method): the request was refused
 * before any method was read, so no method's code (-32602, -32603) applies, and a client acts on
 * the status and Retry-After. `data.limit` tells it from those others.
 *
 * The ThrottlerGuard names its header after the throttler that refused (`Retry-After-<name>`
 * for any but the one named `default`); the answer also carries the plain `Retry-After` with the
 * same value, the one clients read. An exception that set no Retry-After at all gets none.
 */
@Catch(TooManyRequests)
@Injectable()
export class McpRateLimitFilter implements ExceptionFilter {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(_exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const request = http.getRequest<RequestLike>();
    const response = http.getResponse<ReplyLike>();
    const adapter = this.adapterHost.httpAdapter;
    const retryAfter = retryAfterOf(response.getHeaders?.() ?? {});
    const data: RateLimitData = { limit: 'rate' };
    if (retryAfter !== undefined) {
      if (retryAfter.set) adapter.setHeader(response, 'Retry-After', String(retryAfter.seconds));
      data.retryAfterMs = retryAfter.seconds * 1000;
    }
    const error = { code: SERVER_ERROR, message: TOO_MANY_REQUESTS_MESSAGE, data };
    adapter.reply(response, { jsonrpc: '2.0', id: idOf(request.body), error }, 429);
  }
}

/**
 * The wait the response's headers announce, in whole seconds: its `Retry-After` (seconds or an
 * HTTP date), else the longest `Retry-After-<name>` (`set`: the plain header is still to be set).
 */
function retryAfterOf(
  headers: Record<string, unknown>,
): { seconds: number; set: boolean } | undefined {
  const plain = secondsOf(headers['retry-after']);
  if (plain !== undefined) return { seconds: plain, set: false };
  let longest: number | undefined;
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith('retry-after-')) continue;
    const seconds = secondsOf(value);
    if (seconds !== undefined && (longest === undefined || seconds > longest)) longest = seconds;
  }
  return longest === undefined ? undefined : { seconds: longest, set: true };
}

function secondsOf(value: unknown): number | undefined {
  const text = String(Array.isArray(value) ? value[0] : (value ?? '')).trim();
  if (text === '') return undefined;
  if (/^\d+$/.test(text)) return Number(text);
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}
