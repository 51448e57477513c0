import fc from 'fast-check';
import { ABSENT, type J, type Maybe, Obj, Raw } from './json.js';
import { HEADER_MISMATCH, type Outcome } from './outcomes.js';
import type { Targets } from './cases.js';
import { bearer, nameHeader } from './requests.js';

// ----- values ----------------------------------------------------------------------------------

const UNITS = [
  ...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
  ...'-_.~!$&()*+,;=@ "#%^`|?[]{}',
  "'",
  '\t',
  'é',
  'ß',
  '中',
  '😀',
  '\u00a0',
  '\u200b',
  '\u2028',
  '\ufeff',
];

/** Text safe to be echoed (no `/`, `:`, `<`, `\`, newline). */
export const text = (minLength = 0, maxLength = 24): fc.Arbitrary<string> =>
  fc.string({ unit: fc.constantFrom(...UNITS), minLength, maxLength });

/** A long text of `min`..`max` characters, built by repetition (cheap, no shrinking needed). */
export const longText = (min: number, max: number): fc.Arbitrary<string> =>
  fc
    .tuple(fc.integer({ min, max }), fc.constantFrom('x', 'é', 'ab ', '😀', 'Z9_'))
    .map(([length, unit]) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length));

export const key = fc.oneof(
  text(1, 10),
  fc.constantFrom('id', 'name', 'type', 'value', '0', '$ref'),
);

const oddNumbers = fc.constantFrom(
  new Raw('1e999'),
  new Raw('-1e999'),
  new Raw('1E+2'),
  new Raw('0.0000000000000000000001'),
  new Raw('123456789012345678901234567890'),
);
export const number: fc.Arbitrary<J> = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  oddNumbers,
);
const scalar: fc.Arbitrary<J> = fc.oneof(number, fc.boolean(), fc.constant(null), text());

/** Any JSON value, a few levels deep. */
export const json: fc.Arbitrary<J> = fc.letrec<{ value: J; object: Obj }>((tie) => ({
  value: fc.oneof({ maxDepth: 3 }, scalar, fc.array(tie('value'), { maxLength: 4 }), tie('object')),
  object: fc
    .array(fc.tuple(key, tie('value')), { maxLength: 4 })
    .map((entries) => new Obj(entries)),
})).value;

export const anObject: fc.Arbitrary<Obj> = json
  .filter((value): value is Obj => value instanceof Obj)
  .map((value) => value);
export const anArray: fc.Arbitrary<J> = fc.array(json, { maxLength: 4 });

export const notString: fc.Arbitrary<J> = fc.oneof(
  number,
  fc.boolean(),
  fc.constant(null),
  anArray,
  anObject,
);
export const notObject: fc.Arbitrary<J> = fc.oneof(
  number,
  fc.boolean(),
  fc.constant(null),
  text(),
  anArray,
);
export const notBoolean: fc.Arbitrary<J> = fc.oneof(
  number,
  fc.constant(null),
  fc.constantFrom('true', 'false', ''),
  anArray,
  anObject,
);
/** Not an array of strings: no array at all, or an array with a non-string in it. */
export const notStringArray: fc.Arbitrary<J> = fc.oneof(
  number,
  fc.boolean(),
  fc.constant(null),
  text(),
  anObject,
  fc
    .tuple(fc.array(text(), { maxLength: 3 }), notString, fc.array(text(), { maxLength: 3 }))
    .map(([before, odd, after]) => [...before, odd, ...after]),
);
/** Not a finite number (class-validator's @IsNumber refuses it; nothing converts it). */
export const notNumber: fc.Arbitrary<J> = fc.oneof(
  text(),
  fc.boolean(),
  fc.constant(null),
  anArray,
  anObject,
  fc.constantFrom(new Raw('1e999'), new Raw('-1e999')),
);
export const notInteger: fc.Arbitrary<J> = fc.oneof(
  notNumber,
  fc
    .double({ noNaN: true, noDefaultInfinity: true, min: -1e9, max: 1e9 })
    .filter((value) => !Number.isInteger(value)),
);
export const idArb: fc.Arbitrary<J> = fc.oneof(
  fc.integer({ min: -1_000_000, max: 1_000_000_000 }),
  text(0, 16),
);
export const absentOr = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<Maybe<T>> =>
  fc.oneof(arb, fc.constant(ABSENT));

/** Principals other than the owner, as `Authorization` values (or anonymous). */
export const strangers = (t: Targets): fc.Arbitrary<string | undefined> =>
  fc.constantFrom(
    undefined,
    bearer('bob'),
    bearer(t.owner.toUpperCase()),
    bearer(`${t.owner}2`),
    `Basic ${Buffer.from(`${t.owner}:x`).toString('base64')}`,
    'Bearer',
    `${t.owner}`,
  );

/** Task ids no task has: shapes near the real ones, prototype names, empty, long. */
export const unknownTaskIds = (t: Targets): fc.Arbitrary<string> =>
  fc
    .oneof(
      text(0, 40),
      fc.constantFrom(
        '',
        '__proto__',
        'constructor',
        'prototype',
        'toString',
        'hasOwnProperty',
        `${t.working[0]}x`,
        t.working[0]!.slice(0, -1),
        t.working[0]!.toUpperCase(),
        t.working[0]!.toLowerCase(),
        `${t.working[0]} `,
        ` ${t.working[0]}`,
        `${t.working[0]}\u0000`,
        `${t.working[0]},${t.working[1]}`,
      ),
      longText(1000, 6000),
    )
    .filter((id) => ![...t.working, t.inputRequired, t.completed, t.failed, t.victim].includes(id));

export const expectByName = (name: string, ok: readonly Outcome[]): readonly Outcome[] =>
  nameHeader(name) === undefined ? [HEADER_MISMATCH] : ok;
