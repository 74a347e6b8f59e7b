import { readFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { call, echoInbox, serve, startExarch, stream, workdir } from '../../support/cliHarness.js';
import { expectOneLine } from '../../support/oneLine.js';
import { readBoundedLines } from '../../../src/cli/boundedLines.js';

/**
 * Issue 37, "internal error text never reaches a user", the steering stdin (`exarch run --steer`
 * on a pipe): a 50 MB `/msg` line was gathered whole by readline, then given to the agent as a
 * message. Now a line past 65,536 characters is refused in one line as it streams in (before its
 * end has been sent), nothing of it is kept past the cap, and the lines after it are read as before.
 */

/** The process's peak resident memory so far, in bytes (Linux: VmHWM). */
function peakMemory(pid: number): number {
  const kb = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

describe('exarch run --steer, a line of 50 MB on stdin', () => {
  it('is refused in one line while it streams in, memory stays bounded, and the next lines still work', async () => {
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'slow', task: 'Take your time.' }), call('wait_for_agents', {})] }), echoInbox],
      // message_start, then silence until it is cancelled.
      slow: [stream({ text: 'thinking' }, { stallAfter: 1 })],
    });
    const run = startExarch(['run', '--no-store', '--steer', 'Delegate'], server, workdir());
    await run.until('the sub-agent streaming', () => server.requests.some((r) => r.agent === 'slow'));
    run.send('/help');
    await run.until('the help', () => /^exarch: running: /m.test(run.stderr()));
    const before = peakMemory(run.child.pid ?? 0);

    const megabyte = 'x'.repeat(1024 * 1024);
    const stdin = run.child.stdin;
    const write = (text: string): Promise<void> => new Promise((resolve) => (stdin.write(text) ? resolve() : stdin.once('drain', resolve)));
    await write('/msg root/slow ');
    // Decided while the line streams in: refused after two of its 50 megabytes, its end not sent yet.
    for (let i = 0; i < 2; i++) await write(megabyte);
    await run.until('the refusal, mid-line', () => /longer than 65536 characters/.test(run.stderr()));
    for (let i = 2; i < 50; i++) await write(megabyte);
    await write('\n');
    // What stdin's reads leave for the collector piles up to V8's own bound (tens of MB) whatever
    // the line's length; a line kept whole, as readline kept it, costs its length again on top.
    const grew = peakMemory(run.child.pid ?? 0) - before;

    run.send('/msg root/slow a short one');
    await run.until('the short message given', () => /^exarch: root\/slow gets the message at its next boundary$/m.test(run.stderr()));
    run.send('/cancel root/slow');
    expect(await run.exit, run.stderr()).toBe(0);
    expectOneLine(run.stderr(), /longer than 65536 characters/);
    expect(grew).toBeLessThan(100 * 1024 * 1024);
    // The long line reached no agent, and no request carried it.
    expect(JSON.stringify(server.requests.map((r) => r.body)).includes('x'.repeat(100_000))).toBe(false);
  });
});

describe('the bounded line reader of a pipe', () => {
  /** What the reader hands over for `chunks` written one after the other, with a cap of 4 bytes. */
  async function linesOf(chunks: readonly (string | Buffer)[]): Promise<string[]> {
    const input = new PassThrough();
    const seen: string[] = [];
    const ended = new Promise<void>((end) => readBoundedLines(input, 4, { line: (l) => seen.push(l), overlong: () => seen.push('<overlong>'), end }));
    for (const chunk of chunks) input.write(chunk);
    input.end();
    await ended;
    return seen;
  }

  it('splits lines across chunks and within one, strips a CR before the LF, and hands over a last line without a break', async () => {
    expect(await linesOf(['ab', 'cd\nef\r', '\ng', 'h'])).toEqual(['abcd', 'ef', 'gh']);
  });

  it('keeps a line of exactly the cap, refuses one byte more once, as it comes, and reads on after it', async () => {
    expect(await linesOf(['abcd\nabcde', 'fgh', 'ijk\nok\n'])).toEqual(['abcd', '<overlong>', 'ok']);
  });

  it('counts bytes, not characters, and never splits a character across lines', async () => {
    const e = Buffer.from('é');
    expect(await linesOf([Buffer.concat([e, e.subarray(0, 1)]), Buffer.concat([e.subarray(1), Buffer.from('\n')])])).toEqual(['éé']);
    expect(await linesOf(['ééé\n'])).toEqual(['<overlong>']);
  });
});
