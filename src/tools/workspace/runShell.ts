import { spawn } from 'node:child_process';
import { realpath } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { z } from 'zod';
import { defineTool, type Tool } from '../defineTool.js';
import { WorkspaceError } from './paths.js';
import { sandboxEnvironment, shellEnvironment } from './shellEnvironment.js';
import { describeLimits, limitNotes, signalOfExitCode, type ShellExit } from './shellLimits.js';
import { removeAppeared } from './removeAppeared.js';
import { sandboxArgs, type ShellSandbox } from './shellSandbox.js';
import { userLabel } from './shellUser.js';
import { unixSocketFilter } from './seccompFilter.js';

/** Default time a command may run before its process group is killed. */
export const SHELL_DEFAULT_TIMEOUT_MS = 120_000;
/** The last characters of stdout / stderr returned. */
const SHELL_STDOUT_CHARS = 20_000;
const SHELL_STDERR_CHARS = 10_000;
/** Between SIGTERM and SIGKILL. */
const KILL_GRACE_MS = 2_000;
/** After the shell exits, how long to wait for background processes to let go of its output. */
const DRAIN_MS = 1_000;
/** Over the command's own timeout, so the command's timeout (with its partial output) wins over the session's. */
const TOOL_TIMEOUT_MARGIN_MS = 10_000;

const input = z.object({
  command: z.string().min(1).describe('A shell command line, run by /bin/sh -c in the working directory.'),
});

/**
 * `run_shell` in `root`. `readOnly`: the sandbox's user may not write in the working directory,
 * which a result refused permission then says. (The description depends on the options alone,
 * never on this machine's users, so a recorded run replays elsewhere.)
 */
export function runShellTool(root: string, timeoutMs: number = SHELL_DEFAULT_TIMEOUT_MS, sandbox: ShellSandbox = { kind: 'none' }, readOnly = false): Tool {
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
    throw new RangeError(`exarch: shellTimeoutMs must be a positive integer, got ${String(timeoutMs)}`);
  }
  return defineTool({
    name: 'run_shell',
    // A command can do anything (append, send, delete): never run again after a crash; the model is told its effect is unknown.
    idempotent: false,
    description:
      'Run a shell command (/bin/sh -c) in the working directory, without a terminal or stdin. Returns the exit code, ' +
      `then the last ${SHELL_STDOUT_CHARS / 1000}k characters of stdout and ${SHELL_STDERR_CHARS / 1000}k of stderr. ` +
      `Killed (with everything it started) after ${formatMs(timeoutMs)}; processes it leaves in the background end with it. ` +
      (sandbox.kind === 'bubblewrap'
        ? `It runs in a sandbox: only the working directory and /tmp are writable, ${sandbox.network ? 'the network is reachable' : 'there is no network'}. ` +
          (sandbox.limits === undefined ? '' : `Limits: ${describeLimits(sandbox.limits.asked)}. `)
        : '') +
      'Not interactive: pass flags like --yes, avoid pagers and watchers.',
    input,
    timeoutMs: timeoutMs + TOOL_TIMEOUT_MARGIN_MS,
    run: ({ command }, { signal }) => runShell(root, command, timeoutMs, sandbox, readOnly, signal),
  });
}

async function runShell(root: string, command: string, timeoutMs: number, sandbox: ShellSandbox, readOnly: boolean, signal: AbortSignal): Promise<string> {
  signal.throwIfAborted();
  const cwd = await realpath(root).catch(() => {
    throw new WorkspaceError('io', `the working directory ${root} is not accessible`);
  });
  return new Promise<string>((resolve, reject) => {
    // detached: the shell (or bubblewrap) leads a new process group, so a kill reaches everything it started.
    const filter = sandbox.kind === 'bubblewrap' ? unixSocketFilter() : undefined;
    const shield = sandbox.kind === 'bubblewrap' ? sandbox.shield?.(cwd) : undefined;
    // Under bubblewrap, prlimit sets the limits just before the shell: bubblewrap's own processes are not limited.
    const [file, args, env] =
      sandbox.kind === 'bubblewrap'
        ? [
            sandbox.bwrap,
            [...sandboxArgs(cwd, sandbox.network, filter !== undefined, shield, true), ...(sandbox.limits?.command ?? []), '/bin/sh', '-c', command],
            sandboxEnvironment(process.env, sandbox.user),
          ]
        : ['/bin/sh', ['-c', command], shellEnvironment(process.env)];
    const user = sandbox.kind === 'bubblewrap' ? sandbox.user : undefined;
    // The seccomp program goes to bubblewrap on its own pipe (fd SECCOMP_FD = 3), which it reads to EOF and closes.
    const child = spawn(file, args, {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', filter === undefined ? 'ignore' : 'pipe', sandbox.kind === 'bubblewrap' ? 'pipe' : 'ignore'],
      // Started as the user (libuv drops root's supplementary groups too), bubblewrap makes a user namespace of its own.
      ...(user === undefined ? {} : { uid: user.uid, gid: user.gid }),
    });
    const [, out, err, seccompPipe, infoPipe] = child.stdio;
    if (out === null || err === null) throw new WorkspaceError('io', "run_shell could not open the command's output pipes");
    if (filter !== undefined && seccompPipe !== null && seccompPipe !== undefined && 'end' in seccompPipe) {
      // bubblewrap exits (and the 'exit' handler reports it) if it cannot read the program.
      seccompPipe.on('error', () => undefined).end(filter);
    }
    // The sandbox's init (its host pid, as bubblewrap says it on INFO_FD): killed itself, it takes
    // every process of its PID namespace with it before bubblewrap exits. bubblewrap killed first
    // exits at once, its init killed only after it (--die-with-parent), and the command's
    // processes ran on for a moment after exarch had seen the command end.
    let init: number | undefined;
    if (infoPipe instanceof Readable) {
      let info = '';
      infoPipe.on('error', () => undefined);
      infoPipe.on('data', (chunk: Buffer) => {
        if (info.length > 4096) return;
        info += chunk.toString('utf8');
        const pid = /"child-pid":\s*(\d+)/.exec(info)?.[1];
        if (pid !== undefined) init = Number(pid);
      });
    }
    const stdout = new Tail(SHELL_STDOUT_CHARS);
    const stderr = new Tail(SHELL_STDERR_CHARS);
    out.on('data', (chunk: Buffer) => stdout.push(chunk));
    err.on('data', (chunk: Buffer) => stderr.push(chunk));

    let settled = false;
    let timedOut = false;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    let drainTimer: NodeJS.Timeout | undefined;
    /** What exarch removed after the command, that it had left where git reads config and hooks from. */
    let removed: string[] = [];

    const killGroup = (): void => {
      const pid = child.pid;
      if (pid === undefined) return;
      const send = (sig: NodeJS.Signals): void => {
        try {
          process.kill(-pid, sig);
        } catch {
          // The group is gone already.
        }
      };
      if (init !== undefined && exit === undefined) {
        try {
          process.kill(init, 'SIGKILL');
        } catch {
          // Gone already: bubblewrap is about to exit.
        }
      } else send('SIGTERM');
      killTimer ??= setTimeout(() => send('SIGKILL'), KILL_GRACE_MS);
    };
    const cleanup = (): void => {
      clearTimeout(timeout);
      clearTimeout(drainTimer);
      signal.removeEventListener('abort', onAbort);
    };
    const finish = (note?: string): void => {
      if (settled) return;
      settled = true;
      cleanup();
      resolve(report(exit, timedOut ? timeoutMs : undefined, stdout, stderr, note, sandbox, readOnly, removed));
    };
    const onAbort = (): void => {
      killGroup();
      if (settled) return;
      settled = true;
      cleanup();
      reject(signal.reason instanceof Error ? signal.reason : new Error('run_shell was cancelled'));
    };

    const timeout = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, timeoutMs);
    signal.addEventListener('abort', onAbort, { once: true });

    child.on('error', (error) => {
      if (settled) return;
      settled = true;
      cleanup();
      clearTimeout(killTimer);
      // Under the sandbox the program is bubblewrap, not the shell: name the one that failed.
      reject(new WorkspaceError('io', `could not start ${file}: ${error.message}`));
    });
    child.on('exit', (code, sig) => {
      exit = { code, signal: sig };
      // The call is over: what it left running in its process group goes too. (Under bubblewrap
      // the PID namespace is gone already; unsandboxed, a process that left the group with
      // setsid escapes this, which the README says.)
      const pid = child.pid;
      if (pid !== undefined) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // Nothing was left.
        }
      }
      // Under bubblewrap the command and its namespace are gone: what it left that would change
      // where git, run outside the sandbox, reads config and hooks from goes too.
      if (shield !== undefined) removed = removeAppeared(cwd, shield.mustStayAbsent);
      // Background processes may hold the pipes open; do not wait for them forever.
      drainTimer = setTimeout(() => {
        out.destroy();
        err.destroy();
        finish('(processes it left running in the background still hold its output; their output is not shown)');
      }, DRAIN_MS);
    });
    child.on('close', () => {
      clearTimeout(killTimer);
      finish();
    });
  });
}

function report(
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined,
  timedOutAfterMs: number | undefined,
  stdout: Tail,
  stderr: Tail,
  note: string | undefined,
  sandbox: ShellSandbox,
  readOnly: boolean,
  removed: readonly string[],
): string {
  const lines: string[] = [];
  // Under bubblewrap a shell killed by a signal comes back as exit code 128 + N: name the signal.
  const signalled = sandbox.kind === 'bubblewrap' && exit?.code !== null && exit?.code !== undefined ? signalOfExitCode(exit.code) : undefined;
  if (timedOutAfterMs !== undefined) {
    lines.push(`timed out after ${formatMs(timedOutAfterMs)}: the command and everything it started were killed`);
  } else if (exit?.code !== null && exit?.code !== undefined) {
    lines.push(`exit code: ${exit.code}${signalled === undefined ? '' : ` (${signalled})`}`);
  } else {
    lines.push(`killed by ${exit?.signal ?? 'a signal'}`);
  }
  const out = stdout.text('stdout');
  const err = stderr.text('stderr');
  if (out === '' && err === '') lines.push('(no output)');
  if (out !== '') lines.push('--- stdout ---', out);
  if (err !== '') lines.push('--- stderr ---', err);
  if (note !== undefined) lines.push(note);
  if (sandbox.kind === 'bubblewrap' && sandbox.limits !== undefined) {
    const ended: ShellExit = { code: exit?.code ?? null, signal: exit?.signal ?? null, timedOut: timedOutAfterMs !== undefined };
    lines.push(...limitNotes(ended, `${out}\n${err}`, sandbox.limits.limits, runsAsRoot(sandbox)));
  }
  if (removed.length > 0) {
    lines.push(
      `note: exarch removed ${removed.join(', ')}, which the command made: it would change where git, run outside the sandbox, reads its config and hooks from`,
    );
  }
  if (sandbox.kind === 'bubblewrap' && sandbox.user !== undefined && readOnly && /Permission denied/.test(`${out}\n${err}`)) {
    lines.push(`note: the sandbox runs commands as ${userLabel(sandbox.user)}, who may not write in the working directory`);
  }
  return lines.join('\n');
}

/** The sandbox's commands run as root: exarch is root and no other user was chosen. */
function runsAsRoot(sandbox: ShellSandbox & { kind: 'bubblewrap' }): boolean {
  return sandbox.user === undefined && process.getuid?.() === 0;
}

/** Keeps the last `chars` characters of a stream (bytes bounded too), counting what it drops. */
class Tail {
  private chunks: Buffer[] = [];
  private kept = 0;
  private total = 0;
  private readonly maxBytes: number;

  constructor(private readonly chars: number) {
    // Enough bytes for `chars` characters of any UTF-8.
    this.maxBytes = chars * 4;
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    this.chunks.push(chunk);
    this.kept += chunk.length;
    while (this.chunks.length > 1 && this.kept - (this.chunks[0]?.length ?? 0) >= this.maxBytes) {
      this.kept -= this.chunks.shift()?.length ?? 0;
    }
  }

  text(label: string): string {
    const bytes = Buffer.concat(this.chunks, this.kept);
    // Whole characters from the end, up to `chars` UTF-16 units, so the cut never splits one and
    // the count of what is left out is of the command's own bytes (output that is not UTF-8
    // becomes U+FFFD, three bytes for one: counting re-encoded text lost the marker).
    let start = bytes.length;
    let units = 0;
    while (start > 0) {
      const [size, width] = lastCharacter(bytes, start);
      if (units + width > this.chars) break;
      units += width;
      start -= size;
    }
    const dropped = this.total - (bytes.length - start);
    const text = bytes.subarray(start).toString('utf8').replace(/\n$/, '');
    return dropped > 0 ? `[… first ${dropped} bytes of ${label} omitted]\n${text}` : text;
  }
}

/**
 * The bytes and UTF-16 units of the UTF-8 character that ends at `end`. A byte of no valid
 * sequence counts alone, as the one U+FFFD it decodes to at most.
 */
function lastCharacter(bytes: Buffer, end: number): [size: number, width: number] {
  let start = end - 1;
  while (start > 0 && end - start < 4 && isContinuation(bytes[start])) start -= 1;
  const size = end - start;
  if (size === 1) return [1, 1];
  const lead = bytes[start] ?? 0;
  const second = bytes[start + 1] ?? 0;
  // The lead bytes of two-, three- and four-byte sequences, and the second bytes the decoder accepts after them.
  const valid =
    size === 2
      ? lead >= 0xc2 && lead <= 0xdf
      : size === 3
        ? lead >= 0xe0 && lead <= 0xef && (lead !== 0xe0 || second >= 0xa0) && (lead !== 0xed || second <= 0x9f)
        : lead >= 0xf0 && lead <= 0xf4 && (lead !== 0xf0 || second >= 0x90) && (lead !== 0xf4 || second <= 0x8f);
  if (!valid) return [1, 1];
  return [size, size === 4 ? 2 : 1];
}

function isContinuation(byte: number | undefined): boolean {
  return byte !== undefined && byte >= 0x80 && byte <= 0xbf;
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}
