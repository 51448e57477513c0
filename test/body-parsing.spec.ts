import { depthOf, JSON_TYPE, MAX_BODY_DEPTH } from '../src/mcp/body-parsing.js';

describe('endpoint body rules', () => {
  it('depthOf counts nesting without recursion and stops past the limit', () => {
    expect(depthOf(1, 64)).toBe(0);
    expect(depthOf({ a: [1, { b: 2 }] }, 64)).toBe(3);
    const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`) as unknown;
    expect(depthOf(deep, MAX_BODY_DEPTH)).toBe(MAX_BODY_DEPTH + 1);
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
