import type { IncomingMessage } from 'node:http';
import { readJson } from '../mcp/body-reader.js';
import { UNPARSABLE_BODY } from '../mcp/body-refusals.js';

/**
 * Reads a JSON body the package's parsers did not reach (a route they do not front) with the
 * endpoint's reader and limits, as they would have: the parsed value, or the marker of what was
 * wrong with it (see bodyRefusal). `undefined` when the request ended before its body did (the
 * client went away).
 */
export async function readBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  try {
    return await readJson(req, { maxBytes, declaredLength: req.headers['content-length'] });
  } catch (error) {
    // Broken JSON (an empty body too); anything else is the stream's end before the body's.
    return error instanceof SyntaxError ? UNPARSABLE_BODY : undefined;
  }
}
