import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import type { JsonRpcErrorObject } from './errors.js';
import { KeyedTally } from './keyed-tally.js';
import { ownerKey } from './store/task-listing.js';
import type { TaskOwner } from './task.js';

/** One slot taken by `OwnerSlots.take`: `release` gives it back, once however often it is called. */
export interface OwnerSlot {
  release(): void;
}

/** What OwnerSlots caps, and the option names a refusal quotes. */
export interface OwnerSlotLimits {
  /** The first words of a refusal's message, e.g. "Subscription limit reached". */
  readonly refusal: string;
  /** Slots in the whole process, and the option that sets it (e.g. `listen.maxStreams`). */
  readonly max: number;
  readonly maxOption: string;
  /** Slots per owner (principal and tenant), and its option. */
  readonly maxPerPrincipal: number;
  readonly maxPerPrincipalOption: string;
}

/**
 * Counts what the callers of this process hold of something long-lived (listen streams, waiting
 * `tasks/result` requests, running tool calls), per owner and in all, so that one principal
 * cannot take every slot.
 * A slot is taken synchronously, counted at once: callers take it before they await anything, so
 * a burst of concurrent requests never holds more than the caps, whatever the store's latency.
 */
export class OwnerSlots {
  /** Slots held per owner (ownerKey) and in all. */
  private readonly slots = new KeyedTally();

  constructor(private readonly limits: OwnerSlotLimits) {}

  /** How many slots are held in all (for leak checks). */
  get held(): number {
    return this.slots.total;
  }

  /**
   * A slot for `owner`, or the -32603 refusal naming the cap reached (the owner's own first: it
   * is the one its caller can do something about). The refusal carries the cap's option and
   * value only, never another owner's figure.
   */
  take(owner: TaskOwner): OwnerSlot | JsonRpcErrorObject {
    const key = ownerKey(owner);
    const { limits, slots } = this;
    if (slots.of(key) >= limits.maxPerPrincipal) {
      return this.refuse(limits.maxPerPrincipalOption, limits.maxPerPrincipal);
    }
    if (slots.total >= limits.max) return this.refuse(limits.maxOption, limits.max);
    slots.add(key, 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        slots.remove(key, 1);
      },
    };
  }

  private refuse(limit: string, max: number): JsonRpcErrorObject {
    return {
      code: ProtocolErrorCode.InternalError,
      message: `${this.limits.refusal} (${limit} ${max})`,
      data: { limit, max },
    };
  }
}

/** Whether `take` answered a refusal rather than a slot. */
export function isRefusal(slot: OwnerSlot | JsonRpcErrorObject): slot is JsonRpcErrorObject {
  return 'code' in slot;
}
