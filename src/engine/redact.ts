import { escapeHtml, escapeForScript } from './escape.js';
import { isUrl, urlSecrets } from './urlSecrets.js';

/**
 * Secrets never leave the process in what exarch writes: the API key, and the value of every
 * environment variable that holds a secret (see `isSecretVariable`), become `[redacted]` in
 * stdout and stderr, the JSONL logs, the trace, the viewer HTML and the run store. An API error
 * that echoes the key, a tool result that prints a token: the text is redacted where it is
 * written (the sinks), not where it is made, so no new source can forget it.
 *
 * Each writer asks for the encoding it writes, because a secret is spelled differently inside a
 * JSON string (`"` and `\` escaped) or in HTML (`<` as `&#60;`, or `\u003c` in the viewer's
 * embedded JSON); the raw spelling is not used on JSON, where a coincidental match could cut a
 * string's quotes and leave a line that no longer parses.
 *
 * Hand-written: it is one regular expression of escaped literals built once per writer, and the
 * libraries for this (secret scanners) look for key-shaped text, not for the values we know.
 */

export const REDACTED = '[redacted]';

/**
 * Shorter values are not secrets worth the damage: a `*_KEY=1` or `DEBUG_TOKEN=yes` redacted
 * would turn every `1` and `yes` in every log into `[redacted]`. Real keys and tokens are far longer.
 */
export const MIN_SECRET_CHARS = 8;

/**
 * Variables whose whole value is a secret: ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, GITHUB_TOKEN,
 * AWS_SECRET_ACCESS_KEY, CLIENT_SECRET, DB_PASSWORD, and libpq's PGPASSWORD.
 */
const SECRET_NAME = /(?:^|_)(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD)$|^PGPASSWORD$/i;

/** The OTLP exporter's headers (`key=value,…`): a collector's credentials go there. */
const OTLP_HEADERS = /^OTEL_EXPORTER_OTLP_(?:TRACES_|METRICS_|LOGS_)?HEADERS$/i;

/**
 * Whether a variable holds a secret: by its name (see SECRET_NAME), as the OTLP exporter's headers,
 * or as a URL with credentials in it (`EXARCH_DB_URL=postgres://u:pw@…`, an `ANTHROPIC_BASE_URL`
 * with a token). Such a variable's secrets are redacted from what exarch writes, and it is not
 * handed to the commands agents run.
 */
export function isSecretVariable(name: string, value: string): boolean {
  return SECRET_NAME.test(name) || OTLP_HEADERS.test(name) || (isUrl(value) && urlSecrets(value).length > 0);
}

/** The secrets in one variable's value: the whole of it, and the parts a URL or a header list keeps them in. */
function secretsOfVariable(name: string, value: string): string[] {
  const secrets: string[] = [];
  if (SECRET_NAME.test(name) || OTLP_HEADERS.test(name)) secrets.push(value);
  // A URL's user part, secret parameters and fragment (see urlSecrets.ts).
  if (isUrl(value)) secrets.push(...urlSecrets(value));
  if (OTLP_HEADERS.test(name)) secrets.push(...otlpHeaderSecrets(value));
  return secrets;
}

/**
 * `Authorization=Bearer%20abc,api-key=xyz` (W3C baggage format, values percent-encoded): each
 * value, as written and decoded, and the credential after an auth scheme (`Bearer abc` → `abc`).
 */
function otlpHeaderSecrets(value: string): string[] {
  const secrets: string[] = [];
  for (const header of value.split(',')) {
    const eq = header.indexOf('=');
    if (eq < 0) continue;
    const raw = header.slice(eq + 1).trim();
    let plain = raw;
    try {
      plain = decodeURIComponent(raw);
    } catch {
      // Kept as written.
    }
    secrets.push(raw, plain);
    const credential = /^\S+\s+(\S+)$/.exec(plain)?.[1];
    if (credential !== undefined) secrets.push(credential);
  }
  return secrets;
}

/** The secret values in an environment, each once, at least MIN_SECRET_CHARS long. */
export function secretsIn(env: Readonly<Record<string, string | undefined>>): string[] {
  const secrets = new Set<string>();
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    for (const secret of secretsOfVariable(name, value)) if (secret.length >= MIN_SECRET_CHARS) secrets.add(secret);
  }
  return [...secrets];
}

/** Inside a JSON string literal (without its quotes). */
const inJson = (text: string): string => JSON.stringify(text).slice(1, -1);

type Spell = (secret: string) => string;

/** Plain text may quote JSON (an error body), so its escaped spellings count too. */
const TEXT: readonly Spell[] = [(s) => s, inJson, (s) => inJson(inJson(s))];
/** A JSON document: the secret inside a string, or inside a JSON string inside a string. */
const JSON_TEXT: readonly Spell[] = [inJson, (s) => inJson(inJson(s))];
/** The viewer: escaped HTML text and attributes, and the trace JSON in its `<script>`. */
const HTML: readonly Spell[] = [escapeHtml, (s) => escapeHtml(inJson(s)), (s) => escapeForScript(inJson(s)), (s) => escapeForScript(inJson(inJson(s)))];

/** Redacts a fixed set of secrets; one instance per writer, built once. */
export class Redactor {
  private readonly textPattern: RegExp | undefined;
  private readonly jsonPattern: RegExp | undefined;
  private readonly htmlPattern: RegExp | undefined;

  /** Values shorter than MIN_SECRET_CHARS are ignored (see there). */
  constructor(secrets: Iterable<string>) {
    const kept = [...new Set(secrets)].filter((secret) => secret.length >= MIN_SECRET_CHARS);
    this.textPattern = patternOf(kept, TEXT);
    this.jsonPattern = patternOf(kept, JSON_TEXT);
    this.htmlPattern = patternOf(kept, HTML);
  }

  /** The secrets of `env` (`process.env` by default) and any `extra` ones (a key passed in code, a `--db` URL's password). */
  static fromEnv(env: Readonly<Record<string, string | undefined>> = process.env, extra: readonly string[] = []): Redactor {
    return new Redactor([...secretsIn(env), ...extra]);
  }

  /** Whether there is anything to redact at all. */
  get active(): boolean {
    return this.textPattern !== undefined;
  }

  /** Text for a terminal or a plain file. */
  text(text: string): string {
    return this.textPattern ? text.replace(this.textPattern, REDACTED) : text;
  }

  /** JSON text (a log or trace line, a store record): stays valid JSON. */
  json(text: string): string {
    return this.jsonPattern ? text.replace(this.jsonPattern, REDACTED) : text;
  }

  /** An HTML page. */
  html(text: string): string {
    return this.htmlPattern ? text.replace(this.htmlPattern, REDACTED) : text;
  }
}

/** One alternation of every spelling, longest first (a secret that contains another is taken whole). */
function patternOf(secrets: readonly string[], spellings: readonly Spell[]): RegExp | undefined {
  const forms = new Set<string>();
  for (const secret of secrets) for (const spell of spellings) forms.add(spell(secret));
  if (forms.size === 0) return undefined;
  const alternatives = [...forms].sort((a, b) => b.length - a.length).map((form) => form.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&'));
  return new RegExp(alternatives.join('|'), 'g');
}
