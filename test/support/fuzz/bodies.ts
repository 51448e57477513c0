import fc from 'fast-check';
import { Obj, obj, ser } from './json.js';
import {
  INVALID_PARAMS,
  INVALID_REQUEST,
  type Outcome,
  PARSE_ERROR,
  TOO_LARGE,
  TOOL_ERROR,
} from './outcomes.js';
import type { FuzzCase, Targets } from './cases.js';
import { rpc, standardHeaders, validBases } from './requests.js';

// ----- family: broken JSON ---------------------------------------------------------------------

function parses(bytes: Buffer): boolean {
  try {
    JSON.parse(bytes.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

const INVALID_JSON_TEXTS = [
  `{'jsonrpc':'2.0','id':1,'method':'tasks/get'}`,
  '{"jsonrpc":"2.0","id":1,}',
  '[1,2,]',
  '{"id":NaN}',
  '{"id":Infinity}',
  '{"id":-Infinity}',
  '{"id":undefined}',
  '{jsonrpc:"2.0"}',
  '{"id":01}',
  '{"id":0x10}',
  '{"id":1.}',
  '{"id":.5}',
  '{"id":+1}',
  '{"id":-}',
  '{"a":"\\x41"}',
  '{"a":"\\u12"}',
  '{"a":"\\q"}',
  '{"a":"tab\there"}',
  '{"a":"nul\u0000here"}',
  '/* comment */ {}',
  '{} // comment',
  '{"a" 1}',
  '{"a":1 "b":2}',
  '"unterminated',
  'nul',
  'tru',
  'True',
  'None',
  '{"a":[}',
  '{"a":{]}',
  '}{',
  '{}{}',
  '{"jsonrpc":"2.0"}\u0000',
  '\u0000',
  '\ufeff{"jsonrpc":"2.0","id":1,"method":"ping"}',
  ")]}'\n{}",
  '<?xml version="1.0"?><a/>',
  'jsonrpc=2.0&id=1',
  '   ',
  '\n',
];

/** Text that is not JSON: a request broken in one of many ways. */
export function brokenJson(t: Targets): fc.Arbitrary<FuzzCase> {
  const source = fc.constantFrom(...validBases(t));
  type Mutation = { label: string; body: Buffer };
  const mutate = (bytes: Buffer): fc.Arbitrary<Mutation> =>
    fc.oneof(
      fc.nat(bytes.length - 1).map((at) => ({
        label: `truncated to ${at} of ${bytes.length} bytes`,
        body: bytes.subarray(0, at),
      })),
      fc
        .tuple(fc.nat(bytes.length), fc.uint8Array({ minLength: 1, maxLength: 8 }))
        .map(([at, junk]) => ({
          label: `${junk.length} garbage bytes inserted at ${at}`,
          body: Buffer.concat([bytes.subarray(0, at), Buffer.from(junk), bytes.subarray(at)]),
        })),
      fc
        .tuple(fc.nat(bytes.length - 1), fc.uint8Array({ minLength: 1, maxLength: 4 }))
        .map(([at, junk]) => {
          const body = Buffer.from(bytes);
          body.set(junk.subarray(0, body.length - at), at);
          return { label: `bytes overwritten at ${at}`, body };
        }),
      fc.tuple(fc.nat(bytes.length - 1), fc.integer({ min: 1, max: 16 })).map(([at, length]) => ({
        label: `${length} bytes deleted at ${at}`,
        body: Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + length)]),
      })),
      fc
        .constantFrom(',', '}', ']', 'x', ' garbage', '{}', ',{"jsonrpc":"2.0"}', '\u0000', '"')
        .map((tail) => ({
          label: `trailing ${JSON.stringify(tail)}`,
          body: Buffer.concat([bytes, Buffer.from(tail)]),
        })),
      fc.constantFrom('\ufeff', ")]}'", 'for(;;);', '\u0000', 'x').map((head) => ({
        label: `prefixed with ${JSON.stringify(head)}`,
        body: Buffer.concat([Buffer.from(head), bytes]),
      })),
      fc
        .tuple(fc.integer({ min: 1, max: 60_000 }), fc.constantFrom('[', '{"a":', '[{"a":'))
        .map(([depth, open]) => ({
          label: `${depth} × ${JSON.stringify(open)} never closed`,
          body: Buffer.from(open.repeat(depth)),
        })),
      fc.constantFrom(...INVALID_JSON_TEXTS).map((invalid) => ({
        label: `not JSON: ${JSON.stringify(invalid.slice(0, 40))}`,
        body: Buffer.from(invalid),
      })),
      fc.uint8Array({ minLength: 1, maxLength: 200 }).map((junk) => ({
        label: `${junk.length} random bytes`,
        body: Buffer.from(junk),
      })),
      fc.constant({ label: 'empty body', body: Buffer.alloc(0) }),
    );
  return source
    .chain((base) => mutate(Buffer.from(ser(base.message))).map((mutation) => ({ base, mutation })))
    .filter(({ mutation }) => !parses(mutation.body))
    .map(({ base, mutation }) => ({
      family: 'broken-json',
      label: `${base.label}: ${mutation.label}`,
      headers: standardHeaders(base.message, base.auth),
      body: mutation.body,
      chunked: false,
      // An empty body may count as "no message" rather than "bad JSON" (errors.e2e-spec.ts).
      expect: mutation.body.length === 0 ? [PARSE_ERROR, INVALID_REQUEST] : [PARSE_ERROR],
      id: null,
      deep: false,
    }));
}

// ----- family: bodies near and over the size limit ---------------------------------------------

/** Bodies padded to just under, at, just over and far over `maxBodyBytes`; some chunked. */
export function hugeBodies(t: Targets): fc.Arbitrary<FuzzCase> {
  const limit = t.maxBodyBytes;
  const bases: Array<{ label: string; message: (pad: string) => Obj; expect: Outcome }> = [
    {
      label: 'tasks/get, taskId: 5',
      message: (pad) => rpc('tasks/get', obj({ taskId: 5, pad })),
      expect: INVALID_PARAMS,
    },
    {
      label: 'tools/call echo, text: 5',
      message: (pad) => rpc('tools/call', obj({ name: 'echo', arguments: obj({ text: 5, pad }) })),
      expect: TOOL_ERROR,
    },
  ];
  return fc
    .record({
      base: fc.constantFrom(...bases),
      size: fc.oneof(
        fc.integer({ min: limit - 48, max: limit + 48 }),
        fc.integer({ min: limit + 1, max: 2 * limit }),
      ),
      chunked: fc.boolean(),
    })
    .map(({ base, size, chunked }) => {
      const bare = Buffer.byteLength(ser(base.message('')));
      const message = base.message('x'.repeat(Math.max(0, size - bare)));
      const body = Buffer.from(ser(message));
      return {
        family: 'huge-body',
        label: `${base.label}, ${body.length} bytes (limit ${limit})${chunked ? ', chunked' : ''}`,
        headers: standardHeaders(message),
        body,
        chunked,
        expect: [body.length > limit ? TOO_LARGE : base.expect],
        id: 1,
        deep: false,
      };
    });
}
