import fc from 'fast-check';
import { put } from './json.js';
import { FORBIDDEN, httpStatus, METHOD_NOT_ALLOWED, NOT_FOUND, type Outcome } from './outcomes.js';
import { finish, type FuzzCase, type Header, type Targets } from './cases.js';
import { standardHeaders, validBases } from './requests.js';
import { idArb } from './values.js';

// ----- family: HTTP forms ----------------------------------------------------------------------

/** Every method Node's HTTP parser takes but POST and CONNECT (answered by closing the socket). */
const OTHER_METHODS = [
  'GET',
  'HEAD',
  'PUT',
  'DELETE',
  'OPTIONS',
  'TRACE',
  'PATCH',
  'QUERY',
  'ACL',
  'BIND',
  'CHECKOUT',
  'COPY',
  'LINK',
  'LOCK',
  'M-SEARCH',
  'MERGE',
  'MKACTIVITY',
  'MKCALENDAR',
  'MKCOL',
  'MOVE',
  'NOTIFY',
  'PROPFIND',
  'PROPPATCH',
  'PURGE',
  'REBIND',
  'REPORT',
  'SEARCH',
  'SOURCE',
  'SUBSCRIBE',
  'UNBIND',
  'UNLINK',
  'UNLOCK',
  'UNSUBSCRIBE',
] as const;
/** Tokens Node's parser refuses (400 before the app sees them): made up, or in lower case. */
const REFUSED_METHODS = ['FROB', 'MCP', 'X-CALL', 'post', 'Post', 'get'] as const;

/** The endpoint's path exactly (origin or absolute form, an allowed authority). */
const SERVED_TARGETS = [
  '/mcp',
  '/mcp?x=1',
  'http://{self}/mcp',
  'http://localhost/mcp',
  'https://127.0.0.1:1/mcp?q',
  'HTTP://LOCALHOST:8080/mcp',
] as const;
/** The endpoint's path under a foreign authority: the allow-list refuses it like a foreign Host. */
const FOREIGN_TARGETS = [
  'http://evil.example/mcp',
  'http://evil.example:80/mcp',
  'https://localhost.evil.example/mcp',
  'http://127.0.0.1.evil.example:8080/mcp',
] as const;
/** Not the endpoint's path: case, trailing slash, encoding, dot segments, other forms. */
const OTHER_TARGETS = [
  '/MCP',
  '/Mcp',
  '/mcp/',
  '/MCP/',
  '//mcp',
  '/mcp//',
  '/m%63p',
  '/%6D%63%70',
  '/mcp%2F',
  '/./mcp',
  '/x/../mcp',
  '/mcp/x',
  '/mcp;x',
  'http://{self}/MCP',
  'http://{self}/mcp/',
  'http://{self}',
  '*',
  '{self}',
] as const;

/** Header names in another case; some lines sent twice (the same value, so only the form varies). */
function headerForms(headers: readonly Header[]): fc.Arbitrary<Header[]> {
  return fc
    .tuple(
      fc.array(fc.constantFrom('lower', 'upper', 'mixed'), {
        minLength: headers.length,
        maxLength: headers.length,
      }),
      fc.subarray(['accept', 'authorization', 'mcp-protocol-version', 'x-fuzz']),
    )
    .map(([cases, repeated]) => {
      const mixed = (name: string): string =>
        name.replace(
          /(^|-)([a-z])/g,
          (_, dash: string, letter: string) => dash + letter.toUpperCase(),
        );
      const out = headers.map(([name, value], index): Header => {
        const form = cases[index];
        return [
          form === 'upper' ? name.toUpperCase() : form === 'mixed' ? mixed(name) : name,
          value,
        ];
      });
      for (const name of repeated) {
        const line = out.find(([key]) => key.toLowerCase() === name);
        if (line) out.push([line[0].toLowerCase(), line[1]]);
        else if (name === 'x-fuzz') out.push(['X-Fuzz', 'a'], ['x-fuzz', 'b']);
      }
      return out;
    });
}

/**
 * Valid requests (they would succeed as `POST /mcp`) sent with another method, another request
 * target, or both; header names in any case, some lines repeated. None may be served: a method
 * the endpoint does not serve gets 405 (`Allow: POST`), a foreign authority 403, any path but the
 * exact one 404 (the endpoint's JSON-RPC 404 where the router sends it there, the app's
 * elsewhere), a method token Node's parser refuses 400.
 */
export function httpForms(t: Targets): fc.Arbitrary<FuzzCase> {
  const method = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...OTHER_METHODS) },
    { weight: 2, arbitrary: fc.constant('POST') },
    { weight: 1, arbitrary: fc.constantFrom(...REFUSED_METHODS) },
  );
  const target = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...SERVED_TARGETS) },
    { weight: 2, arbitrary: fc.constantFrom(...FOREIGN_TARGETS) },
    { weight: 4, arbitrary: fc.constantFrom(...OTHER_TARGETS) },
  );
  const host = fc.constantFrom('{self}', 'localhost', 'evil.example', '127.0.0.1');
  return fc
    .tuple(fc.constantFrom(...validBases(t)), method, target, host, fc.boolean(), idArb)
    .filter(([, m, tg]) => !(m === 'POST' && (SERVED_TARGETS as readonly string[]).includes(tg)))
    .chain(([base, m, tg, h, withBody, id]) => {
      const message = put(base.message, 'id', id);
      const headers: Header[] = [['host', h], ...standardHeaders(message, base.auth)];
      return headerForms(headers).map((sent) => {
        const foreignHost = h === 'evil.example';
        const absolute = /^[a-z]+:\/\//i.test(tg);
        const served = (SERVED_TARGETS as readonly string[]).includes(tg);
        const foreign = (FOREIGN_TARGETS as readonly string[]).includes(tg);
        let expect: Outcome[];
        if ((REFUSED_METHODS as readonly string[]).includes(m)) expect = [httpStatus(400)];
        else if (served || foreign) {
          // The authority of an absolute-form target replaces Host.
          const hostile = foreign || (!absolute && foreignHost);
          const notAllowed = m === 'HEAD' ? httpStatus(405) : METHOD_NOT_ALLOWED;
          // Fastify answers a method it cannot route in an onRequest hook, before the guards.
          expect = hostile
            ? m === 'POST'
              ? [FORBIDDEN]
              : [m === 'HEAD' ? httpStatus(403) : FORBIDDEN, notAllowed]
            : [notAllowed];
        } else {
          expect =
            m === 'HEAD'
              ? [httpStatus(404), httpStatus(400)]
              : [NOT_FOUND, httpStatus(404), httpStatus(400)];
        }
        const c = finish('http-forms', {
          label: `${m} ${tg} (Host: ${h}${withBody ? `, body: ${base.label}` : ', no body'})`,
          message,
          headers: sent,
          expect,
        });
        return {
          ...c,
          body: withBody ? c.body : Buffer.alloc(0),
          form: { method: m, target: tg },
        };
      });
    });
}
