import { randomBytes } from 'node:crypto';
import { isTerminal, type TaskRecord } from '../task.js';

/**
 * The messages RemoteChanges sends and hears, the same on every engine. Each starts with its
 * sender's tag (ORIGIN_LENGTH characters), then one of:
 * - the record as JSON, when the whole message fits in INLINE_CHANGE_BYTES;
 * - a reference `<version> <taskId>`, the version prefixed with `t` for a terminal state, which
 *   the receiver reads from the store;
 * - HEARTBEAT: the sender hears every task's changes (see RemoteChanges.announcing).
 */

/**
 * The most bytes of a change message that carries the record itself. PostgreSQL takes NOTIFY
 * payloads of up to 8,000 bytes; the same bound serves Redis: a larger record is sent as its id
 * and version, and each process that hears it reads the record once, however many of its
 * listeners wait on the task.
 */
export const INLINE_CHANGE_BYTES = 7_900;

/** The length of a sender's tag at the head of each message. */
const ORIGIN_LENGTH = 12;

/** The body of a heartbeat message. */
const HEARTBEAT = '!every';

/** A new sender's tag, ORIGIN_LENGTH characters. */
export const newOrigin = (): string => randomBytes(9).toString('base64url');

/** The message of a change: the record itself when it fits, else where to read it. */
export function changeMessage(origin: string, record: TaskRecord): string {
  const json = inlineJson(origin, record);
  return json === undefined ? referenceMessage(origin, record) : `${origin}${json}`;
}

/**
 * The record's JSON when a change message carries it whole after the sender's tag `origin` (the
 * two together within INLINE_CHANGE_BYTES), else `undefined`. `json` is the record's JSON when
 * the caller has it already (a store that sends the change with its write).
 */
export function inlineJson(origin: string, record: TaskRecord, json?: string): string | undefined {
  // What the record keeps from clients and tools bounds its size from below: past the bound,
  // the record is not serialized at all.
  if ((record.bytes ?? 0) >= INLINE_CHANGE_BYTES) return undefined;
  const body = json ?? JSON.stringify(record);
  // The tag is base64url: one byte a character.
  return origin.length + Buffer.byteLength(body, 'utf8') <= INLINE_CHANGE_BYTES ? body : undefined;
}

/**
 * The message of a change as a reference, `<version> <taskId>`, the version prefixed with `t`
 * for a terminal state: the receiver reads the record, and a terminal state is news to it
 * whatever the versions it heard before (see deliveryMark).
 */
export function referenceMessage(origin: string, record: TaskRecord): string {
  const terminal = isTerminal(record.status) ? 't' : '';
  return `${origin}${terminal}${record.version} ${record.taskId}`;
}

/** The heartbeat message of a sender. */
export const heartbeatMessage = (origin: string): string => `${origin}${HEARTBEAT}`;

/** Whether a message heard is a heartbeat (of any sender). */
export const isHeartbeat = (message: string): boolean => message.slice(ORIGIN_LENGTH) === HEARTBEAT;

/**
 * What a change message says: the record it carries, or the task it names with the delivery mark
 * of the announced state (Infinity for a terminal state); `undefined` for a message not ours.
 */
export function readChange(
  message: string,
): { record: TaskRecord } | { taskId: string; mark: number } | undefined {
  const body = message.slice(ORIGIN_LENGTH);
  if (body.startsWith('{')) {
    let record: TaskRecord;
    try {
      record = JSON.parse(body) as TaskRecord;
    } catch {
      return undefined;
    }
    return typeof record?.taskId === 'string' ? { record } : undefined;
  }
  const space = body.indexOf(' ');
  const terminal = body.startsWith('t');
  const version = Number(body.slice(terminal ? 1 : 0, space));
  const taskId = body.slice(space + 1);
  if (space < 1 || !Number.isSafeInteger(version) || taskId === '') return undefined;
  return { taskId, mark: terminal ? Number.POSITIVE_INFINITY : version };
}
