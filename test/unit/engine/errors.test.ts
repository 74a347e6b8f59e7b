import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, expectTypeOf, it, vi } from 'vitest';
import {
  assertToolPairing,
  connectMcpServers,
  ExarchError,
  FileError,
  JsonlLogSink,
  McpServerError,
  McpSpecError,
  MemoryRunStore,
  PairingError,
  parseMcpFlag,
  ProviderError,
  resumeRun,
  ROOT_AGENT,
  RunError,
  ShellSandboxError,
  StallError,
  StoreError,
  ToolErrorResult,
  WorkspaceError,
  type ModelRequest,
  type FileErrorKind,
  type ProviderErrorKind,
  type RunErrorKind,
  type StoreErrorKind,
  type WorkspaceErrorKind,
} from 'exarch';
import { openSqliteStore } from 'exarch/sqlite';
import { workspaceTools } from 'exarch/workspace';
import { RecordingError, ReplayMismatchError, replayProvider, scriptedProvider } from 'exarch/testing';
import { AgentsConfigError, readAgentsConfig } from '../../../src/cli/agentsConfig.js';
import { runCommand } from '../../../src/cli/run.js';
import { RunSetupError } from '../../../src/cli/runSession.js';
import { UsageError } from '../../../src/cli/usageError.js';
import { OtelSetupError, startOtlpExport } from '../../../src/cli/otlpExport.js';
import { checkTarget, StoreTargetError } from '../../../src/cli/storeTarget.js';
import { RECORDING_VERSION } from '../../../src/replay/format.js';
import { TraceFileError, TraceRecorder } from '../../../src/watch/trace/recorder.js';

/**
 * Every error exarch throws on purpose, as a host meets it: provoked through public API where a
 * test can, constructed where provoking needs what a test machine may not have. The names are
 * written out here, not read from the classes.
 */

const dir = mkdtempSync(join(tmpdir(), 'exarch-errors-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A plain file, so that any path below it cannot be made. */
const aFile = join(dir, 'plain.txt');
writeFileSync(aFile, 'not a directory\n');

/** What `fn` throws or rejects with; fails when it does neither. */
async function caught(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}

/** What every exarch error shows a host: its class, the base, Error, its own name and its kind. */
function expectTyped(error: unknown, type: abstract new (...args: never[]) => ExarchError<string>, name: string, kind: string): void {
  expect(error).toBeInstanceOf(type);
  expect(error).toBeInstanceOf(ExarchError);
  expect(error).toBeInstanceOf(Error);
  expect(error).toMatchObject({ name, kind });
  // What a log line or an uncaught throw prints first.
  expect(String(error)).toBe(`${name}: ${(error as Error).message}`);
}

function request(agentName: string): ModelRequest {
  return {
    agent: { ...ROOT_AGENT, id: agentName, name: agentName },
    system: '',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    tools: [],
    signal: new AbortController().signal,
  };
}

const sink = { text: () => undefined, toolUseStart: () => undefined, toolInputDelta: () => undefined, heartbeat: () => undefined };

describe('the library', () => {
  it('ProviderError: a provider that cannot answer, with the kind of fault and its status', async () => {
    const unscripted = await caught(() => scriptedProvider({ agents: {} }).stream(request('root'), sink));
    expectTyped(unscripted, ProviderError, 'ProviderError', 'fatal');
    const refused = await caught(() =>
      scriptedProvider({ agents: { root: [{ fault: { retryable: false, status: 401, message: 'invalid x-api-key' } }] } }).stream(request('root'), sink),
    );
    expectTyped(refused, ProviderError, 'ProviderError', 'http');
    expect(refused).toMatchObject({ status: 401, retryable: false, message: 'invalid x-api-key' });
    const cause = new Error('socket hang up');
    expect(new ProviderError('connection lost', { retryable: true, kind: 'stream', cause }).cause).toBe(cause);
  });

  it('RecordingError and ReplayMismatchError: a recording that is not there, a request it does not hold', async () => {
    const missing = join(dir, 'missing.jsonl');
    expectTyped(await caught(() => replayProvider(missing)), RecordingError, 'RecordingError', 'unreadable');
    const empty = join(dir, 'empty.recording.jsonl');
    writeFileSync(
      empty,
      `${JSON.stringify({ kind: 'exarch.recording', version: RECORDING_VERSION, provider: 'anthropic', model: 'm', maxTokens: 100, recordedAt: '2025-01-01T00:00:00Z' })}\n`,
    );
    const replay = replayProvider(empty);
    const differs = await caught(() => replay.stream(request('root'), sink));
    expectTyped(differs, ProviderError, 'ProviderError', 'replay');
    expectTyped((differs as Error).cause, ReplayMismatchError, 'ReplayMismatchError', 'mismatch');
    expect((differs as Error).cause).toBeInstanceOf(RecordingError);
    expect(replay.mismatch).toMatchObject({ agent: 'root', index: 0, path: undefined });
  });

  it('StallError: a ProviderError of its own name and kind', () => {
    const stall = new StallError(250);
    expectTyped(stall, StallError, 'StallError', 'stall');
    expect(stall).toBeInstanceOf(ProviderError);
    expect(stall.retryable).toBe(true);
  });

  it('StoreError: a file that is not an exarch store, named', async () => {
    const notes = join(dir, 'notes.db');
    writeFileSync(notes, 'just notes\n'.repeat(100));
    const error = await caught(() => openSqliteStore(notes));
    expectTyped(error, StoreError, 'StoreError', 'not-exarch');
    expect((error as StoreError).file).toBe(notes);
  });

  it('RunError: the doc example runs, and switches on the kind', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    await import('../../fixtures/typedErrors.js');
    const printed = log.mock.calls.map((args) => args.map(String).join(' '));
    log.mockRestore();
    expect(printed).toEqual(['no run no-such-run']);
    const doc = readFileSync(new URL('../../../src/engine/exarchError.ts', import.meta.url), 'utf8');
    const example = /```ts\n([\s\S]*?) \* ```/.exec(doc)?.[1]?.replace(/^ \* ?/gm, '');
    // Its leading comment lines go: the fixture's own, and the `// @ts-nocheck` Stryker's sandbox adds to every test file.
    const fixture = readFileSync(new URL('../../fixtures/typedErrors.ts', import.meta.url), 'utf8').replace(/^(\/\/.*\n)+/, '');
    expect(example).toBe(fixture);

    const error = await caught(() => resumeRun('gone', { provider: scriptedProvider({ agents: {} }) }, { store: new MemoryRunStore() }));
    expectTyped(error, RunError, 'RunError', 'unknown-run');
    expect((error as RunError).runId).toBe('gone');
  });

  it('TraceFileError: a trace that cannot be written, with its file and errno code', async () => {
    const file = join(aFile, 'trace.jsonl');
    const error = await caught(() => new TraceRecorder({ file }));
    expectTyped(error, TraceFileError, 'TraceFileError', 'trace-file');
    expect(error).toMatchObject({ file, message: `cannot write the trace to ${file}: a part of the path is a file` });
    expect(['ENOTDIR', 'EEXIST']).toContain((error as TraceFileError).code);
  });

  it('FileError: a session log that cannot be written, handed to onFault with its file, kind and code (never thrown)', () => {
    const faults: unknown[] = [];
    const logDir = join(aFile, 'logs');
    const log = new JsonlLogSink(logDir, { onFault: (fault) => faults.push(fault) }).open(ROOT_AGENT);
    log.append({ type: 'session', agent: ROOT_AGENT });
    log.close();
    expect(faults).toHaveLength(1);
    expectTyped(faults[0], FileError, 'FileError', 'path');
    const file = join(logDir, 'root.jsonl');
    expect(faults[0]).toMatchObject({ file, message: `cannot write the session log ${file}: a part of the path is a file` });
    expect(['ENOTDIR', 'EEXIST']).toContain((faults[0] as FileError).code);
  });

  it('WorkspaceError: a refusal and a missing file are told apart by kind', async () => {
    const root = mkdtempSync(join(dir, 'ws-'));
    const readFile = workspaceTools({ root }).find((tool) => tool.name === 'read_file');
    const read = async (path: string): Promise<unknown> => {
      const prepared = readFile?.prepare({ path });
      if (!prepared?.ok) throw new Error('read_file refused valid input');
      return prepared.value({ agent: ROOT_AGENT, toolUseId: 'toolu_1', signal: new AbortController().signal });
    };
    const outside = await caught(() => read('../x.txt'));
    expectTyped(outside, WorkspaceError, 'WorkspaceError', 'refused');
    expect((outside as Error).message).toBe("refused: '../x.txt' is outside the working directory");
    expectTyped(await caught(() => read('missing.txt')), WorkspaceError, 'WorkspaceError', 'not-found');
    expectTyped(await caught(() => read('.')), WorkspaceError, 'WorkspaceError', 'wrong-type');
  });

  it('ShellSandboxError (constructed: provoking it needs a machine without bubblewrap)', () => {
    expectTyped(new ShellSandboxError('no bubblewrap'), ShellSandboxError, 'ShellSandboxError', 'sandbox-unavailable');
  });

  it("ToolErrorResult (a host's tool throws it): its content kept as it is", () => {
    const error = new ToolErrorResult('line one\nline two');
    expectTyped(error, ToolErrorResult, 'ToolErrorResult', 'tool-error');
    expect(error.content).toBe('line one\nline two');
  });

  it('McpSpecError: an --mcp value that names no server', async () => {
    expectTyped(await caught(() => parseMcpFlag('   ')), McpSpecError, 'McpSpecError', 'mcp-spec');
  });

  it('McpServerError: a server that exits at start, named, with the cause underneath', async () => {
    const error = await caught(() => connectMcpServers([{ command: process.execPath, args: ['-e', 'process.exit(3)'], name: 'gone' }]));
    expectTyped(error, McpServerError, 'McpServerError', 'start');
    expect((error as McpServerError).server).toBe('gone');
    expect((error as Error).cause).toBeInstanceOf(Error);
  });

  it('PairingError: a history the API would refuse, every problem listed', async () => {
    const error = await caught(() => assertToolPairing([{ role: 'assistant', content: [{ type: 'text', text: 'first' }] }]));
    expectTyped(error, PairingError, 'PairingError', 'pairing');
    expect((error as PairingError).problems.length).toBeGreaterThan(0);
  });
});

describe('the command line', () => {
  const io = (cwd: string) => ({
    stdout: new PassThrough(),
    stderr: new PassThrough(),
    env: {},
    cwd,
    interrupt: new AbortController().signal,
    provider: scriptedProvider({ agents: {} }),
  });

  it('UsageError: a flag that is no number', async () => {
    expectTyped(await caught(() => runCommand('task', { maxSteps: 'many' }, io(dir))), UsageError, 'UsageError', 'usage');
  });

  it('RunSetupError: a log directory that cannot be made', async () => {
    const error = await caught(() => runCommand('task', { noStore: true, logDir: join(aFile, 'logs') }, io(dir)));
    expectTyped(error, RunSetupError, 'RunSetupError', 'run-setup');
  });

  it('AgentsConfigError: a TypeScript config, a file that is not JSON, each with its kind and file', async () => {
    const ts = await caught(() => readAgentsConfig('agents.ts', dir));
    expectTyped(ts, AgentsConfigError, 'AgentsConfigError', 'unsupported');
    expect((ts as AgentsConfigError).file).toBe('agents.ts');
    writeFileSync(join(dir, 'agents.json'), '{ agents: ');
    expectTyped(await caught(() => readAgentsConfig('agents.json', dir)), AgentsConfigError, 'AgentsConfigError', 'not-json');
    expectTyped(await caught(() => readAgentsConfig('absent.json', dir)), AgentsConfigError, 'AgentsConfigError', 'unreadable');
  });

  it('OtelSetupError: --otel without a collector to send to', async () => {
    expectTyped(await caught(() => startOtlpExport({})), OtelSetupError, 'OtelSetupError', 'otel-setup');
  });

  it('StoreTargetError: --store and --db together', async () => {
    expectTyped(await caught(() => checkTarget({ store: 'a.db', db: 'postgres://h/db' })), StoreTargetError, 'StoreTargetError', 'store-target');
  });
});

describe("a host's own errors", () => {
  it('a subclass of the base gets its own name, its kind and its cause', () => {
    class QuotaError extends ExarchError<'daily' | 'monthly'> {}
    const cause = new Error('429');
    const error = new QuotaError('daily', 'daily quota spent', { cause });
    expectTyped(error, QuotaError, 'QuotaError', 'daily');
    expect(error.cause).toBe(cause);
    expect('cause' in new QuotaError('monthly', 'no cause')).toBe(false);
  });

  it("a subclass of one of exarch's errors is still that error, under its own name", () => {
    class LockedStoreError extends StoreError {}
    const error = new LockedStoreError('conflict', '/x/runs.db', 'run 7');
    expectTyped(error, StoreError, 'LockedStoreError', 'conflict');
    expect(error).toBeInstanceOf(LockedStoreError);
    expect(error.message).toBe('the run store /x/runs.db already holds run 7');
  });

  it('each kind is a literal union a switch can exhaust (checked by tsc)', () => {
    expectTypeOf<StallError['kind']>().toEqualTypeOf<'stall'>();
    expectTypeOf<ProviderError['kind']>().toEqualTypeOf<ProviderErrorKind>();
    expectTypeOf<StoreError['kind']>().toEqualTypeOf<StoreErrorKind>();
    expectTypeOf<FileError['kind']>().toEqualTypeOf<FileErrorKind>();
    expectTypeOf<RunError['kind']>().toEqualTypeOf<RunErrorKind>();
    expectTypeOf<WorkspaceError['kind']>().toEqualTypeOf<WorkspaceErrorKind>();
    expectTypeOf<McpServerError['kind']>().toEqualTypeOf<'start' | 'exited' | 'call'>();
    expectTypeOf<UsageError['kind']>().toEqualTypeOf<'usage'>();
  });
});
