/**
 * The secrets a URL can carry, and the URL as it may be shown. One rule for every URL exarch
 * prints or stores: the Postgres store's (`--db`, `EXARCH_DB_URL`), the OTLP collector's, an MCP
 * server's, `ANTHROPIC_BASE_URL`:
 *
 * - the user part: a password becomes `***`; so does a user name, except a Postgres URL's (there it
 *   is the role, which messages need and which is no secret);
 * - the query: the value of every parameter whose name says it holds a secret (`password`,
 *   `sslpassword`, `sslkey`, `access_token`, `api_key`, `X-Amz-Signature`, `sig`, …: see
 *   SECRET_PARAM) becomes `***`;
 * - the fragment becomes `***` (OAuth puts tokens there).
 *
 * Everything else is kept as it was written, byte for byte: the text is cut at its delimiters, not
 * parsed and serialised again (which would re-encode what it does not change, and refuse what pg
 * takes, such as a list of hosts). Text that is no URL (a libpq `key=value` string, a typo) gets
 * the query's rule on its `name=value` words. A secret in a URL's path (a webhook's) is not found.
 *
 * Hand-written: the URL parsers at hand (WHATWG `URL`, pg-connection-string) normalise what they
 * read, and a redactor must show what the person wrote, minus the secrets.
 */

/** What stands for a secret taken out of a URL. */
export const URL_SECRET_MARK = '***';

/**
 * A query parameter whose name (percent-decoded, any case) contains one of these holds a secret.
 * Wide on purpose: a parameter masked for nothing costs a message a few letters.
 */
const SECRET_PARAM = /pass|pwd|token|secret|key|auth|signature|credential|^sig$/i;

/** A URL cut at its delimiters; undefined for text that does not start with a scheme. */
interface UrlParts {
  readonly scheme: string;
  /** Between `//` and the last `@` before the query: undefined when there is none. */
  readonly userinfo?: string;
  /** `//` and the host (and port), or undefined when the URL has no `//`. */
  readonly host?: string;
  readonly path: string;
  /** Without its `?`. */
  readonly query?: string;
  /** Without its `#`. */
  readonly fragment?: string;
}

/**
 * RFC 3986's split, with one difference: the user part runs to the last `@` before the query or
 * fragment, not the first `/`, so that a password holding a `/` is still the password.
 */
function splitUrl(text: string): UrlParts | undefined {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:/.exec(text)?.[0];
  if (scheme === undefined) return undefined;
  let rest = text.slice(scheme.length);
  let userinfo: string | undefined;
  let host: string | undefined;
  if (rest.startsWith('//')) {
    const beforeQuery = rest.search(/[?#]/);
    const at = rest.lastIndexOf('@', beforeQuery < 0 ? rest.length : beforeQuery - 1);
    const hostStart = at >= 2 ? at + 1 : 2;
    if (at >= 2) userinfo = rest.slice(2, at);
    const hostEnd = rest.slice(hostStart).search(/[/?#]/);
    const end = hostEnd < 0 ? rest.length : hostStart + hostEnd;
    host = `//${rest.slice(hostStart, end)}`;
    rest = rest.slice(end);
  }
  const [, path = '', query, fragment] = /^([^?#]*)(?:\?([^#]*))?(?:#([\s\S]*))?$/.exec(rest) ?? [];
  return {
    scheme,
    path,
    ...(userinfo === undefined ? {} : { userinfo }),
    ...(host === undefined ? {} : { host }),
    ...(query === undefined ? {} : { query }),
    ...(fragment === undefined ? {} : { fragment }),
  };
}

/** Whether `text` is a URL with an authority (`scheme://…`): the form exarch is given URLs in. */
export function isUrl(text: string): boolean {
  return /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(text);
}

/** Whether `name` (a query parameter's or a `key=value` word's) names a secret. */
function isSecretParam(name: string): boolean {
  return SECRET_PARAM.test(decoded(name.replace(/\+/g, ' ')));
}

/** `text` with the secrets of the URL (or the `key=value` words) in it replaced by `***`. */
export function redactUrl(text: string): string {
  const url = splitUrl(text);
  if (!url) return redactWords(text);
  const { scheme, userinfo, host, path, query, fragment } = url;
  const user = userinfo === undefined ? '' : `${redactUserinfo(scheme, userinfo)}@`;
  const authority = host === undefined ? '' : `//${user}${host.slice(2)}`;
  return `${scheme}${authority}${path}${query === undefined ? '' : `?${redactQuery(query)}`}${fragment === undefined ? '' : fragment === '' ? '#' : `#${URL_SECRET_MARK}`}`;
}

/**
 * The secret values in `text` (as `redactUrl` finds them), each as written and percent-decoded:
 * what a `Redactor` is given so that a secret of a URL is redacted wherever it turns up (an error
 * that quotes it, a log).
 */
export function urlSecrets(text: string): string[] {
  const found = new Set<string>();
  const add = (value: string): void => {
    if (value === '') return;
    found.add(value);
    found.add(decoded(value));
  };
  const url = splitUrl(text);
  if (!url) {
    for (const value of secretWordValues(text)) add(value);
    return [...found];
  }
  const { scheme, userinfo, query, fragment } = url;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    if (colon >= 0) add(userinfo.slice(colon + 1));
    if (!isPostgresScheme(scheme)) add(colon >= 0 ? userinfo.slice(0, colon) : userinfo);
  }
  if (query !== undefined)
    for (const piece of query.split('&')) {
      const eq = piece.indexOf('=');
      if (eq >= 0 && isSecretParam(piece.slice(0, eq))) add(piece.slice(eq + 1));
    }
  if (fragment !== undefined) add(fragment);
  return [...found];
}

function isPostgresScheme(scheme: string): boolean {
  return /^postgres(?:ql)?:$/i.test(scheme);
}

/** `user:password`: the password masked, and the user too unless it is a Postgres role. */
function redactUserinfo(scheme: string, userinfo: string): string {
  if (!isPostgresScheme(scheme)) return URL_SECRET_MARK;
  const colon = userinfo.indexOf(':');
  return colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:${URL_SECRET_MARK}`;
}

function redactQuery(query: string): string {
  return query
    .split('&')
    .map((piece) => {
      const eq = piece.indexOf('=');
      return eq >= 0 && isSecretParam(piece.slice(0, eq)) ? `${piece.slice(0, eq + 1)}${URL_SECRET_MARK}` : piece;
    })
    .join('&');
}

/**
 * A `name=value` word: the name, the `=` (spaces around it allowed, as libpq allows them), and the
 * value: single-quoted (with backslash escapes, as libpq quotes; anything stuck to the closing quote
 * counts too), or up to the next space, `&` or `;`.
 */
const WORD = /([^\s&;=]+)(\s*=\s*)('(?:[^'\\]|\\[\s\S])*'?[^\s&;]*|[^\s&;]*)/g;

/** Text that is no URL: the value of every `name=value` word whose name says secret masked. */
function redactWords(text: string): string {
  return text.replace(WORD, (word, name: string, eq: string) => (isSecretParam(name) ? `${name}${eq}${URL_SECRET_MARK}` : word));
}

function secretWordValues(text: string): string[] {
  const values: string[] = [];
  for (const [, name = '', , value = ''] of text.matchAll(WORD)) {
    if (!isSecretParam(name)) continue;
    values.push(value);
    if (value.startsWith("'")) values.push(value.replace(/^'|'$/g, '').replace(/\\([\s\S])/g, '$1'));
  }
  return values;
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
