import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cappedFetch } from '../../../../src/tools/mcp/cappedFetch.js';

/**
 * The cap on what one HTTP response of an MCP server may make exarch buffer, against a real server
 * on 127.0.0.1 that answers `/bytes/<n>` with n bytes, sent in chunks of 7.
 */

let server: Server;
let base = '';

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/empty') {
      res.writeHead(204).end();
      return;
    }
    const n = Number(/^\/bytes\/(\d+)$/.exec(req.url ?? '')?.[1] ?? 0);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-sent': String(n) });
    const body = Buffer.alloc(n, 'x');
    // Several chunks, so that the count adds up across them rather than per chunk.
    for (let at = 0; at < n; at += 7) res.write(body.subarray(at, at + 7));
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** A capped fetch that records each oversize report. */
function capped(maxBytes: number): { fetch: ReturnType<typeof cappedFetch>; reports: Error[] } {
  const reports: Error[] = [];
  return { fetch: cappedFetch(maxBytes, (error) => reports.push(error)), reports };
}

describe('a response to a message (POST)', () => {
  it('of exactly the cap is read whole, with its status and headers', async () => {
    const { fetch, reports } = capped(30);
    const response = await fetch(`${base}/bytes/30`, { method: 'POST' });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-sent')).toBe('30');
    expect(Buffer.from(await response.arrayBuffer()).length).toBe(30);
    expect(reports).toEqual([]);
  });

  it('one byte past the cap fails its body with a line giving the cap, and reports it once', async () => {
    const { fetch, reports } = capped(30);
    const response = await fetch(`${base}/bytes/31`, { method: 'POST' });
    await expect(response.arrayBuffer()).rejects.toThrow('a response exceeded 30 bytes');
    expect(reports.map((e) => e.message)).toEqual(['a response exceeded 30 bytes']);
  });

  it('far past the cap is reported once, not per chunk', async () => {
    const { fetch, reports } = capped(10);
    const response = await fetch(`${base}/bytes/700`, { method: 'POST' });
    await expect(response.text()).rejects.toThrow('a response exceeded 10 bytes');
    expect(reports).toHaveLength(1);
  });

  it('without a body is handed back as it came', async () => {
    const { fetch, reports } = capped(10);
    const response = await fetch(`${base}/empty`, { method: 'POST' });
    expect(response.status).toBe(204);
    expect(response.body).toBeNull();
    expect(reports).toEqual([]);
  });
});

describe('the event stream (GET) and other methods', () => {
  it('are not capped: the long-lived stream may carry any number of messages', async () => {
    const { fetch, reports } = capped(10);
    for (const init of [undefined, { method: 'GET' }, { method: 'DELETE' }]) {
      const response = await fetch(`${base}/bytes/100`, init);
      expect(Buffer.from(await response.arrayBuffer()).length).toBe(100);
    }
    expect(reports).toEqual([]);
  });
});
