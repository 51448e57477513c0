import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  BODY_TOO_LARGE,
  OVERSIZED_BODY,
  PARSE_ERROR,
  readJson,
  TOO_DEEP,
  TOO_DEEP_BODY,
} from '../mcp/body-parsing.js';
import { sendError } from '../mcp/json-rpc.js';

/**
 * Reads a JSON body no Nest parser read (a self-mounted route) with the endpoint's own reader and
 * limits: over `maxBytes` is 413, broken JSON 400 (-32700), nesting deeper than the endpoint
 * allows 400 (-32600). Resolves
 * `undefined` once it has answered the request itself (or the client went away).
 */
export async function readJsonBody(
  req: IncomingMessage,
  res: ServerResponse,
  maxBytes: number,
): Promise<{ body: unknown } | undefined> {
  let body: unknown;
  try {
    body = await readJson(req, { maxBytes, declaredLength: req.headers['content-length'] });
  } catch (error) {
    // Broken JSON (an empty body too); anything else is the stream's end before the body's.
    if (error instanceof SyntaxError) sendError(res, null, PARSE_ERROR);
    else res.destroy();
    return undefined;
  }
  if (body === OVERSIZED_BODY) return void sendError(res, null, BODY_TOO_LARGE, 413);
  if (body === TOO_DEEP_BODY) return void sendError(res, null, TOO_DEEP);
  return { body };
}
