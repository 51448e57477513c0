import { ProtocolErrorCode } from '@modelcontextprotocol/server';
import type { JsonRpcErrorObject } from './errors.js';
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
  private total = 0;
  /** Slots held per owner (ownerKey); an owner holding none has no entry. */
  private readonly byOwner = new Map<string, number>();

  constructor(private readonly limits: OwnerSlotLimits) {}

  /** How many slots are held in all (for leak checks). */
  get held(): number {
    return this.total;
  }

  /**
   * A slot for `owner`, or the -32603 refusal naming the cap reached (the owner's own first: it
   * is the one its caller can do something about). The refusal carries the cap's option and
   * value only, never another owner's figure.
   */
  take(owner: TaskOwner): OwnerSlot | JsonRpcErrorObject {
    const key = ownerKey(owner);
    const mine = this.byOwner.get(key) ?? 0;
    const { limits } = this;
    if (mine >= limits.maxPerPrincipal) {
      return this.refuse(limits.maxPerPrincipalOption, limits.maxPerPrincipal);
    }
    if (this.total >= limits.max) return this.refuse(limits.maxOption, limits.max);
    this.byOwner.set(key, mine + 1);
    this.total++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        const left = (this.byOwner.get(key) ?? 1) - 1;
        if (left === 0) this.byOwner.delete(key);
        else this.byOwner.set(key, left);
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
