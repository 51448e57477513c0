import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { BODY_CHUNK_OVERHEAD_BYTES } from '../tasks.constants.js';
import type { BodyAccount } from './body-budget.js';
import {
  BODY_TOO_LARGE,
  bodyTimedOut,
  MAX_BODY_DEPTH,
  OVERSIZED_BODY,
  RefusedBody,
  TOO_DEEP_BODY,
} from './body-refusals.js';

/*
 * The reader of a JSON body, bounded in size, nesting, memory held and time: the endpoint's
 * parsers (body-parsing.ts) and the rekog transport read every body with it.
 */

/** How readJson reads one body. */
export interface ReadJsonOptions {
  /** The largest body kept, in bytes: past it the rest is read and dropped (OVERSIZED_BODY). */
  maxBytes: number;
  /**
   * The request's Content-Length header, as sent: a body declared over `maxBytes` is dropped from
   * its first byte, and the chunk that completes a declared body is not charged to `account`.
   */
  declaredLength?: string | string[];
  /**
   * What the body holds is charged to (BodyBudget.open), and given back when the read ends,
   * however it ends: a body of known length reserves its declared length at its first chunk,
   * and each further chunk kept costs BODY_CHUNK_OVERHEAD_BYTES; a chunked body costs each
   * chunk's bytes and that. The chunk that completes a body of known length is never charged. A
   * charge the budget refuses ends the read with a RefusedBody (503). None: nothing is counted.
   */
  account?: BodyAccount;
  /**
   * The longest the body may take to arrive, in ms from this call; past it the read ends with a
   * RefusedBody: 408, or 413 for a body already over `maxBytes`. None: no limit.
   */
  timeoutMs?: number;
}

/**
 * Reads a JSON body of at most `maxBytes`. Memory stays bounded by the limit whatever the client
 * sends: a body whose Content-Length is over the limit is read and dropped without keeping any of
 * it, and a body that goes over the limit while it streams (chunked) drops what it kept at once;
 * the rest is read and dropped too, so the client still gets its answer. The chunks are decoded
 * and scanned for nesting one by one, with no concatenated copy of the body. Broken JSON is a
 * parse error even when it is also deep (-32700 before -32600); the depth is read from the raw
 * bytes, without walking the parsed value.
 *
 * With an `account` and a `timeoutMs` (the endpoint's `bodies` options), what a body holds while
 * it arrives, and for how long, is bounded too: the read ends early with a RefusedBody, its kept
 * chunks dropped, when the budget refuses a chunk or the time is up. Every way the read ends
 * (its end, an error, the client's close, an oversized body, a refusal, the timeout) gives the
 * account back.
 *
 * Resolves the parsed value, OVERSIZED_BODY, TOO_DEEP_BODY or a RefusedBody; rejects with a
 * SyntaxError for broken JSON, or an Error when the stream ends before the body (client gone).
 */
export function readJson(payload: Readable, options: ReadJsonOptions): Promise<unknown> {
  const { maxBytes, account, timeoutMs } = options;
  const header = options.declaredLength;
  const declared = Number(Array.isArray(header) ? header[0] : (header ?? NaN));
  const known = Number.isSafeInteger(declared) && declared >= 0;
  let chunks: Buffer[] = [];
  let size = known && declared > maxBytes ? maxBytes + 1 : 0;
  // Plain listeners rather than an async iterator: a small body is one chunk, and the iterator's
  // promises and end-of-stream watch cost more than reading it.
  return new Promise((resolve, reject) => {
    if (payload.readableEnded) return reject(new Error('The request body was read already'));
    if (payload.destroyed) return reject(new Error('The request closed before its body ended'));
    let timer: NodeJS.Timeout | undefined;
    const refuse = (refused: RefusedBody): void => {
      done();
      chunks = [];
      resolve(refused);
    };
    const onData = (chunk: Buffer): void => {
      if (size > maxBytes) return;
      size += chunk.length;
      if (size > maxBytes) {
        chunks = [];
        account?.release();
        return;
      }
      // The chunk that completes a body of known length is parsed at once, never kept waiting:
      // it is not charged, so a request that arrives whole passes however full the budget is.
      if (account !== undefined && !(known && size >= declared)) {
        // A body of known length reserves all of it at its first chunk, so that one that cannot
        // fit is refused before more of it is read; each chunk it keeps after that costs its
        // Buffer. A chunked body pays for each chunk as it comes.
        const cost = known
          ? account.held === 0
            ? declared
            : BODY_CHUNK_OVERHEAD_BYTES
          : chunk.length + BODY_CHUNK_OVERHEAD_BYTES;
        const refusal = account.charge(cost);
        if (refusal !== undefined) {
          return refuse(new RefusedBody(503, refusal, refusal.data.retryAfterMs));
        }
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      done();
      try {
        resolve(size > maxBytes ? OVERSIZED_BODY : parseJson(chunks));
      } catch (error) {
        reject(error);
      } finally {
        chunks = [];
      }
    };
    const onError = (error: unknown): void => {
      done();
      chunks = [];
      reject(error);
    };
    // Closed before its end (the client went away): nothing more comes.
    const onClose = (): void => onError(new Error('The request closed before its body ended'));
    const done = (): void => {
      clearTimeout(timer);
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', onError);
      payload.off('close', onClose);
      account?.release();
    };
    if (timeoutMs !== undefined) {
      timer = setTimeout(() => {
        refuse(size > maxBytes ? new RefusedBody(413, BODY_TOO_LARGE) : bodyTimedOut(timeoutMs));
      }, timeoutMs);
      timer.unref();
    }
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
    payload.on('close', onClose);
  });
}

/** The JSON value of a body's chunks: decoded and scanned for nesting one by one, no copy. */
function parseJson(chunks: readonly Buffer[]): unknown {
  const decoder = new StringDecoder('utf8');
  const nesting = new NestingScanner(MAX_BODY_DEPTH);
  let text = '';
  for (const chunk of chunks) {
    nesting.scan(chunk);
    text += decoder.write(chunk);
  }
  text += decoder.end();
  const body = JSON.parse(text) as unknown;
  return nesting.deepest > MAX_BODY_DEPTH ? TOO_DEEP_BODY : body;
}

/**
 * The deepest nesting of arrays and objects in JSON text, read from its UTF-8 bytes (brackets inside
 * strings do not count), stopping past `limit`. For valid JSON it is the depth of the parsed value;
 * it allocates nothing.
 */
export function nestingOf(bytes: Uint8Array, limit: number): number {
  const scanner = new NestingScanner(limit);
  scanner.scan(bytes);
  return scanner.deepest;
}

/** nestingOf over text that arrives in chunks: the scan's state carries from one to the next. */
export class NestingScanner {
  deepest = 0;
  private depth = 0;
  private inString = false;
  /** The previous chunk ended inside a string on a backslash: the next byte is escaped. */
  private escaped = false;

  constructor(private readonly limit: number) {}

  scan(bytes: Uint8Array): void {
    if (this.deepest > this.limit || bytes.length === 0) return;
    let { depth, deepest, inString } = this;
    let i = 0;
    if (this.escaped) {
      this.escaped = false;
      i = 1;
    }
    for (; i < bytes.length; i++) {
      const byte = bytes[i];
      if (inString) {
        // A backslash escapes the next byte; a quote ends the string.
        if (byte === 0x5c) {
          if (++i === bytes.length) this.escaped = true;
        } else if (byte === 0x22) inString = false;
      } else if (byte === 0x22) {
        inString = true;
      } else if (byte === 0x5b || byte === 0x7b) {
        if (++depth > deepest && (deepest = depth) > this.limit) break;
      } else if (byte === 0x5d || byte === 0x7d) {
        depth--;
      }
    }
    this.depth = depth;
    this.deepest = deepest;
    this.inString = inString;
  }
}
