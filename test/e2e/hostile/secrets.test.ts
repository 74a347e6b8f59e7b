import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { httpError } from '../../support/anthropicServer.js';
import { call, exarch, serve, stream, workdir, type CliRun } from '../../support/cliHarness.js';
import { jsonLines, jsonlDir } from '../../support/hostileInput.js';
import { REDACTED, Redactor } from '../../../src/engine/redact.js';
import { filesUnder } from '../../support/filesUnder.js';

/**
 * Issue 13, hole 7 (the part outside run_shell): a 401 whose body echoes the key put the key
 * verbatim on stderr, in the agent's JSONL log, in the trace and in the viewer HTML. Every byte
 * exarch writes is now redacted: stderr, stdout, logs, trace, viewer and the run store, for the
 * API key and the value of every `*_KEY`, `*_TOKEN`, `*_SECRET` variable. The oracle greps the
 * bytes of every file the run left, for fragments of the secret that no escaping changes.
 */

/** Where any of `fragments` appears: in the run's stdout/stderr or in a file under `dir`. */
function leaks(fragments: readonly string[], dir: string, runs: readonly CliRun[]): string[] {
  const found: string[] = [];
  const texts = new Map<string, string>([
    ...runs.flatMap((run, i): [string, string][] => [
      [`stdout #${i}`, run.stdout],
      [`stderr #${i}`, run.stderr],
    ]),
    ...filesUnder(dir),
  ]);
  for (const [where, text] of texts) for (const fragment of fragments) if (text.includes(fragment)) found.push(`${fragment} in ${where}`);
  return found;
}

/** Runs `exarch view` on the trace and on the stored run, so their pages are among the files. */
async function views(cwd: string, run: CliRun, env: Record<string, string>): Promise<CliRun[]> {
  const id = /exarch: run (\S+) started/.exec(run.stderr)?.[1];
  expect(id, 'the run was stored').toBeDefined();
  const fromTrace = await exarch(['view', join(cwd, 'trace.jsonl'), '--out', join(cwd, 'view-trace.html')], { cwd, env });
  const fromStore = await exarch(['view', id ?? '', '--out', join(cwd, 'view-run.html')], { cwd, env });
  expect([fromTrace.code, fromStore.code]).toEqual([0, 0]);
  return [fromTrace, fromStore];
}

describe('secrets never leave exarch', () => {
  it('a 401 that echoes the API key: the key is nowhere in stderr, stdout, logs, trace, viewer pages or the store', async () => {
    const key = 'sk-ant-api03-LEAKCHECK0123456789abcdefGHIJ-tail9876';
    const cwd = workdir();
    const server = await serve({ root: [httpError(401, 'authentication_error', `invalid x-api-key: ${key}`)] });
    const env = { ANTHROPIC_API_KEY: key };
    const run = await exarch(['run', '--log-dir', join(cwd, 'logs'), '--trace', join(cwd, 'trace.jsonl'), 'go'], { server, cwd, env });
    expect(run.code).toBe(1);
    // The server did get the key, and echoed it: what follows is exarch's doing.
    expect(JSON.stringify(server.requests[0]?.headers)).toContain(key);
    expect(run.stderr).toContain(`invalid x-api-key: ${REDACTED}`);
    const pages = await views(cwd, run, env);
    expect(leaks(['LEAKCHECK', 'tail9876'], cwd, [run, ...pages])).toEqual([]);

    expect(jsonlDir(join(cwd, 'logs')).get('root.jsonl')?.at(-1)).toMatchObject({
      type: 'outcome',
      outcome: 'failed',
      reason: expect.stringContaining(REDACTED),
    });
    expect(jsonLines(join(cwd, 'trace.jsonl')).some((r) => JSON.stringify(r).includes(REDACTED))).toBe(true);
    for (const page of ['view-trace.html', 'view-run.html']) expect(readFileSync(join(cwd, page), 'utf8')).toContain(REDACTED);
    expect(readFileSync(join(cwd, '.exarch', 'exarch.db')).toString('latin1')).toContain(REDACTED);
  });

  it('a *_TOKEN value a tool result echoes is redacted everywhere exarch writes it, in any escaping; a short one is not a secret', async () => {
    // Quotes, <, & and ' are spelled differently in JSON and HTML; the fragments around them are not.
    const token = `HEADfrag"<&'TAILfrag-2024`;
    const cwd = workdir();
    writeFileSync(join(cwd, 'notes.txt'), `deploy token: ${token}\n`);
    const server = await serve({
      root: [stream({ toolCalls: [call('read_file', { path: 'notes.txt' })] }), stream({ text: `The notes hold ${token}, and yes.` })],
    });
    const env = { FOO_TOKEN: token, SHORT_TOKEN: 'yes' };
    const run = await exarch(['run', '--log-dir', join(cwd, 'logs'), '--trace', join(cwd, 'trace.jsonl'), 'go'], { server, cwd, env });
    expect(run.code).toBe(0);
    // The model needs what it read: requests are not redacted, only what exarch writes.
    expect(JSON.stringify(server.requests[1]?.body.messages)).toContain('TAILfrag');
    expect(run.stdout).toBe(`The notes hold ${REDACTED}, and yes.\n`);
    const pages = await views(cwd, run, env);
    // notes.txt itself is the workspace, not something exarch wrote.
    const found = leaks(['HEADfrag', 'TAILfrag'], cwd, [run, ...pages]).filter((where) => !where.endsWith('notes.txt'));
    expect(found).toEqual([]);
    const root = jsonlDir(join(cwd, 'logs')).get('root.jsonl') ?? [];
    expect(JSON.stringify(root.filter((r) => r['type'] === 'message'))).toContain(`deploy token: ${REDACTED}`);
  });
});

describe('Redactor', () => {
  const secret = 'p"a\\ss<w>o&rd\'-42';

  it('keeps JSON valid while it redacts a secret that JSON escapes', () => {
    const redactor = new Redactor([secret]);
    const line = JSON.stringify({ message: `before ${secret} after`, nested: JSON.stringify({ again: secret }) });
    const redacted = redactor.json(line);
    expect(JSON.parse(redacted)).toEqual({ message: `before ${REDACTED} after`, nested: JSON.stringify({ again: REDACTED }) });
  });

  it('redacts the spellings of a secret in a page: escaped HTML and the JSON its script holds', () => {
    const redactor = new Redactor([secret]);
    const page = `<h1>p&#34;a\\ss&#60;w&#62;o&#38;rd&#39;-42</h1><script>{"t":"p\\"a\\\\ss\\u003cw\\u003eo\\u0026rd'-42"}</script>`;
    expect(redactor.html(page)).toBe(`<h1>${REDACTED}</h1><script>{"t":"${REDACTED}"}</script>`);
  });

  it('takes *_KEY, *_TOKEN and *_SECRET values of 8 characters or more, and nothing else', () => {
    const redactor = Redactor.fromEnv({
      ANTHROPIC_API_KEY: 'sk-ant-12345678',
      ANTHROPIC_AUTH_TOKEN: 'auth-token-1',
      DB_SECRET: 'hunter2hunter2',
      DEBUG_KEY: '1',
      HOME: '/home/someone',
      KEYRING: 'not-a-secret-name',
    });
    expect(redactor.text('sk-ant-12345678 auth-token-1 hunter2hunter2 /home/someone not-a-secret-name 1')).toBe(
      `${REDACTED} ${REDACTED} ${REDACTED} /home/someone not-a-secret-name 1`,
    );
    expect(Redactor.fromEnv({ PATH: '/usr/bin' }).active).toBe(false);
  });
});
