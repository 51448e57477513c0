/**
 * The request target of an HTTP/1.1 request line (RFC 9112 §3.2), as the endpoint reads it:
 * - origin form `/mcp?x=1`: the path, and the authority from the Host header;
 * - absolute form `http://127.0.0.1:3000/mcp`: the path, and the target's own authority, which
 *   replaces the Host header (RFC 9112 §3.2.2);
 * - anything else (asterisk form `*`, authority form, another scheme, a target that does not
 *   parse): `undefined`, never the endpoint.
 */
export interface RequestTarget {
  /** The path as sent (not decoded, not case-folded). */
  pathname: string;
  /** `?…` or empty. */
  search: string;
  /** The authority the target names (absolute form only). */
  authority?: string;
}

const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

export function requestTarget(url: string): RequestTarget | undefined {
  if (url.startsWith('/')) {
    const query = url.indexOf('?');
    return query === -1
      ? { pathname: url, search: '' }
      : { pathname: url.slice(0, query), search: url.slice(query) };
  }
  if (!ABSOLUTE.test(url)) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.host === '') {
    return undefined;
  }
  if (parsed.username !== '' || parsed.password !== '') return undefined;
  // The path as sent: WHATWG URL parsing would resolve `..` and fold the scheme's default port.
  const rest = url.slice(url.indexOf('//') + 2);
  const slash = rest.search(/[/?#]/);
  const afterAuthority = slash === -1 ? '' : rest.slice(slash);
  const query = afterAuthority.indexOf('?');
  const path = query === -1 ? afterAuthority : afterAuthority.slice(0, query);
  return {
    pathname: path === '' ? '/' : path,
    search: query === -1 ? '' : afterAuthority.slice(query),
    authority: parsed.host,
  };
}

/** The path of a request target, or `undefined` when it has none (see requestTarget). */
export function pathOfTarget(url: string): string | undefined {
  return requestTarget(url)?.pathname;
}
