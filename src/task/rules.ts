/**
 * Validation of what callers and workers hand in. Pure: each returns the normalized value or
 * throws the TaskError the caller gets.
 */
import { InvalidTaskParamsError, show, TasksConfigError } from '../errors.js';
import { TTL_CEILING_MS } from '../tasks.constants.js';
import type {
  InputRequest,
  InputResponse,
  NewTaskParams,
  TaskRecord,
  TaskState,
  TtlLimits,
} from './record.js';

const INPUT_METHODS: ReadonlySet<string> = new Set([
  'elicitation/create',
  'sampling/createMessage',
  'roots/list',
]);

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * A task id is a string; anything else is invalid params (the same answer on the wire and from
 * TasksService). Any string is an id: one that names no task of the caller's is not found.
 */
export function validateTaskId(taskId: unknown): string {
  if (typeof taskId !== 'string') {
    throw new InvalidTaskParamsError('Invalid params: taskId must be a string');
  }
  return taskId;
}

/** A whole number of something (milliseconds, rows) greater than zero. */
export function isPositiveInteger(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) > 0;
}

/**
 * Whether a client may ask for this TTL: a whole number of milliseconds greater than zero, of any
 * size. Integers past 2^53 count (JSON has no such limit, and they are capped anyway), and so does
 * `Infinity`, which is what `JSON.parse` makes of an integer too long for a double (`1e309`).
 */
export function isRequestableTtl(value: unknown): value is number {
  return value === Infinity || (Number.isInteger(value) && (value as number) > 0);
}

/**
 * A value a client sent, for an error message: a number as it is, anything else by its kind only,
 * so a message never echoes a client's string or object back at any length.
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'number' || value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/**
 * The TTL of a new task: none requested gives `defaultTtlMs`; a request is a positive integer or
 * `null` (unlimited), and `maxTtlMs` caps it (an unlimited request gets `maxTtlMs`). Anything else
 * (zero, a negative or fractional number, a string, an object) is invalid params. Whatever the
 * limits, no TTL goes past TTL_CEILING_MS, so `createdAt + ttlMs` is always a valid Date and an
 * exact integer for Redis; with `maxTtlMs: null` an unlimited request stays unlimited.
 */
export function resolveTtlMs(requested: unknown, limits: TtlLimits): number | null {
  const { defaultTtlMs, maxTtlMs } = limits;
  if (requested !== undefined && requested !== null && !isRequestableTtl(requested)) {
    throw new InvalidTaskParamsError(
      `ttlMs must be a positive integer or null, got ${describeValue(requested)}`,
    );
  }
  const wanted = requested === undefined ? defaultTtlMs : requested;
  const cap = Math.min(maxTtlMs ?? TTL_CEILING_MS, TTL_CEILING_MS);
  if (wanted === null) return maxTtlMs === null ? null : cap;
  return Math.min(wanted, cap);
}

const jsonBytes = (value: unknown): number =>
  value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value), 'utf8');

const textBytes = (text: string | undefined): number =>
  text === undefined ? 0 : Buffer.byteLength(text, 'utf8');

/** The size of a part of `record` (as JSON) minus that of `previous`'s, 0 when it is the same. */
const partDelta = (part: unknown, previous: unknown): number =>
  part === previous ? 0 : jsonBytes(part) - jsonBytes(previous);

/**
 * The size of a journal minus that of the one it was made from: a step recorded adds its entry
 * (`"name":{…},`), so a long journal is not serialized again at every step.
 */
function stepsDelta(steps: TaskRecord['steps'], previous: TaskRecord['steps']): number {
  if (steps === previous) return 0;
  if (steps === undefined || previous === undefined) return jsonBytes(steps) - jsonBytes(previous);
  let delta = 0;
  let kept = 0;
  for (const name in steps) {
    if (previous[name] === steps[name]) {
      kept++;
      continue;
    }
    delta += jsonBytes(name) + 1 + jsonBytes(steps[name]) + 1;
  }
  // A journal only grows while its task lives; one that lost entries is sized whole.
  if (kept !== Object.keys(previous).length) return jsonBytes(steps) - jsonBytes(previous);
  return delta;
}

/**
 * What a record keeps from clients and tools, in bytes (`TaskRecord.bytes`, bounded by
 * `maxTaskBytes`): the JSON, in UTF-8, of its input requests and the input keys used, the answers
 * not yet taken, its result or error, the arguments kept, its journal of steps, what a durable call
 * keeps to run again and the answers it took, and its status message. The fields
 * every record has (ids, owner, times, version) are not counted.
 *
 * Given the record it was made from (`previous`, with its `bytes`), only the parts that changed
 * are sized: transitions carry unchanged parts over as the same objects, and records are never
 * changed in place (stores keep them frozen), so a part the two share has the size it had.
 */
export function keptBytes(record: TaskRecord, previous?: TaskRecord): number {
  // Each part named as a property (not looped over by name): this runs on every write.
  if (previous?.bytes === undefined) {
    return (
      textBytes(record.statusMessage) +
      jsonBytes(record.inputRequests) +
      jsonBytes(record.usedInputKeys) +
      jsonBytes(record.inputResponses) +
      jsonBytes(record.result) +
      jsonBytes(record.error) +
      jsonBytes(record.arguments) +
      jsonBytes(record.steps) +
      jsonBytes(record.call) +
      jsonBytes(record.answers)
    );
  }
  const message = record.statusMessage;
  return (
    previous.bytes +
    (message === previous.statusMessage
      ? 0
      : textBytes(message) - textBytes(previous.statusMessage)) +
    partDelta(record.inputRequests, previous.inputRequests) +
    partDelta(record.usedInputKeys, previous.usedInputKeys) +
    partDelta(record.inputResponses, previous.inputResponses) +
    partDelta(record.result, previous.result) +
    partDelta(record.error, previous.error) +
    partDelta(record.arguments, previous.arguments) +
    stepsDelta(record.steps, previous.steps) +
    partDelta(record.call, previous.call) +
    partDelta(record.answers, previous.answers)
  );
}

/** The most a task keeps of its call's arguments: 4 KiB of JSON (UTF-8). */
export const MAX_KEPT_ARGUMENTS_BYTES = 4096;

/**
 * What a task records of the call that made it: the tool's name and, when the tool keeps them,
 * its arguments as JSON data (a copy, so the record never shares objects with the call). These
 * come from the server's own code, not from a client, so a bad value is a TasksConfigError: over
 * MCP the call then fails with -32603 "Internal error" and the reason is logged.
 */
export function validateTaskLabel(label: { toolName?: unknown; arguments?: unknown }): {
  toolName?: string;
  arguments?: unknown;
} {
  const { toolName } = label;
  if (toolName !== undefined && (typeof toolName !== 'string' || toolName.length === 0)) {
    throw new TasksConfigError(`toolName must be a non-empty string, got ${show(toolName)}`);
  }
  const where = toolName === undefined ? 'The arguments kept' : `Tool ${show(toolName)}`;
  if (label.arguments === undefined) return toolName === undefined ? {} : { toolName };
  let json: string | undefined;
  try {
    json = JSON.stringify(label.arguments);
  } catch (error) {
    throw new TasksConfigError(`${where}: the arguments kept are not JSON (${String(error)})`);
  }
  if (json === undefined) {
    throw new TasksConfigError(
      `${where}: the arguments kept are not JSON, got ${show(label.arguments)}`,
    );
  }
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > MAX_KEPT_ARGUMENTS_BYTES) {
    throw new TasksConfigError(
      `${where}: the arguments kept are ${bytes} bytes of JSON, over the ${MAX_KEPT_ARGUMENTS_BYTES}-byte cap; keep less of them`,
    );
  }
  return { ...(toolName !== undefined && { toolName }), arguments: JSON.parse(json) as unknown };
}

/** Every task state, in lifecycle order. */
export const TASK_STATES: readonly TaskState[] = [
  'working',
  'input_required',
  'completed',
  'failed',
  'cancelled',
];

/**
 * The status filter of a listing: a state or a non-empty list of states, as a list without
 * repeats; absent is every state. Anything else is invalid params naming the states there are.
 */
export function validateStatusFilter(status: unknown): TaskState[] | undefined {
  if (status === undefined) return undefined;
  const given = Array.isArray(status) ? (status as unknown[]) : [status];
  const unknown = given.find((state) => !TASK_STATES.includes(state as TaskState));
  if (given.length === 0 || unknown !== undefined) {
    throw new InvalidTaskParamsError(
      `Invalid params: status must be one of ${TASK_STATES.map((state) => `"${state}"`).join(', ')} or a non-empty list of them, got ${show(given.length === 0 ? status : unknown)}`,
    );
  }
  return [...new Set(given as TaskState[])];
}

/** A status message handed in with a change: a string, or absent. */
export function validateStatusMessage(statusMessage: unknown): string | undefined {
  if (statusMessage === undefined || typeof statusMessage === 'string') return statusMessage;
  throw new InvalidTaskParamsError('statusMessage must be a string');
}

/** What a new task is created with, checked in this order: TTL, poll interval, status message. */
export function validateNewTaskParams(
  params: { ttlMs?: unknown; pollIntervalMs?: unknown; statusMessage?: unknown },
  limits: TtlLimits,
): NewTaskParams {
  const ttlMs = resolveTtlMs(params.ttlMs, limits);
  const pollIntervalMs = params.pollIntervalMs;
  if (pollIntervalMs !== undefined && !isPositiveInteger(pollIntervalMs)) {
    throw new InvalidTaskParamsError('pollIntervalMs must be a positive integer');
  }
  return {
    ttlMs,
    pollIntervalMs,
    statusMessage: validateStatusMessage(params.statusMessage),
  };
}

/** A progress message: a string, or `null` to clear the status message. */
export function validateProgressMessage(message: unknown): string | null {
  if (message !== null && typeof message !== 'string') {
    throw new InvalidTaskParamsError('A progress message must be a string or null');
  }
  return message;
}

/**
 * The answers `tasks/update` delivers: an object by input key. Each answer is checked against its
 * request when it is taken (see `updateTask`).
 */
export function validateInputResponses(
  responses: unknown,
): Readonly<Record<string, InputResponse>> {
  if (!isPlainObject(responses)) {
    throw new InvalidTaskParamsError('Invalid params: inputResponses must be an object');
  }
  return responses as Record<string, InputResponse>;
}

/** Checks input requests against the shapes the client accepts; refuses an empty set. */
export function validateInputRequests(requests: unknown): Record<string, InputRequest> {
  if (!isPlainObject(requests)) {
    throw new InvalidTaskParamsError(`Input requests must be an object, got ${show(requests)}`);
  }
  const keys = Object.keys(requests);
  if (keys.length === 0) throw new InvalidTaskParamsError('Input requests must not be empty');
  for (const key of keys) {
    if (key.length === 0) throw new InvalidTaskParamsError('Input request keys must not be empty');
    const request = requests[key];
    const where = `Input request ${JSON.stringify(key)}`;
    if (!isPlainObject(request) || typeof request.method !== 'string') {
      throw new InvalidTaskParamsError(`${where} must be an object with a method`);
    }
    if (!INPUT_METHODS.has(request.method)) {
      throw new InvalidTaskParamsError(
        `${where} has method ${JSON.stringify(request.method)}; expected one of ${[...INPUT_METHODS].join(', ')}`,
      );
    }
    const params = request.params;
    if (request.method === 'roots/list') {
      if (params !== undefined && !isPlainObject(params)) {
        throw new InvalidTaskParamsError(`${where} params must be an object`);
      }
      continue;
    }
    if (!isPlainObject(params)) throw new InvalidTaskParamsError(`${where} needs params`);
    if (request.method === 'elicitation/create') {
      const url = params.mode === 'url';
      const ok =
        typeof params.message === 'string' &&
        (url ? typeof params.url === 'string' : isPlainObject(params.requestedSchema)) &&
        (params.mode === undefined || params.mode === 'form' || url);
      if (!ok) {
        throw new InvalidTaskParamsError(
          `${where} needs params.message and params.requestedSchema (form) or params.url (url mode)`,
        );
      }
    } else if (!Array.isArray(params.messages) || !Number.isInteger(params.maxTokens)) {
      throw new InvalidTaskParamsError(
        `${where} needs params.messages and integer params.maxTokens`,
      );
    }
  }
  return requests as Record<string, InputRequest>;
}

const ELICIT_ACTIONS: ReadonlySet<unknown> = new Set(['accept', 'decline', 'cancel']);

/** Why `response` is not an answer to `request` (the client's result shapes), or `undefined`. */
export function inputResponseProblem(request: InputRequest, response: unknown): string | undefined {
  if (!isPlainObject(response)) return 'must be an object';
  switch (request.method) {
    case 'elicitation/create': {
      if (!ELICIT_ACTIONS.has(response.action))
        return 'needs action "accept", "decline" or "cancel"';
      const content = response.content;
      if (content === undefined) return undefined;
      if (!isPlainObject(content)) return 'content must be an object';
      const ok = Object.values(content).every(
        (value) =>
          ['string', 'number', 'boolean'].includes(typeof value) ||
          (Array.isArray(value) && value.every((item) => typeof item === 'string')),
      );
      return ok ? undefined : 'content values must be strings, numbers, booleans or string arrays';
    }
    case 'sampling/createMessage':
      return typeof response.model === 'string' &&
        (response.role === 'user' || response.role === 'assistant') &&
        response.content !== null &&
        typeof response.content === 'object'
        ? undefined
        : 'needs model, role and content';
    case 'roots/list':
      return Array.isArray(response.roots) &&
        response.roots.every((root) => isPlainObject(root) && typeof root.uri === 'string')
        ? undefined
        : 'needs roots, each with a uri';
  }
}
