import { createRequire } from 'node:module';
import { expressRouteMatcher } from '../../src/mcp/body-parsing.installer.js';

/** What the test uses of Express's router (express ships no types of its own). */
interface ExpressRouter {
  (req: unknown, res: unknown, next: () => void): void;
  post(path: string, handler: () => void): void;
}
const express = createRequire(import.meta.url)('express') as {
  Router(options: { caseSensitive: boolean; strict: boolean }): ExpressRouter;
};

/**
 * Whether Express's own router (the one Nest's ExpressAdapter routes with) sends a POST to
 * `pathname` to a route registered at `route`.
 */
function expressRoutes(
  route: string,
  pathname: string,
  caseSensitive: boolean,
  strict: boolean,
): Promise<boolean> {
  const router = express.Router({ caseSensitive, strict });
  return new Promise((resolve) => {
    router.post(route, () => resolve(true));
    router({ method: 'POST', url: pathname, headers: {} }, {}, () => resolve(false));
  });
}

describe('expressRouteMatcher: the paths the package reads bodies on are those Express routes', () => {
  const routes = ['/mcp', '/api/rpc/mcp', '/api/:tenant/mcp', '/v1/mcp/', '/mcp.json', '/a-b/c_d'];
  const paths = [
    '/mcp',
    '/MCP',
    '/mcp/',
    '/mcp//',
    '/mcpx',
    '/mc',
    '/api/rpc/mcp',
    '/API/rpc/MCP/',
    '/api/acme/mcp',
    '/api/acme/mcp/',
    '/api//mcp',
    '/api/a/b/mcp',
    '/v1/mcp',
    '/v1/mcp/',
    '/mcp.json',
    '/mcpxjson',
    '/a-b/c_d',
    '/m%63p',
    '/',
  ];

  it.each([
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ])(
    'case sensitive %s, strict %s: the same answer as Express for each path',
    async (sensitive, strict) => {
      const disagreements: string[] = [];
      for (const route of routes) {
        const matches = expressRouteMatcher(route, sensitive, strict);
        expect(matches).toBeDefined();
        for (const path of paths) {
          const routed = await expressRoutes(route, path, sensitive, strict);
          if (matches!(path) !== routed) disagreements.push(`${route} ${path}: Express ${routed}`);
        }
      }
      expect(disagreements).toEqual([]);
    },
  );

  it('wildcards and optional parts are not matched (the app’s parser keeps those routes)', () => {
    for (const route of ['/mcp/*rest', '/mcp{/:id}', '/:id?', '/(mcp)', '/mcp\\*']) {
      expect(expressRouteMatcher(route, false, false)).toBeUndefined();
    }
  });
});
