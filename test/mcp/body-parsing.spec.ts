import { NestingScanner, nestingOf } from '../../src/mcp/body-reader.js';
import { JSON_TYPE, MAX_BODY_DEPTH } from '../../src/mcp/body-refusals.js';

/** The nesting depth of a parsed JSON value (the reference nestingOf must agree with). */
function depthOfValue(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(0, ...children.map(depthOfValue));
}

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

describe('endpoint body rules', () => {
  it('nestingOf reads the depth from the raw bytes and stops past the limit', () => {
    expect(nestingOf(bytes('1'), 64)).toBe(0);
    expect(nestingOf(bytes('{"a":[1,{"b":2}]}'), 64)).toBe(3);
    // Brackets inside strings, escaped quotes and multi-byte characters do not count.
    expect(nestingOf(bytes('{"a":"[[{{\\"[[","b":"Ω]]\\\\","c":[]}'), 64)).toBe(2);
    const deep = bytes(`${'['.repeat(100_000)}${']'.repeat(100_000)}`);
    expect(nestingOf(deep, MAX_BODY_DEPTH)).toBe(MAX_BODY_DEPTH + 1);
  });

  it('nestingOf agrees with the depth of the parsed value', () => {
    const values: unknown[] = [
      [],
      {},
      [[[]]],
      { a: { b: { c: ['x]', { d: '}{' }] } }, e: [1, 2, [3]] },
      { 'k"[': ['\\', '"', '\u00e9[', { '\\"{': null }] },
      JSON.parse(`${'[{"a":'.repeat(40)}1${'}]'.repeat(40)}`),
    ];
    for (const value of values) {
      expect(nestingOf(bytes(JSON.stringify(value)), 1_000)).toBe(depthOfValue(value));
    }
  });

  it('reads the same depth when the body arrives in chunks, split anywhere', () => {
    // Splits inside escapes (a backslash ending a chunk), inside multi-byte characters, between
    // brackets: every split point of each text, and one-byte chunks.
    const texts = [
      '{"a":"[[{{\\"[[","b":"Ω]]\\\\","c":[]}',
      '[["\\\\",["\\"]"]],{"x":[{"y":"é\\\\\\"[["}]}]',
      `${'[{"a":'.repeat(40)}"\\"{"${'}]'.repeat(40)}`,
    ];
    for (const text of texts) {
      const whole = bytes(text);
      const expected = nestingOf(whole, 1_000);
      expect(expected).toBe(depthOfValue(JSON.parse(text)));
      for (let at = 0; at <= whole.length; at++) {
        const scanner = new NestingScanner(1_000);
        scanner.scan(whole.subarray(0, at));
        scanner.scan(whole.subarray(at));
        expect(scanner.deepest).toBe(expected);
      }
      const byteByByte = new NestingScanner(1_000);
      for (let i = 0; i < whole.length; i++) byteByByte.scan(whole.subarray(i, i + 1));
      expect(byteByByte.deepest).toBe(expected);
    }
  });

  it('accepts exactly application/json, with parameters', () => {
    for (const ok of ['application/json', 'Application/JSON', 'application/json; charset=utf-8']) {
      expect(JSON_TYPE.test(ok)).toBe(true);
    }
    for (const no of ['application/ld+json', 'text/json', 'application/jsonx', 'text/plain', '']) {
      expect(JSON_TYPE.test(no)).toBe(false);
    }
  });
});
