import { readdirSync, readFileSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Redactor } from '../../../src/engine/redact.js';
import { startLiveViewer, startTraceServer, type TraceServer } from '../../../src/watch/viewer/liveServer.js';
import { startAnthropicServer, scriptedHandler } from '../../support/anthropicServer.js';
import { onCleanup, startExarch, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 37: the live viewer answered anyone who could reach 127.0.0.1, so another user of the
 * machine could read the conversation (`curl http://127.0.0.1:PORT/trace.jsonl`). Now each
 * viewer makes a secret of its own, as Jupyter does; the address it prints carries it, and a
 * request without it, or with a wrong one, gets 403 and nothing of the run.
 */

/** What the run says: no answer to a request without the token may hold any of it. */
const CONVERSATION = 'the moon is made of basalt';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

interface Answer {
  readonly status: number;
  readonly type: string;
  readonly referrerPolicy: string;
  readonly body: string;
}

/** A request for `target` (a whole URL), with a `Host` of the server's own; an event stream is read until `end` or 2 KiB. */
function ask(target: string, method = 'GET', headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(target, { method, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      const done = (): void =>
        resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), referrerPolicy: String(res.headers['referrer-policy']), body });
      res.on('data', (chunk: string) => {
        body += chunk;
        // A stream that is being sent the run has shown enough of it.
        if (res.headers['content-type']?.startsWith('text/event-stream') && body.length > 2048) {
          req.destroy();
          done();
        }
      });
      res.on('end', done);
    });
    req.on('error', reject);
    req.end();
  });
}

/** `path` on the server at `url`, with `token` as its `?token=` (none when undefined). */
function withToken(url: string, path: string, token: string | undefined): string {
  const target = new URL(path, url);
  target.search = '';
  if (token !== undefined) target.searchParams.set('token', token);
  return target.href;
}

async function viewerWithARun(): Promise<TraceServer> {
  const server = await startTraceServer({ redactor: new Redactor([]) });
  closers.push(() => server.close());
  const statechart = { initial: 'idle', states: [{ id: 'idle', final: false }], transitions: [] };
  server.push({ t: 0, kind: 'trace.start', version: 1, startedAt: new Date(0).toISOString(), title: 'the run', statechart });
  server.push({ t: 1, kind: 'agent.start', agent: 'root', name: 'root', depth: 0, parent: null, task: CONVERSATION, taskChars: CONVERSATION.length });
  server.push({ t: 2, kind: 'message', agent: 'root', index: 0, message: { role: 'user', content: [{ type: 'text', text: `${CONVERSATION} `.repeat(200) }] } });
  return server;
}

const PATHS = ['', 'index.html', 'events', 'events?from=0', 'trace.jsonl', 'nothing'];

describe('the live viewer token', () => {
  it('is made fresh for each viewer, 256 random bits, and carried by the address to open', async () => {
    const first = await viewerWithARun();
    const second = await viewerWithARun();
    const tokenOf = (url: string): string => new URL(url).searchParams.get('token') ?? '';
    expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(tokenOf(first.url), 'base64url')).toHaveLength(32);
    expect(tokenOf(first.url)).not.toBe(tokenOf(second.url));
    // The address as printed opens the page.
    const page = await ask(first.url);
    expect(page.status).toBe(200);
    expect(page.body).toContain(CONVERSATION);
  });

  it('is required on every request: without it, or with a wrong one, 403 and nothing of the run', async () => {
    const server = await viewerWithARun();
    const token = new URL(server.url).searchParams.get('token') ?? '';
    const flipped = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    const wrong = [undefined, '', flipped, token.slice(0, -1), `${token}A`, token.toUpperCase(), 'x'.repeat(43)];
    for (const path of PATHS) {
      for (const given of wrong) {
        const answer = await ask(withToken(server.url, path, given));
        expect(answer.status, `${path} with ${String(given)}`).toBe(403);
        expect(answer.type).toBe('text/plain; charset=utf-8');
        expect(answer.body).not.toContain(CONVERSATION);
        expect(answer.body).not.toContain('root');
      }
    }
    // The token under another name, or in a header a page might send, is no token.
    expect((await ask(`${server.url.replace('?token=', '?Token=')}`)).status).toBe(403);
    expect((await ask(withToken(server.url, 'trace.jsonl', undefined), 'GET', { authorization: `token ${token}`, cookie: `token=${token}` })).status).toBe(403);
    expect((await ask(withToken(server.url, '', undefined), 'POST')).status).toBe(403);
    // With it: the run, by every way in.
    for (const path of ['', 'index.html', 'events?from=0', 'trace.jsonl']) {
      const answer = await ask(withToken(server.url, path, token));
      expect(answer.status, path).toBe(200);
      expect(answer.body, path).toContain(CONVERSATION);
    }
    // The page's own stream is asked for with the token, and the page's address (which holds it) is sent nowhere as a referrer.
    const page = await ask(server.url);
    expect(page.body).toContain(`"live":{"events":"events?token=${token}"}`);
    expect(page.referrerPolicy).toBe('no-referrer');
    // The Host check stays: a DNS-rebinding page that somehow had the token is refused all the same.
    const port = new URL(server.url).port;
    expect((await ask(server.url, 'GET', { host: `evil.example:${port}` })).status).toBe(403);
  });

  it('can be given by a host (at least 22 URL-safe characters), and a weak one is refused in one line', async () => {
    const token = 'a-token-from-the-host_0123456789';
    const viewer = await startLiveViewer({ token });
    closers.push(() => viewer.close());
    expect(viewer.token).toBe(token);
    expect(new URL(viewer.url).searchParams.get('token')).toBe(token);
    expect((await ask(viewer.url)).status).toBe(200);
    for (const weak of ['', 'short', 'has spaces in it, twenty-two+', 'a'.repeat(21), 'é'.repeat(30)]) {
      await expect(startLiveViewer({ token: weak })).rejects.toThrow(
        'the live viewer token must be 22 to 512 URL-safe characters (A-Z a-z 0-9 - _ . ~), as newViewerToken() makes',
      );
    }
  });
});

/** Every file under `dir`, as text. */
function everything(dir: string): string {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((name) => join(dir, name))
    .filter((path) => statSync(path).isFile())
    .map((path) => readFileSync(path, 'latin1'))
    .join('\n');
}

describe('exarch run --ui', () => {
  it('prints an address with the token; without it (all another user of the machine has) 403 and nothing of the run; the token is kept nowhere', async () => {
    let release = (): void => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const scripted = scriptedHandler({ root: [stream({ text: `Answer: ${CONVERSATION}` })] });
    // The root's request waits for the test: the run is in progress while the test asks.
    const model = await startAnthropicServer(async (received) => {
      await held;
      return scripted(received);
    });
    onCleanup(() => model.close());
    onCleanup(release);
    const cwd = workdir();
    const run = startExarch(['run', '--ui', `Tell me what ${CONVERSATION}`], model, cwd);
    await run.until('the live viewer address', () => /live turn flow at \S+ /.test(run.stderr()) && model.requests.length > 0);
    const url = /exarch: live turn flow at (\S+) \(open it in a browser\)/.exec(run.stderr())?.[1] ?? '';
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
    const token = new URL(url).searchParams.get('token') ?? '';

    for (const path of ['', 'events?from=0', 'trace.jsonl']) {
      const refused = await ask(withToken(url, path, undefined));
      expect(refused.status, path).toBe(403);
      expect(refused.body).not.toContain(CONVERSATION);
      const wrong = await ask(withToken(url, path, `${token.slice(1)}x`));
      expect(wrong.status, path).toBe(403);
      expect(wrong.body).not.toContain(CONVERSATION);
    }
    const page = await ask(url);
    expect(page.status).toBe(200);
    expect(page.body).toContain(`Tell me what ${CONVERSATION}`);
    expect((await ask(withToken(url, 'trace.jsonl', token))).body).toContain(`Tell me what ${CONVERSATION}`);

    release();
    const done = await run.closed;
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toBe(`Answer: ${CONVERSATION}\n`);
    // The run's store and logs: the token was for this process alone.
    expect(everything(cwd)).toContain(CONVERSATION);
    expect(everything(cwd)).not.toContain(token);
  });
});
