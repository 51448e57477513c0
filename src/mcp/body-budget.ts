import { SERVER_ERROR, type JsonRpcErrorObject } from '../errors.js';
import { KeyedTally } from '../keyed-tally.js';
import { BODY_BUDGET_RETRY_AFTER_MS } from '../tasks.constants.js';

/** What BodyBudget caps: the `bodies` options it reads, as resolved (see TasksBodiesOptions). */
export interface BodyBudgetLimits {
  readonly maxBytesInFlight: number;
  /** `null`: no cap per address. */
  readonly maxBytesInFlightPerAddress: number | null;
}

/** The `error.data` of a refusal for a full budget. */
export interface BodyBudgetData {
  limit: 'bodies.maxBytesInFlight' | 'bodies.maxBytesInFlightPerAddress';
  max: number;
  retryAfterMs: number;
}

/**
 * What one body being read holds of a BodyBudget. `charge` takes more, `release` gives back all
 * of it; the reader releases once its body has ended, failed, closed or been refused (any number
 * of calls, each after the first gives back nothing).
 */
export interface BodyAccount {
  /** Bytes this body holds now. */
  readonly held: number;
  /**
   * Takes `bytes` more for this body when both caps allow it, and answers `undefined`; else takes
   * nothing and answers the -32000 refusal naming the cap reached (the address's own first: it is
   * the one its client can do something about).
   */
  charge(bytes: number): (JsonRpcErrorObject & { data: BodyBudgetData }) | undefined;
  release(): void;
}

/**
 * Counts the bytes of request bodies the endpoint keeps while they arrive, in all and per client
 * address, so that clients no one has authenticated yet (bodies are read before any guard runs)
 * cannot make the process hold more than `maxBytesInFlight`, nor one address more than its share.
 * Counting is synchronous, chunk by chunk, so concurrent bodies never hold more than the caps. An
 * address that holds nothing has no entry: the map is as large as the addresses reading now.
 */
export class BodyBudget {
  /** Bytes held per address and in all. */
  private readonly bytes = new KeyedTally();

  constructor(private readonly limits: BodyBudgetLimits) {}

  /** Bytes held now, every body together (for tests and leak checks). */
  get bytesInFlight(): number {
    return this.bytes.total;
  }

  /** Bytes the bodies of `address` hold now. */
  heldBy(address: string): number {
    return this.bytes.of(address);
  }

  /** How many addresses hold bytes now. */
  get addresses(): number {
    return this.bytes.keys;
  }

  /**
   * An account for one body from `address`. The address is asked for at the first charge only: a
   * body that arrives in one chunk never asks (nor pays what the framework's `ip` costs).
   */
  open(address: () => string): BodyAccount {
    let held = 0;
    let key: string | undefined;
    return {
      get held() {
        return held;
      },
      charge: (bytes) => {
        key ??= address();
        const refusal = this.refusal(key, bytes);
        if (refusal !== undefined) return refusal;
        held += bytes;
        this.bytes.add(key, bytes);
        return undefined;
      },
      release: () => {
        if (held === 0 || key === undefined) return;
        this.bytes.remove(key, held);
        held = 0;
      },
    };
  }

  private refusal(
    address: string,
    bytes: number,
  ): (JsonRpcErrorObject & { data: BodyBudgetData }) | undefined {
    const { maxBytesInFlight, maxBytesInFlightPerAddress } = this.limits;
    if (maxBytesInFlightPerAddress !== null) {
      if (this.heldBy(address) + bytes > maxBytesInFlightPerAddress) {
        return busy(
          'bodies.maxBytesInFlightPerAddress',
          maxBytesInFlightPerAddress,
          'the request bodies from your address fill',
        );
      }
    }
    if (this.bytes.total + bytes > maxBytesInFlight) {
      return busy(
        'bodies.maxBytesInFlight',
        maxBytesInFlight,
        'the request bodies being read fill',
      );
    }
    return undefined;
  }
}

/** The refusal for a full budget: the option and its value, and when to try again. */
function busy(
  limit: BodyBudgetData['limit'],
  max: number,
  what: string,
): JsonRpcErrorObject & { data: BodyBudgetData } {
  return {
    code: SERVER_ERROR,
    message: `Server busy: ${what} their budget (${limit} ${max}); retry later`,
    data: { limit, max, retryAfterMs: BODY_BUDGET_RETRY_AFTER_MS },
  };
}
