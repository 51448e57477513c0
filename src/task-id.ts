import { randomFillSync } from 'node:crypto';
import { MAX_TASK_ID_LENGTH } from './tasks.constants.js';

const ID_BYTES = 32;
const IDS_PER_FILL = 128;

/**
 * Random bytes are drawn from the CSPRNG in batches (one call per 128 ids, as Node's own
 * `randomUUID` does): a call into the CSPRNG costs far more than slicing its output. Each slice is
 * wiped once it has been encoded, so the pool never holds an id that was handed out.
 */
const pool = Buffer.alloc(ID_BYTES * IDS_PER_FILL);
let offset = pool.length;

/** A new task id: 32 random bytes, base64url without padding (43 characters). */
export function newTaskId(): string {
  if (offset === pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const end = offset + ID_BYTES;
  const id = pool.toString('base64url', offset, end);
  pool.fill(0, offset, end);
  offset = end;
  return id;
}

/**
 * Whether a client-named id may name a task at all: at most MAX_TASK_ID_LENGTH characters and no
 * NUL (no task has such an id, and a store need not take it: PostgreSQL text cannot hold a NUL).
 * Any other id is an unknown one, answered as such without a store read.
 */
export function couldBeTaskId(taskId: string): boolean {
  return taskId.length <= MAX_TASK_ID_LENGTH && !taskId.includes('\0');
}
