import { randomFillSync } from 'node:crypto';

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
