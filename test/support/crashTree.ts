import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import type { AnthropicTestServer, MessagesContentBlock, MessagesMessage, ReceivedRequest, ServerPlan } from './anthropicServer.js';
import { call, MAIN, onCleanup, stream } from './cliHarness.js';

/**
 * The three-level tree the SIGKILL crash test (test/e2e/resume/cli.crash.test.ts) runs, and the oracles it
 * checks a finished run with. Nothing here uses exarch's code: the journal is read with SQLite,
 * requests as the test server received them, effects from the file the shell commands append to.
 *
 *   root ─┬─ alpha ── gamma      alpha spawns gamma and runs a slow shell command, then rests until gamma
 *         │                      delivers; gamma runs a slow + a fast shell command, list_dir, write_file,
 *         │                      ends a step without replying (nudged once), then replies.
 *         └─ beta                beta runs a fast shell command and read_file, is nudged once, replies.
 *
 * Every agent's step is chosen by its history (`historyHandler`), and no step depends on a tool's
 * output, so a call answered "unknown" after a crash leads to the same final answer. The root
 * answers only once both children's reports are in, with the reports sorted by name and counted,
 * so the uninterrupted run's stdout is one fixed string and a lost or doubled report changes it.
 */

/** The effects file every shell command appends its own tool_use id to. */
export const EFFECTS = 'effects.log';

/** Tool-use ids are fixed by the scripts: a stream asked again after a crash names the same calls. */
export const SHELL_CALLS = {
  alpha: 'toolu_alpha_sh_slow',
  beta: 'toolu_beta_sh_fast',
  gammaSlow: 'toolu_gamma_sh_slow',
  gammaFast: 'toolu_gamma_sh_fast',
} as const;
export const IDEMPOTENT_CALLS = {
  rootList: 'toolu_root_list',
  betaRead: 'toolu_beta_read',
  gammaList: 'toolu_gamma_list',
  gammaWrite: 'toolu_gamma_write',
} as const;

/** The file beta reads: big enough that reading it takes a while, so a kill can land mid-read. */
export const BIG_FILE = 'big.txt';

const shell = (id: string, sleep?: number) =>
  ({ id, name: 'run_shell', input: { command: `echo ${id} >> ${EFFECTS}${sleep === undefined ? '' : `; sleep ${sleep}`}` } }) as const;

/** Every user-side text of a request's history (inbox turns, tasks, nudges), in order. */
function userText(request: ReceivedRequest): string {
  return request.body.messages
    .filter((m) => m.role === 'user')
    .map((m) => (typeof m.content === 'string' ? m.content : m.content.map((b) => (b.type === 'text' ? String(b['text']) : '')).join('\n')))
    .join('\n');
}

/** The reports of agent `name` in a text: each tag with the line after it (a one-line payload). */
function reportsOf(text: string, name: string): string[] {
  const out: string[] = [];
  const tag = new RegExp(`\\[agent '${name}' ([^\\]\\n]*)\\](?:\\n([^\\n]*))?`, 'g');
  for (const m of text.matchAll(tag)) out.push(`${m[1] ?? ''}: ${m[2] ?? ''}`);
  return out;
}

function summarise(name: string, reports: readonly string[]): string {
  return `${name} (${reports.length} report${reports.length === 1 ? '' : 's'}) ${reports.join(' | ')}`;
}

/** Scripts of the tree. `slow` scales the streams' pacing (ms between SSE events). */
export function treeScripts(slow = 1): Record<string, readonly (ServerPlan | ((r: ReceivedRequest) => ServerPlan))[]> {
  const pace = (ms: number) => ({ chunkDelayMs: Math.round(ms * slow) });
  const rootWait = (request: ReceivedRequest): ServerPlan => {
    const text = userText(request);
    const alpha = reportsOf(text, 'alpha');
    const beta = reportsOf(text, 'beta');
    if (alpha.length === 0 || beta.length === 0) return stream({ text: 'Still waiting for the others to report.' }, pace(80));
    return stream({ text: `Tree report\n${summarise('alpha', alpha)}\n${summarise('beta', beta)}` }, pace(10));
  };
  const alphaNext = (request: ReceivedRequest): ServerPlan => {
    const gamma = reportsOf(userText(request), 'gamma');
    if (gamma.length === 0) return stream({ text: 'Waiting for gamma.' }, pace(20));
    return stream({ toolCalls: [call('reply', { result: `alpha heard ${summarise('gamma', gamma)}` })] }, pace(10));
  };
  return {
    root: [
      stream(
        {
          toolCalls: [
            { id: 'toolu_root_spawn_alpha', ...call('agent', { name: 'alpha', task: 'Run the slow build and ask gamma.' }) },
            { id: 'toolu_root_spawn_beta', ...call('agent', { name: 'beta', task: 'Stamp and read.' }) },
            { id: IDEMPOTENT_CALLS.rootList, ...call('list_dir', { path: '.' }) },
          ],
        },
        pace(8),
      ),
      // Long enough that children finish while it streams: their results wait in the inbox.
      stream({ text: 'Waiting for alpha and beta to report back.' }, pace(130)),
      ...Array.from({ length: 8 }, () => rootWait),
    ],
    alpha: [
      stream(
        { toolCalls: [{ id: 'toolu_alpha_spawn_gamma', ...call('agent', { name: 'gamma', task: 'Stamp twice.' }) }, shell(SHELL_CALLS.alpha, 0.4)] },
        pace(8),
      ),
      stream({ text: 'Waiting for gamma.' }, pace(20)),
      ...Array.from({ length: 6 }, () => alphaNext),
    ],
    beta: [
      stream({ toolCalls: [shell(SHELL_CALLS.beta), { id: IDEMPOTENT_CALLS.betaRead, ...call('read_file', { path: BIG_FILE, limit: 3 }) }] }, pace(8)),
      // Ends a step without replying while quiet: the one reply reminder follows.
      stream({ text: 'I stamped and read.' }, pace(20)),
      stream({ toolCalls: [call('reply', { result: 'beta stamped' })] }, pace(10)),
    ],
    gamma: [
      stream({ toolCalls: [shell(SHELL_CALLS.gammaSlow, 0.5), { id: IDEMPOTENT_CALLS.gammaList, ...call('list_dir', { path: '.' }) }] }, pace(8)),
      stream(
        {
          toolCalls: [
            shell(SHELL_CALLS.gammaFast),
            { id: IDEMPOTENT_CALLS.gammaWrite, ...call('write_file', { path: 'gamma.txt', content: 'gamma was here\n' }) },
          ],
        },
        pace(8),
      ),
      stream({ text: 'Done stamping.' }, pace(20)),
      stream({ toolCalls: [call('reply', { result: 'gamma stamped twice' })] }, pace(10)),
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// Processes

let main = MAIN;

/**
 * Runs exarch from a private copy of dist/ (as test/globalSetup.ts built it) from here on: this file
 * starts a hundred-odd processes over a minute or more, and a build running meanwhile (another
 * test run, an editor) rewrites dist/ file by file, so a process could load half of each. The copy
 * is checked by loading the command's code once (`--help` alone loads almost none of it, as each
 * command's modules load when it runs). Returns a function that removes it.
 */
export function useDistSnapshot(): () => void {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const dir = mkdtempSync(join(tmpdir(), 'exarch-crash-dist-'));
    cpSync(join(root, 'dist'), join(dir, 'dist'), { recursive: true });
    copyFileSync(join(root, 'package.json'), join(dir, 'package.json'));
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const copy = join(dir, 'dist', 'src', 'cli', 'main.js');
    const commands = ['run.js', 'resume.js', 'commands.js'].map((file) => JSON.stringify(pathToFileURL(join(dir, 'dist', 'src', 'cli', file)).href));
    const loads = spawnSync(process.execPath, ['-e', `Promise.all([${commands.map((url) => `import(${url})`).join(', ')}])`], { encoding: 'utf8' });
    if (loads.status === 0 && spawnSync(process.execPath, [copy, '--help'], { encoding: 'utf8' }).status === 0) {
      main = copy;
      return () => {
        main = MAIN;
        rmSync(dir, { recursive: true, force: true });
      };
    }
    rmSync(dir, { recursive: true, force: true });
    // A build is under way: let it finish.
    spawnSync(process.execPath, ['-e', 'setTimeout(() => {}, 3000)']);
  }
  throw new Error('dist/ could not be loaded in five tries: is a build failing?');
}

export interface ExarchProcess {
  readonly child: ChildProcess;
  readonly startedAt: number;
  /** server.requests.length when it started: its requests are the ones from there on. */
  readonly firstRequest: number;
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
  output(): { stdout: string; stderr: string };
}

/** Starts `exarch ARGS` in `cwd` against `server` (killed after the test if still running). */
export function startExarch(args: readonly string[], server: AnthropicTestServer, cwd: string): ExarchProcess {
  const child = spawn(process.execPath, [main, ...args], {
    cwd,
    env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: server.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  onCleanup(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { child, startedAt: Date.now(), firstRequest: server.requests.length, closed, output: () => ({ stdout, stderr }) };
}

export function runIdIn(stderr: string): string | undefined {
  return /^exarch: run (\S+) started$/m.exec(stderr)?.[1];
}

// ---------------------------------------------------------------------------------------------
// The journal, read with SQLite

export interface Row {
  readonly seq: number;
  readonly ts: number;
  readonly session: string;
  readonly type: string;
  readonly body: Record<string, unknown>;
}

export function storeFile(cwd: string): string {
  return join(cwd, '.exarch', 'exarch.db');
}

/** Reads the journal as it grows (a read-only connection, opened once the store exists). */
export class JournalReader {
  readonly rows: Row[] = [];
  private db: Database.Database | undefined;

  constructor(private readonly file: string) {}

  /** New rows since the last call; [] while the store or its table does not exist yet. */
  poll(): Row[] {
    try {
      if (!this.db) {
        if (!existsSync(this.file)) return [];
        this.db = new Database(this.file, { readonly: true, fileMustExist: true });
      }
      const last = this.rows.at(-1)?.seq ?? 0;
      const fresh = (
        this.db.prepare('SELECT seq, ts, session, type, body FROM journal WHERE seq > ? ORDER BY seq').all(last) as {
          seq: number;
          ts: number;
          session: string;
          type: string;
          body: string;
        }[]
      ).map((r) => ({ seq: r.seq, ts: r.ts, session: r.session, type: r.type, body: JSON.parse(r.body) as Record<string, unknown> }));
      this.rows.push(...fresh);
      return fresh;
    } catch {
      this.close();
      return [];
    }
  }

  close(): void {
    this.db?.close();
    this.db = undefined;
  }
}

/** The whole journal of the (one) run in `cwd`, and its status. */
export function readStore(cwd: string): { rows: Row[]; status: string | undefined } {
  const file = storeFile(cwd);
  if (!existsSync(file)) return { rows: [], status: undefined };
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const rows = (
      db.prepare('SELECT seq, ts, session, type, body FROM journal ORDER BY run_id, seq').all() as {
        seq: number;
        ts: number;
        session: string;
        type: string;
        body: string;
      }[]
    ).map((r) => ({
      seq: r.seq,
      ts: r.ts,
      session: r.session,
      type: r.type,
      body: JSON.parse(r.body) as Record<string, unknown>,
    }));
    const status = (db.prepare('SELECT status FROM runs').get() as { status: string } | undefined)?.status;
    return { rows, status };
  } finally {
    db.close();
  }
}

/** An agent's name from its journal session id (`root/alpha/gamma` → `gamma`). */
export const nameOf = (session: string): string => session.split('/').at(-1) ?? session;

type SessionPhase = 'streaming' | 'nudged' | 'batch' | 'resting' | 'done';

export interface SessionState {
  phase: SessionPhase;
  /** Model responses committed (usage records). */
  steps: number;
  /** Tool calls of the open batch not answered yet: id → tool name. */
  pending: Map<string, string>;
  /** Results in the inbox not yet rendered into a turn. */
  inbox: number;
  /** Names of the children spawned and not yet delivered to this session. */
  live: Set<string>;
}

/** Replays the journal per session, on its records alone: where every agent stood when the process died. */
export function replayJournal(rows: readonly Row[]): Map<string, SessionState> {
  const sessions = new Map<string, SessionState>();
  const lastCalls = new Map<string, Map<string, string>>();
  for (const { session, type, body } of rows) {
    if (session === '') continue;
    const name = nameOf(session);
    let s = sessions.get(name);
    if (!s) sessions.set(name, (s = { phase: 'streaming', steps: 0, pending: new Map(), inbox: 0, live: new Set() }));
    switch (type) {
      case 'message': {
        const content = body['content'] as MessagesContentBlock[];
        if (body['role'] === 'assistant') {
          lastCalls.set(name, new Map(content.filter((b) => b.type === 'tool_use').map((b) => [String(b['id']), String(b['name'])])));
        } else {
          if (!content.some((b) => b.type === 'tool_result')) s.inbox = 0;
          s.pending = new Map();
          s.phase = 'streaming';
        }
        break;
      }
      case 'usage': {
        s.steps += 1;
        const calls = lastCalls.get(name) ?? new Map<string, string>();
        s.pending = new Map(calls);
        s.phase = calls.size > 0 ? 'batch' : 'resting';
        lastCalls.delete(name);
        break;
      }
      case 'tool':
        s.pending.delete(String((body['result'] as { tool_use_id: string }).tool_use_id));
        break;
      case 'nudge':
        s.phase = 'nudged';
        break;
      case 'spawn':
        s.live.add(String(body['name']));
        break;
      case 'inbox':
        s.inbox += 1;
        s.live.delete(String((body['result'] as { name: string }).name));
        break;
      case 'outcome':
        s.phase = 'done';
        break;
      default:
        break;
    }
  }
  return sessions;
}

/** Where a kill landed, read from the journal it left and the effects file. */
export function phasesAt(rows: readonly Row[], effects: string): string[] {
  const sessions = replayJournal(rows);
  const phases = new Set<string>();
  if (!sessions.has('root')) phases.add('before the first record');
  for (const [name, s] of sessions) {
    if (s.phase === 'streaming' || s.phase === 'nudged') phases.add('streaming');
    if (s.phase === 'nudged') phases.add('nudged');
    if (s.phase === 'batch') {
      phases.add('batch open');
      for (const [id, tool] of s.pending) {
        if (tool === 'run_shell') phases.add(effects.includes(id) ? 'shell call in flight' : 'shell call not started');
        else if (tool === 'agent' || tool === 'reply') phases.add('protocol call unanswered');
        else phases.add('idempotent call in flight');
      }
    }
    if (s.inbox > 0) phases.add('delivered, not yet seen');
    if (s.phase === 'resting' && s.live.size > 0) phases.add('resting, children running');
    for (const child of s.live) if (sessions.get(child)?.phase === 'done') phases.add('finished, not delivered');
    if (name !== 'root' && s.phase === 'done') phases.add('a child finished');
    if (name === 'root' && s.phase === 'resting' && s.live.size === 0 && s.inbox === 0) phases.add('final response committed');
  }
  return [...phases];
}

/** The text of the root's last assistant message in the journal: its final answer. */
export function rootFinalText(rows: readonly Row[]): string {
  const last = rows.filter((r) => r.session === 'root' && r.type === 'message' && r.body['role'] === 'assistant').at(-1);
  return ((last?.body['content'] ?? []) as MessagesContentBlock[])
    .filter((b) => b.type === 'text')
    .map((b) => String(b['text']))
    .join('');
}

// ---------------------------------------------------------------------------------------------
// Oracles over what the server received

/** A request's messages without `cache_control` marks (they move to the end of the history). */
export function plainMessages(messages: readonly MessagesMessage[]): unknown[] {
  const strip = (block: MessagesContentBlock): Record<string, unknown> => {
    const { cache_control: _mark, ...rest } = block;
    return rest;
  };
  return messages.map((m) => ({ role: m.role, content: typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content.map(strip) }));
}

/** The step a request asks for: how many assistant messages its history holds. */
export const stepOf = (request: ReceivedRequest): number => request.body.messages.filter((m) => m.role === 'assistant').length;

/**
 * The pairing rule, checked here on its own: every tool_use of an assistant message is answered
 * by exactly one tool_result in the very next message (a user message), and no tool_result
 * answers anything else. Returns the problems.
 */
export function pairingProblems(messages: readonly MessagesMessage[]): string[] {
  const problems: string[] = [];
  const blocks = (m: MessagesMessage | undefined): MessagesContentBlock[] => (m === undefined || typeof m.content === 'string' ? [] : [...m.content]);
  const seen = new Set<string>();
  messages.forEach((m, i) => {
    if (i > 0 && messages[i - 1]?.role === m.role) problems.push(`message ${i}: two ${m.role} messages in a row`);
    if (m.role === 'assistant') {
      const uses = blocks(m)
        .filter((b) => b.type === 'tool_use')
        .map((b) => String(b['id']));
      for (const id of uses) {
        if (seen.has(id)) problems.push(`message ${i}: tool_use id ${id} used twice`);
        seen.add(id);
      }
      if (blocks(m).some((b) => b.type === 'tool_result')) problems.push(`message ${i}: tool_result in an assistant message`);
      if (uses.length === 0) return;
      const next = messages[i + 1];
      if (next === undefined) {
        problems.push(`message ${i}: tool_use ${uses.join(', ')} is the end of the history`);
        return;
      }
      const results = blocks(next)
        .filter((b) => b.type === 'tool_result')
        .map((b) => String(b['tool_use_id']));
      for (const id of uses) {
        const n = results.filter((r) => r === id).length;
        if (n !== 1) problems.push(`message ${i + 1}: ${n} results for tool_use ${id}`);
      }
      for (const id of results) if (!uses.includes(id)) problems.push(`message ${i + 1}: tool_result for ${id}, which message ${i} did not call`);
    } else {
      if (blocks(m).some((b) => b.type === 'tool_use')) problems.push(`message ${i}: tool_use in a user message`);
      const prev = messages[i - 1];
      const prevUses = prev?.role === 'assistant' ? blocks(prev).filter((b) => b.type === 'tool_use').length : 0;
      if (prevUses === 0 && blocks(m).some((b) => b.type === 'tool_result')) problems.push(`message ${i}: tool_result with no tool_use before it`);
    }
  });
  return problems;
}

/** Every tool_result a request's history holds for `id`: its text and whether it is an error. */
export function resultsFor(requests: readonly ReceivedRequest[], id: string): { text: string; isError: boolean }[] {
  const out: { text: string; isError: boolean }[] = [];
  for (const request of requests) {
    for (const message of request.body.messages) {
      if (typeof message.content === 'string') continue;
      for (const block of message.content) {
        if (block.type !== 'tool_result' || block['tool_use_id'] !== id) continue;
        const content = block['content'];
        const text = typeof content === 'string' ? content : Array.isArray(content) ? content.map((c: { text?: string }) => c.text ?? '').join('') : '';
        out.push({ text, isError: block['is_error'] === true });
      }
    }
  }
  return out;
}

/** How often each marker occurs in the effects file of `cwd`. */
export function effectCounts(cwd: string): Map<string, number> {
  const file = join(cwd, EFFECTS);
  const counts = new Map<string, number>();
  if (!existsSync(file)) return counts;
  for (const line of readFileSync(file, 'utf8').split('\n')) if (line.trim() !== '') counts.set(line.trim(), (counts.get(line.trim()) ?? 0) + 1);
  return counts;
}

/** How often `[agent 'NAME' ` occurs in the user messages of a request's history. */
export function tagCount(request: ReceivedRequest, name: string): number {
  return userText(request).split(`[agent '${name}' `).length - 1;
}
