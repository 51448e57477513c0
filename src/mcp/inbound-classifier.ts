import {
  classifyInboundRequest,
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  type InboundClassificationOutcome,
  type InboundHttpRequest,
  type JSONRPCRequest,
  LOG_LEVEL_META_KEY,
  PROTOCOL_VERSION_META_KEY,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/server';
import { isObject } from '../object-shape.js';

/**
 * The SDK's classifyInboundRequest, with a shortcut for the requests task traffic is made of.
 *
 * The SDK's classifier validates every body against its JSON-RPC schemas with zod (two response
 * schemas that fail, the request schema, then the per-request envelope): about a quarter of the
 * CPU a `tasks/get` costs the front. Almost every request a client sends is one plain shape: a
 * JSON-RPC request whose values are all of the kinds the schemas allow, a 2026-07-28 envelope (or
 * none, on 2025-11-25), and headers that agree with the body. `classifyCommon` recognises exactly
 * that shape with plain checks and returns what the SDK returns for it; anything it is not sure
 * of (a response, a notification, a batch, `initialize`, an optional field it does not check, a
 * header that disagrees, whitespace around a header value) goes to the SDK's classifier, which
 * also words every refusal. So a request is never classified differently, only sooner:
 * test/mcp/inbound-classifier.spec.ts checks the two agree on every body it recognises, against
 * the SDK installed.
 */
export function classifyInbound(request: InboundHttpRequest): InboundClassificationOutcome {
  return classifyCommon(request) ?? classifyInboundRequest(request);
}

/** The revision a 2026-07-28 envelope names on the shortcut (the SDK's first modern one). */
const MODERN_REVISION = '2026-07-28';

/** The log levels the envelope's `logLevel` may name. */
const LOG_LEVELS: ReadonlySet<unknown> = new Set([
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
]);

/** The keys a JSON-RPC request may have (the SDK's request schema is strict). */
const REQUEST_KEYS: ReadonlySet<string> = new Set(['jsonrpc', 'id', 'method', 'params']);

/**
 * What the SDK's classifier returns for a POST of a plain JSON-RPC request, or `undefined` when
 * the request is not of the shape this recognises (see classifyInbound): every check below
 * accepts only values the SDK's schemas accept too, so a `undefined` is never a refusal.
 */
export function classifyCommon(
  request: InboundHttpRequest,
): InboundClassificationOutcome | undefined {
  const body = request.body;
  if (request.httpMethod !== 'POST' || !isRequest(body)) return undefined;
  const { method, params } = body;
  // `initialize` has a precedence rule of its own.
  if (method === 'initialize') return undefined;
  const meta = (params as { _meta?: unknown } | undefined)?._meta as
    Record<string, unknown> | undefined;
  const version = request.protocolVersionHeader;
  if (meta === undefined || !(PROTOCOL_VERSION_META_KEY in meta)) {
    // No envelope claim: the 2025-11-25 era, unless the header names a modern revision (refused).
    if (version === undefined) return { kind: 'legacy', reason: 'no-claim' };
    if (!(version < MODERN_REVISION) || hasOws(version)) return undefined;
    return { kind: 'legacy', reason: 'no-claim', requestedVersion: version };
  }
  if (meta[PROTOCOL_VERSION_META_KEY] !== MODERN_REVISION || !isEnvelope(meta)) return undefined;
  if (version !== undefined && version !== MODERN_REVISION) return undefined;
  const methodHeader = request.mcpMethodHeader;
  if (methodHeader !== undefined && (methodHeader !== method || hasOws(methodHeader))) {
    return undefined;
  }
  return {
    kind: 'modern',
    messageKind: 'request',
    message: body as JSONRPCRequest,
    classification: { era: 'modern', revision: MODERN_REVISION },
  };
}

/**
 * A JSON-RPC request the SDK's request schema accepts: `jsonrpc` "2.0", a string or safe-integer
 * id, a string method, params absent or an object whose `_meta`, if any, carries a valid
 * `progressToken` and no related-task key (not checked here), and no other key. Such a body has
 * no `result` or `error`, so neither response schema, which the SDK tries first, accepts it.
 */
function isRequest(body: unknown): body is { method: string; params?: Record<string, unknown> } {
  if (!isObject(body)) return false;
  for (const key in body) if (!REQUEST_KEYS.has(key)) return false;
  const { jsonrpc, id, method, params } = body as Record<string, unknown>;
  if (jsonrpc !== '2.0' || typeof method !== 'string' || !isIdOrToken(id)) return false;
  if (params === undefined) return true;
  if (!isObject(params)) return false;
  const meta = params._meta;
  if (meta === undefined) return true;
  return (
    isObject(meta) &&
    (meta.progressToken === undefined || isIdOrToken(meta.progressToken)) &&
    meta[RELATED_TASK_META_KEY] === undefined
  );
}

/**
 * A 2026-07-28 `_meta` envelope the SDK's envelope schema accepts (progressToken checked by
 * isRequest): `clientInfo` absent or an implementation with a string name and version (and no
 * icons: not checked here), `clientCapabilities` an object with only the capabilities checked
 * here (`extensions`, `roots`, `sampling`, `elicitation`), `logLevel` absent or a level.
 */
function isEnvelope(meta: Record<string, unknown>): boolean {
  const info = meta[CLIENT_INFO_META_KEY];
  if (info !== undefined && !isImplementation(info)) return false;
  const level = meta[LOG_LEVEL_META_KEY];
  if (level !== undefined && !LOG_LEVELS.has(level)) return false;
  const capabilities = meta[CLIENT_CAPABILITIES_META_KEY];
  if (!isObject(capabilities) || capabilities.experimental !== undefined) return false;
  const { extensions, roots, sampling, elicitation } = capabilities;
  if (extensions !== undefined) {
    if (!isRecord(extensions)) return false;
    for (const key in extensions) if (!isJsonObject(extensions[key], 1)) return false;
  }
  if (roots !== undefined) {
    if (!isObject(roots)) return false;
    if (roots.listChanged !== undefined && typeof roots.listChanged !== 'boolean') return false;
  }
  if (sampling !== undefined) {
    if (!isObject(sampling)) return false;
    if (sampling.context !== undefined && !isJsonObject(sampling.context, 0)) return false;
    if (sampling.tools !== undefined && !isJsonObject(sampling.tools, 0)) return false;
  }
  if (elicitation !== undefined) {
    // A JSON object whose `form` (an object, `applyDefaults` a boolean) and `url` are objects.
    if (!isJsonObject(elicitation, 0)) return false;
    const { form, url } = elicitation as Record<string, unknown>;
    if (form !== undefined) {
      if (!isObject(form)) return false;
      const applyDefaults = form.applyDefaults;
      if (applyDefaults !== undefined && typeof applyDefaults !== 'boolean') return false;
    }
    if (url !== undefined && !isObject(url)) return false;
  }
  return true;
}

function isImplementation(info: unknown): boolean {
  if (!isObject(info) || typeof info.name !== 'string' || typeof info.version !== 'string') {
    return false;
  }
  const { title, websiteUrl, description, icons } = info;
  return (
    icons === undefined &&
    (title === undefined || typeof title === 'string') &&
    (websiteUrl === undefined || typeof websiteUrl === 'string') &&
    (description === undefined || typeof description === 'string')
  );
}

/** How deep the shortcut follows a JSON value inside a capability before leaving it to the SDK. */
const MAX_JSON_DEPTH = 8;

/**
 * An object of JSON values (strings, finite numbers, booleans, null, arrays and objects), as
 * JSON.parse makes them: a plain prototype (the SDK's records take plain objects only) and no
 * symbol keys (which its records would refuse and `for…in` does not see).
 */
function isJsonObject(value: unknown, depth: number): boolean {
  if (depth > MAX_JSON_DEPTH || !isRecord(value)) return false;
  for (const key in value) if (!isJsonValue(value[key], depth + 1)) return false;
  return true;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  if (!isObject(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  if (prototype !== Object.prototype && prototype !== null) return false;
  return Object.getOwnPropertySymbols(value).length === 0;
}

function isJsonValue(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      if (value === null) return true;
      if (!Array.isArray(value)) return isJsonObject(value, depth);
      if (depth > MAX_JSON_DEPTH) return false;
      for (const item of value) if (!isJsonValue(item, depth + 1)) return false;
      return true;
    default:
      return false;
  }
}

function isIdOrToken(value: unknown): boolean {
  return typeof value === 'string' || Number.isSafeInteger(value);
}

/** Whether a header value has the optional whitespace around it that the SDK strips. */
function hasOws(value: string): boolean {
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(value.length - 1);
  return first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09;
}
