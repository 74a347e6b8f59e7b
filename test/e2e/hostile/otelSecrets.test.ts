import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, exarch, serve, stream, workdir, type CliRun } from '../../support/cliHarness.js';
import { collector } from '../../support/otlpCollector.js';
import { filesUnder } from '../../support/filesUnder.js';

/**
 * Issue 37, hole 5, OTLP: `--otel` printed its endpoint whole (`sent to http://…?token=…`), and
 * nothing said where a collector's credentials should go. They go in OTEL_EXPORTER_OTLP_HEADERS
 * (or _TRACES_HEADERS), which the exporter sends with every request; they and an endpoint's own
 * secrets are never printed or written, even when the collector echoes them back in a refusal.
 */

const BEARER = 'OtlpBearer-5678-secret';
const API_KEY = 'OtlpApiKey-9012-secret';
const ENDPOINT_TOKEN = 'EndpointTok-3456-secret';
const SECRET_BITS = ['OtlpBearer-5678', 'OtlpApiKey-9012', 'EndpointTok-3456', '5678-secret', '9012-secret', '3456-secret'];

function leaks(run: CliRun, dir: string): string[] {
  const texts = new Map([['stdout', run.stdout], ['stderr', run.stderr], ...filesUnder(dir)]);
  return [...texts].flatMap(([where, text]) => SECRET_BITS.filter((bit) => text.includes(bit)).map((bit) => `${bit} in ${where}`));
}

const otelEnv = (url: string): Record<string, string> => ({
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${url}/v1/traces?token=${ENDPOINT_TOKEN}`,
  OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${BEARER},x-api-key=${API_KEY}`,
});

describe('--otel with credentials', () => {
  it('the headers reach the collector; the endpoint is named masked; no secret is printed or written', { timeout: 60_000 }, async () => {
    const cwd = workdir();
    const server = await serve({ root: [stream({ toolCalls: [call('list_dir', { path: '.' })] }), stream({ text: 'listed' })] });
    const otlp = await collector();
    const run = await exarch(['run', '--otel', '--trace', join(cwd, 'trace.jsonl'), '--log-dir', join(cwd, 'logs'), 'List the files.'], {
      server,
      cwd,
      env: otelEnv(otlp.url),
    });
    expect(run.code, run.stderr).toBe(0);
    expect(otlp.posts.length).toBeGreaterThan(0);
    for (const post of otlp.posts) {
      expect(post.path).toBe(`/v1/traces?token=${ENDPOINT_TOKEN}`);
      expect(post.headers['authorization']).toBe(`Bearer ${BEARER}`);
      expect(post.headers['x-api-key']).toBe(API_KEY);
    }
    expect(run.stderr).toContain(`exarch: --otel: ${otlp.spans.length} spans sent to ${otlp.url}/v1/traces?token=***\n`);
    expect(leaks(run, cwd)).toEqual([]);
  });

  it('a collector that refuses and echoes the credentials back: the one line says so without them', { timeout: 60_000 }, async () => {
    const cwd = workdir();
    const server = await serve({ root: [stream({ text: 'done' })] });
    const otlp = await collector({
      refuse: { status: 401, body: (headers) => `who is ${String(headers['authorization'])} / ${String(headers['x-api-key'])}?` },
    });
    const run = await exarch(['run', '--otel', 'Say done.'], { server, cwd, env: otelEnv(otlp.url) });
    expect(run.code, run.stderr).toBe(0);
    expect(otlp.posts.length).toBeGreaterThan(0);
    expect(run.stderr).toMatch(new RegExp(`^exarch: --otel: \\d+ of \\d+ spans could not be sent to ${otlp.url}/v1/traces\\?token=\\*\\*\\*: .+$`, 'm'));
    expect(leaks(run, cwd)).toEqual([]);
  });

  it('an endpoint with a user part: masked in every line, at setup as at the end', { timeout: 60_000 }, async () => {
    const cwd = workdir();
    const server = await serve({ root: [stream({ text: 'done' })] });
    const wrong = await exarch(['run', '--otel', 'Say done.'], {
      server,
      cwd,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: `ftp://user:${ENDPOINT_TOKEN}@127.0.0.1/?token=${ENDPOINT_TOKEN}` },
    });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe("exarch: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, got 'ftp://***@127.0.0.1/?token=***'\n");
    const otlp = await collector();
    const run = await exarch(['run', '--otel', 'Say done.'], {
      server,
      cwd,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url.replace('http://', `http://user:${ENDPOINT_TOKEN}@`) },
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain(` sent to ${otlp.url.replace('http://', 'http://***@')}/v1/traces\n`);
    expect(leaks(run, cwd)).toEqual([]);
    expect(leaks(wrong, cwd)).toEqual([]);
  });
});
