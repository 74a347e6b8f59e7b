import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { redactUrl, urlSecrets } from '../../src/engine/urlSecrets.js';

/**
 * Issue 37, hole 5: `describeUrl` masked a Postgres URL's user-part password and printed the rest
 * whole, `?password=…` included. `redactUrl` against an oracle that never parses: URLs are built
 * here from parts whose secrecy the generator knows (a parameter name is drawn from a list of
 * names that hold secrets or from one of names that do not), and the expected text is built from
 * the same parts.
 */

const MARK = '***';

/** Parameter names that hold secrets, as libpq, OAuth, cloud signatures and APIs spell them. */
const SECRET_NAMES = [
  'password',
  'PASSWORD',
  'sslpassword',
  'sslkey',
  'passfile',
  'access_token',
  'refresh_token',
  'token',
  'api_key',
  'apiKey',
  'client_secret',
  'secret',
  'auth',
  'authorization',
  'X-Amz-Signature',
  'X-Amz-Credential',
  'X-Amz-Security-Token',
  'X-Goog-Signature',
  'sig',
  'pass%77ord',
  'api%5Fkey',
];
/** Parameter names that do not (`design` holds `sig`, which alone is Azure's signature). */
const PLAIN_NAMES = ['sslmode', 'application_name', 'host', 'port', 'connect_timeout', 'options', 'page', 'q', 'design', 'sslrootcert', 'user', 'dbname'];

/** Characters a value may hold: letters, digits, percent escapes, and the delimiters that are legal inside it. */
const valueChars = (extra: readonly string[]) =>
  fc.string({ unit: fc.constantFrom('a', 'Z', '7', '-', '_', '.', '~', '%41', '%2F', '+', ...extra), maxLength: 12 });

const scheme = fc.constantFrom('postgres:', 'postgresql:', 'POSTGRES:', 'https:', 'http:', 'mysql:', 'redis:');
const user = fc.string({ unit: fc.constantFrom('a', 'b', 'X', '9', '_', '-', '.', '%40'), minLength: 1, maxLength: 10 });
/** A password may hold `:`, `/` and `@`: the user part runs to the last `@` before the query. */
const password = valueChars([':', '/', '@', '!', '$', "'"]);
const host = fc.constantFrom('db.example.com', '127.0.0.1', 'h1:5432,h2:5433', '[::1]', 'collector', '');
const port = fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined });
const path = fc.constantFrom('', '/', '/db', '/v1/traces', '/mcp', '/a/b:c');
const param = fc.oneof(
  fc.record({ secret: fc.constant(true), name: fc.constantFrom(...SECRET_NAMES), value: fc.option(valueChars(['=', '?', '/', ':', '@']), { nil: undefined }) }),
  fc.record({ secret: fc.constant(false), name: fc.constantFrom(...PLAIN_NAMES), value: fc.option(valueChars(['=', '?', '/', ':', '@']), { nil: undefined }) }),
);
const fragment = fc.option(fc.string({ maxLength: 12 }), { nil: undefined });

const url = fc.record({
  scheme,
  userinfo: fc.option(fc.record({ user, password: fc.option(password, { nil: undefined }) }), { nil: undefined }),
  host,
  port,
  path,
  query: fc.option(fc.array(param, { maxLength: 5 }), { nil: undefined }),
  fragment,
});
type Url = typeof url extends fc.Arbitrary<infer T> ? T : never;

const isPostgres = (u: Url): boolean => /^postgres(ql)?:$/i.test(u.scheme);

function written(u: Url): string {
  const userinfo = u.userinfo === undefined ? '' : `${u.userinfo.user}${u.userinfo.password === undefined ? '' : `:${u.userinfo.password}`}@`;
  const query = u.query === undefined ? '' : `?${u.query.map((p) => (p.value === undefined ? p.name : `${p.name}=${p.value}`)).join('&')}`;
  return `${u.scheme}//${userinfo}${u.host}${u.port === undefined ? '' : `:${u.port}`}${u.path}${query}${u.fragment === undefined ? '' : `#${u.fragment}`}`;
}

/** What may be shown, from the parts: the oracle. */
function shown(u: Url): string {
  let userinfo = '';
  if (u.userinfo !== undefined) {
    if (!isPostgres(u)) userinfo = `${MARK}@`;
    else userinfo = `${u.userinfo.user}${u.userinfo.password === undefined ? '' : `:${MARK}`}@`;
  }
  const query = u.query === undefined ? '' : `?${u.query.map((p) => (p.value === undefined ? p.name : `${p.name}=${p.secret ? MARK : p.value}`)).join('&')}`;
  const fragment = u.fragment === undefined ? '' : u.fragment === '' ? '#' : `#${MARK}`;
  return `${u.scheme}//${userinfo}${u.host}${u.port === undefined ? '' : `:${u.port}`}${u.path}${query}${fragment}`;
}

/** The secrets the parts hold (non-empty ones). */
function secretsOf(u: Url): string[] {
  const secrets: string[] = [];
  if (u.userinfo?.password) secrets.push(u.userinfo.password);
  if (u.userinfo && !isPostgres(u)) secrets.push(u.userinfo.user);
  for (const p of u.query ?? []) if (p.secret && p.value) secrets.push(p.value);
  if (u.fragment) secrets.push(u.fragment);
  return secrets;
}

/** Text made of delimiters and secret words, with and without a scheme in front. */
const delimiters = fc
  .tuple(
    fc.constantFrom('', 'postgres://', 'https://', 'x:', 'mysql://u:p@'),
    fc.string({ unit: fc.constantFrom('a', ':', '/', '@', '?', '#', '&', '=', ' ', "'", '\\', '%', 'password', 'p:', 'key'), maxLength: 30 }),
  )
  .map(([scheme, rest]) => scheme + rest);

describe('redactUrl against an oracle built from parts', () => {
  it('masks the user part, every secret parameter and the fragment, and keeps every other character as written', () => {
    fc.assert(
      fc.property(url, (u) => {
        expect(redactUrl(written(u))).toBe(shown(u));
      }),
      { numRuns: 2000 },
    );
  });

  it('names every secret it masks (for the redactors of logs and output), as written', () => {
    fc.assert(
      fc.property(url, (u) => {
        const found = urlSecrets(written(u));
        for (const secret of secretsOf(u)) expect(found).toContain(secret);
      }),
      { numRuns: 1000 },
    );
  });

  it('takes any text without throwing, and masking twice changes nothing', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), url.map(written), delimiters), (text) => {
        const once = redactUrl(text);
        expect(redactUrl(once)).toBe(once);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('redactUrl on what is not a plain URL', () => {
  it('a libpq key=value string: secret words masked, quoted values whole', () => {
    expect(redactUrl("host=db port=5432 password='se cr\\'et' user=u sslpassword = x2")).toBe('host=db port=5432 password=*** user=u sslpassword = ***');
    expect(urlSecrets("password='se cr\\'et'")).toContain("se cr'et");
    // Found by the property below: what sticks to a closing quote is part of the value.
    expect(redactUrl("password=''a")).toBe('password=***');
  });

  it('an @ in a path before the query is read as ending a user part: masked rather than risk a password with a /', () => {
    expect(redactUrl('postgres://u:pa/ss@h/db')).toBe('postgres://u:***@h/db');
    expect(redactUrl('https://example.com/@user?x=1')).toBe('https://***@user?x=1');
  });

  it('a percent-encoded secret is also named decoded', () => {
    expect(urlSecrets('postgres://u:p%40ss%2Fword@h/db')).toEqual(expect.arrayContaining(['p%40ss%2Fword', 'p@ss/word']));
  });
});
