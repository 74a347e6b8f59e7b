// The live viewer with clients that never read (issue 37): a trace of R records of S bytes, then
// N connections (round robin over /events, / and /trace.jsonl) that send their GET and read
// nothing. Prints the server process's resident memory growth and how long a reading client,
// connecting with them, waits for a record pushed at that moment, then once they are all
// connected; and how long a page load takes. The server runs in a child process of its own.
//
//   npm run build && node bench/viewer-stalls.mjs [--stalled 60] [--records 3000] [--bytes 4000]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    serve: { type: 'boolean', default: false },
    stalled: { type: 'string', default: '60' },
    records: { type: 'string', default: '3000' },
    bytes: { type: 'string', default: '4000' },
  },
});

if (args.serve) await serve();
else await measure();

/** The child: the server fed the trace; `push` on stdin adds one small record (`marker-N`). */
async function serve() {
  const { startTraceServer } = await import('../dist/src/watch/viewer/liveServer.js');
  const { Redactor } = await import('../dist/src/engine/redact.js');
  const server = await startTraceServer({ redactor: new Redactor([]) });
  const statechart = { initial: 'idle', states: [{ id: 'idle', final: false }], transitions: [] };
  server.push({ t: 0, kind: 'trace.start', version: 1, startedAt: new Date().toISOString(), title: 'stalls', statechart });
  const text = (index, body) => ({ t: index, kind: 'message', agent: 'root', index, message: { role: 'user', content: [{ type: 'text', text: body }] } });
  for (let i = 0; i < Number(args.records); i++) server.push(text(i, `m${i} ${'x'.repeat(Number(args.bytes))}`));
  process.stdout.write(`${server.url}\n`);
  createInterface({ input: process.stdin }).on('line', (line) => {
    if (line === 'push') server.push(text(server.records, `marker-${server.records}`));
    if (line === 'quit') server.close().then(() => process.exit(0));
  });
}

async function measure() {
  const stalled = Number(args.stalled);
  const child = spawn(process.execPath, [new URL(import.meta.url).pathname, '--serve', '--records', args.records, '--bytes', args.bytes], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const url = new URL(await new Promise((resolve) => child.stdout.once('data', (d) => resolve(String(d).trim()))));
  const token = url.searchParams.get('token');
  const at = (path) => (token ? `${path}${path.includes('?') ? '&' : '?'}token=${token}` : path);
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1]) / 1024;
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  let records = Number(args.records) + 1;
  /** A reading client from the current end of the trace: ms until the record pushed as it connects arrives. */
  const nextRecord = () =>
    new Promise((resolve) => {
      const started = performance.now();
      const from = records++;
      const req = request(`${url.origin}${at(`/events?from=${from}`)}`, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
          if (body.includes(`marker-${from}`)) {
            req.destroy();
            resolve(Math.round(performance.now() - started));
          }
        });
      });
      req.end();
      child.stdin.write('push\n');
    });

  const base = rss();
  const sockets = [];
  const paths = ['/events?from=0', '/', '/trace.jsonl'];
  for (let i = 0; i < stalled; i++) {
    const socket = connect(Number(url.port), '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write(`GET ${at(paths[i % paths.length])} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
    socket.pause();
    sockets.push(socket);
  }
  const duringBurst = nextRecord();
  // Until the server's memory stops moving (or 60 s).
  let peak = base;
  const started = Date.now();
  for (let last = 0, steady = 0; Date.now() - started < 60_000 && steady < 6; ) {
    await sleep(500);
    const now = rss();
    peak = Math.max(peak, now);
    steady = Math.abs(now - last) < 5 ? steady + 1 : 0;
    last = now;
  }
  const burstMs = await duringBurst;
  const afterMs = await nextRecord();
  const pageStarted = performance.now();
  const pageBytes = await new Promise((resolve) =>
    request(`${url.origin}${at('/')}`, (res) => {
      let n = 0;
      res.on('data', (chunk) => (n += chunk.length));
      res.on('end', () => resolve(n));
    }).end(),
  );
  const pageMs = Math.round(performance.now() - pageStarted);
  console.log(
    JSON.stringify({
      stalled,
      traceMB: +((Number(args.records) * Number(args.bytes)) / 1e6).toFixed(1),
      rssGrowthMB: Math.round(peak - base),
      nextRecordDuringBurstMs: burstMs,
      nextRecordAfterMs: afterMs,
      pageMs,
      pageMB: +(pageBytes / 1e6).toFixed(1),
    }),
  );
  for (const socket of sockets) socket.destroy();
  child.stdin.write('quit\n');
}
