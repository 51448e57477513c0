import { InvalidTaskParamsError } from '../src/errors.js';
import { describeValue, isRequestableTtl, resolveTtlMs } from '../src/task.js';
import { resolveTasksConfig } from '../src/tasks.config.js';
import { DEFAULT_MAX_TTL_MS, TTL_CEILING_MS } from '../src/tasks.constants.js';

/**
 * The TTL rule (resolveTtlMs) against every value a client can send where a TTL goes: a valid one
 * of any size gives a capped TTL whose expiry is a valid Date and an exact integer, whatever the
 * limits; anything else is invalid params naming the value by its kind.
 */

const WEEK_MS = 604_800_000;
/** 100 years, pinned here as a literal: the ceiling is part of what clients see. */
const CEILING_MS = 3_155_760_000_000;

/** The limits of a module with the given options, as TasksService uses them. */
const limitsOf = (options: Parameters<typeof resolveTasksConfig>[0]) => {
  const { defaultTtlMs, maxTtlMs } = resolveTasksConfig(options);
  return { defaultTtlMs, maxTtlMs };
};

const HUGE: readonly [string, number][] = [
  ['2^53-1', Number.MAX_SAFE_INTEGER],
  ['9e15', 9e15],
  ['2^53+2', 2 ** 53 + 2],
  ['1e300', 1e300],
  ['Number.MAX_VALUE', Number.MAX_VALUE],
  ['1e309 parsed (Infinity)', JSON.parse('1e309') as number],
];

const INVALID: readonly [string, unknown, string][] = [
  ['zero', 0, '0'],
  ['minus zero', -0, '0'],
  ['negative', -1, '-1'],
  ['-1e309 parsed (-Infinity)', JSON.parse('-1e309'), '-Infinity'],
  ['fractional', 1.5, '1.5'],
  ['tiny', 1e-7, '1e-7'],
  ['NaN', Number.NaN, 'NaN'],
  ['numeric string', '5000', 'a string'],
  ['long string', 'x'.repeat(100_000), 'a string'],
  ['object', { ms: 5000 }, 'an object'],
  ['array', [5000], 'an array'],
  ['boolean', true, 'a boolean'],
  ['bigint', 5000n, 'a bigint'],
];

/** What a task created now with this TTL would expire at, as the console and Redis see it. */
function expiryIsSound(ttlMs: number | null): void {
  if (ttlMs === null) return;
  expect(Number.isSafeInteger(ttlMs)).toBe(true);
  const at = Date.now() + ttlMs;
  expect(Number.isSafeInteger(at)).toBe(true);
  expect(() => new Date(at).toISOString()).not.toThrow();
}

describe('TTL: the rule, with hostile values', () => {
  it('1e309 is Infinity once parsed; the ceiling keeps createdAt + TTL inside a Date for millennia', () => {
    expect(JSON.parse('1e309')).toBe(Infinity);
    expect(TTL_CEILING_MS).toBe(CEILING_MS);
    expect(DEFAULT_MAX_TTL_MS).toBe(WEEK_MS);
    // A task created in year 9999 with the ceiling still expires at a date toISOString writes.
    expect(() => new Date(Date.UTC(9999, 0) + CEILING_MS).toISOString()).not.toThrow();
  });

  it('what a client may ask: a positive integer of any size, or Infinity', () => {
    for (const [label, ttl] of HUGE) expect([label, isRequestableTtl(ttl)]).toEqual([label, true]);
    for (const ttl of [1, 1000, WEEK_MS]) expect(isRequestableTtl(ttl)).toBe(true);
    for (const [label, ttl] of INVALID)
      expect([label, isRequestableTtl(ttl)]).toEqual([label, false]);
    expect(isRequestableTtl(null)).toBe(false);
    expect(isRequestableTtl(undefined)).toBe(false);
  });

  it('by default (maxTtlMs 7 days): a huge TTL or an unlimited one is capped to 7 days', () => {
    const limits = limitsOf({});
    expect(limits).toEqual({ defaultTtlMs: 3_600_000, maxTtlMs: WEEK_MS });
    for (const [label, ttl] of HUGE)
      expect([label, resolveTtlMs(ttl, limits)]).toEqual([label, WEEK_MS]);
    expect(resolveTtlMs(null, limits)).toBe(WEEK_MS);
    expect(resolveTtlMs(WEEK_MS + 1, limits)).toBe(WEEK_MS);
    expect(resolveTtlMs(WEEK_MS, limits)).toBe(WEEK_MS);
    expect(resolveTtlMs(5000, limits)).toBe(5000);
    expect(resolveTtlMs(1, limits)).toBe(1);
    expect(resolveTtlMs(undefined, limits)).toBe(3_600_000);
    // An unlimited default is the cap as well.
    expect(resolveTtlMs(undefined, limitsOf({ defaultTtlMs: null }))).toBe(WEEK_MS);
  });

  it('maxTtlMs null: unlimited stays unlimited; a huge TTL, even a default or a cap, stops at the ceiling', () => {
    const open = limitsOf({ maxTtlMs: null });
    expect(open).toEqual({ defaultTtlMs: 3_600_000, maxTtlMs: null });
    for (const [label, ttl] of HUGE) {
      expect([label, resolveTtlMs(ttl, open)]).toEqual([label, CEILING_MS]);
    }
    expect(resolveTtlMs(null, open)).toBeNull();
    expect(resolveTtlMs(CEILING_MS - 1, open)).toBe(CEILING_MS - 1);
    expect(resolveTtlMs(30 * 86_400_000, open)).toBe(30 * 86_400_000);
    // Server-side values (a module's defaultTtlMs, a cap over the ceiling) stop there too.
    expect(resolveTtlMs(undefined, limitsOf({ maxTtlMs: null, defaultTtlMs: 9e15 }))).toBe(
      CEILING_MS,
    );
    expect(resolveTtlMs(undefined, limitsOf({ maxTtlMs: null, defaultTtlMs: null }))).toBeNull();
    const vast = limitsOf({ maxTtlMs: Number.MAX_SAFE_INTEGER });
    expect(resolveTtlMs(null, vast)).toBe(CEILING_MS);
    expect(resolveTtlMs(9e15, vast)).toBe(CEILING_MS);
  });

  it('every TTL the rule gives, under every limit, has an expiry that is a valid Date and an exact integer', () => {
    const limitSets = [
      limitsOf({}),
      limitsOf({ maxTtlMs: null }),
      limitsOf({ maxTtlMs: null, defaultTtlMs: null }),
      limitsOf({ maxTtlMs: Number.MAX_SAFE_INTEGER }),
      limitsOf({ maxTtlMs: 1000 }),
    ];
    for (const limits of limitSets) {
      for (const ttl of [undefined, null, 1, 5000, WEEK_MS, ...HUGE.map(([, value]) => value)]) {
        expiryIsSound(resolveTtlMs(ttl, limits));
      }
    }
  });

  it('anything else is invalid params, naming the value by its kind (never echoing it)', () => {
    for (const limits of [limitsOf({}), limitsOf({ maxTtlMs: null })]) {
      for (const [label, ttl, shown] of INVALID) {
        let thrown: unknown;
        try {
          resolveTtlMs(ttl, limits);
        } catch (error) {
          thrown = error;
        }
        expect([label, thrown]).toEqual([label, expect.any(InvalidTaskParamsError)]);
        expect([label, (thrown as InvalidTaskParamsError).toJsonRpcError()]).toEqual([
          label,
          { code: -32602, message: `ttlMs must be a positive integer or null, got ${shown}` },
        ]);
      }
    }
  });

  it('describeValue: numbers as they are, anything else by its kind', () => {
    expect(describeValue(-5)).toBe('-5');
    expect(describeValue(Infinity)).toBe('Infinity');
    expect(describeValue(null)).toBe('null');
    expect(describeValue(undefined)).toBe('undefined');
    expect(describeValue('secret')).toBe('a string');
    expect(describeValue({ toString: () => 'x' })).toBe('an object');
    expect(describeValue([])).toBe('an array');
    expect(describeValue(Symbol('s'))).toBe('a symbol');
    expect(describeValue(() => 1)).toBe('a function');
  });
});
