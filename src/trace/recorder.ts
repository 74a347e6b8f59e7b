import { appendFileSync, writeFileSync } from 'node:fs';
import { makeDirs } from '../fs/makeDirs.js';
import { dirname } from 'node:path';
import type { InspectionEvent } from 'xstate';
import { stringifyBounded } from '../nesting.js';
import { Redactor } from '../redact.js';
import { sessionStatechart } from '../statechart/extract.js';
import type { AgentIdentity, AgentResult, Message, ModelResponse, ToolResultBlock, Usage } from '../types.js';
import { TRACE_VERSION, type TraceRecord } from './format.js';
import { observe, type ObservedActor } from './inspection.js';

/** The parts of a session snapshot a trace reads; anything else is not a session. */
interface SessionView {
  readonly value: unknown;
  readonly status: string;
  readonly output?: AgentResult;
  readonly error?: unknown;
  readonly context: {
    readonly agent: AgentIdentity;
    readonly steps: number;
    readonly usage: Usage;
    readonly messages: readonly Message[];
    readonly pendingUser: readonly string[];
    /** The live children, by the actor ids their deliveries carry. */
    readonly children?: { byActorId(actorId: string): { readonly agent: AgentIdentity } | undefined };
  };
}

function asSession(snapshot: unknown): SessionView | undefined {
  const view = snapshot as Partial<SessionView> | undefined;
  return view?.context?.agent !== undefined && Array.isArray(view.context.messages) ? (view as SessionView) : undefined;
}

interface AgentTrack {
  readonly agent: AgentIdentity;
  state: string;
  steps: number;
  /** Messages written so far, and the last one (an append may merge into it in place). */
  messages: number;
  last: Message | undefined;
  ended: boolean;
}

type Draft = TraceRecord extends infer R ? (R extends TraceRecord ? Omit<R, 't'> : never) : never;

export interface TraceRecorderOptions {
  /** Where the JSONL trace goes (created or truncated). */
  readonly file: string;
  /** Shown by the viewer. */
  readonly title?: string;
  readonly now?: () => number;
  /** Secrets to keep out of the trace (default: those of `process.env`; see redact.ts). */
  readonly redactor?: Redactor;
}

const TASK_EXCERPT = 500;
const FLUSH_BYTES = 256 * 1024;

/** The trace file cannot be made (a part of its path is a file, no permission): one line for the user. */
export class TraceFileError extends Error {
  override readonly name = 'TraceFileError';
  constructor(
    readonly file: string,
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
  }

  static from(file: string, error: unknown): TraceFileError {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    const why =
      code === 'ENOTDIR' || code === 'EEXIST' || code === 'EISDIR'
        ? code === 'EISDIR' ? 'it is a directory' : 'a part of the path is a file'
        : code === 'EACCES' || code === 'EPERM' || code === 'EROFS'
          ? 'permission denied'
          : error instanceof Error ? error.message : String(error);
    return new TraceFileError(file, code, `cannot write the trace to ${file}: ${why}`);
  }
}

/**
 * Records a run as a JSONL trace (src/trace/format.ts) from XState's `inspect` option on the root
 * actor: `createActor(sessionMachine, { inspect: recorder.inspect })`. It keeps a few counters per
 * agent and writes each message once, so tracing stays cheap however long the run.
 */
export class TraceRecorder {
  readonly file: string;
  private readonly now: () => number;
  private readonly t0: number;
  private readonly agents = new Map<string, AgentTrack>();
  /** Session actors by system-wide id, and sub-agents by `parent agent id|actor id` (done events name the actor id). */
  private readonly bySession = new Map<string, string>();
  private buffer: string[] = [];
  private bytes = 0;
  private closed = false;
  private readonly redactor: Redactor;

  constructor(options: TraceRecorderOptions) {
    this.file = options.file;
    this.now = options.now ?? (() => performance.now());
    this.redactor = options.redactor ?? Redactor.fromEnv();
    this.t0 = this.now();
    try {
      makeDirs(dirname(options.file));
      writeFileSync(options.file, '');
    } catch (error) {
      throw TraceFileError.from(options.file, error);
    }
    this.write({
      kind: 'trace.start',
      version: TRACE_VERSION,
      startedAt: new Date().toISOString(),
      title: options.title ?? 'exarch run',
      statechart: sessionStatechart(),
    });
  }

  /** Pass as `inspect` when creating the root actor. */
  readonly inspect = (event: InspectionEvent): void => {
    if (this.closed) return;
    const observation = observe(event);
    if (!observation) return;
    // An actor's first snapshot announces it: at `actor` its snapshot cannot be read yet.
    if (observation.kind === 'event') this.onEvent(observation.actor, observation.event);
    else if (observation.kind === 'snapshot') this.onSnapshot(observation.actor, observation.snapshot);
  };

  /** Every line is JSON, however deep what a model sent (see nesting.ts). */
  private write(draft: Draft): void {
    const line = stringifyBounded({ t: Math.round((this.now() - this.t0) * 10) / 10, ...draft }) + '\n';
    this.buffer.push(line);
    this.bytes += line.length;
    if (this.bytes >= FLUSH_BYTES) this.flush();
  }

  private track(actor: ObservedActor, session: SessionView): AgentTrack {
    const id = session.context.agent.id;
    let track = this.agents.get(id);
    if (track) return track;
    const { agent } = session.context;
    track = { agent, state: '', steps: 0, messages: 0, last: undefined, ended: false };
    this.agents.set(id, track);
    this.bySession.set(actor.sessionId, id);
    const parent = agent.depth === 0 ? null : agent.id.slice(0, agent.id.lastIndexOf('/'));
    const task = session.context.pendingUser[0] ?? '';
    this.write({ kind: 'agent.start', agent: id, name: agent.name, depth: agent.depth, parent, task: task.slice(0, TASK_EXCERPT), taskChars: task.length });
    return track;
  }

  private onSnapshot(actor: ObservedActor, snapshot: unknown): void {
    const session = asSession(snapshot);
    if (!session) return;
    const track = this.track(actor, session);
    if (track.ended) return;
    const { context } = session;
    const messages = context.messages;
    // A merge replaced the last message written; then anything appended after it.
    if (track.messages > 0 && messages[track.messages - 1] !== track.last) {
      const index = track.messages - 1;
      const message = messages[index];
      if (message) this.write({ kind: 'message', agent: track.agent.id, index, message });
    }
    for (let index = track.messages; index < messages.length; index++) {
      const message = messages[index];
      if (message) this.write({ kind: 'message', agent: track.agent.id, index, message });
    }
    track.messages = messages.length;
    track.last = messages[messages.length - 1];
    const state = String(session.value);
    if (state !== track.state || (state === 'streaming' && context.steps > track.steps)) {
      track.state = state;
      this.write({ kind: 'state', agent: track.agent.id, state, steps: context.steps, usage: context.usage });
    }
    track.steps = context.steps;
    if (session.status === 'active') return;
    track.ended = true;
    if (session.status === 'done') {
      const output = session.output;
      this.write({ kind: 'agent.end', agent: track.agent.id, status: 'done', ...(output ? { outcome: output.outcome } : {}), ...(output?.reason ? { reason: output.reason } : {}) });
    } else {
      const reason = session.status === 'error' ? String(session.error instanceof Error ? session.error.message : session.error) : undefined;
      this.write({ kind: 'agent.end', agent: track.agent.id, status: session.status === 'error' ? 'error' : 'stopped', ...(reason ? { reason } : {}) });
    }
  }

  private onEvent(actor: ObservedActor, event: { readonly type: string; readonly [key: string]: unknown }): void {
    const agent = this.bySession.get(actor.sessionId);
    if (agent === undefined) return;
    const { type } = event;
    if (type === 'model.done') {
      const response = event['output'] as ModelResponse;
      const incomplete = new Set(response.incompleteToolUseIds);
      this.write({
        kind: 'response',
        agent,
        stopReason: response.stopReason,
        textChars: response.content.reduce((n, b) => n + (b.type === 'text' ? b.text.length : 0), 0),
        toolCalls: response.content.flatMap((b) => (b.type === 'tool_use' ? [{ id: b.id, name: b.name, complete: !incomplete.has(b.id) }] : [])),
        usage: response.usage,
      });
    } else if ((type === 'tool.settled' || type === 'batch.drained') && event['result'] !== undefined) {
      const result = event['result'] as ToolResultBlock;
      this.write({ kind: 'tool.result', agent, toolUseId: result.tool_use_id, isError: result.is_error === true, chars: result.content.length });
    } else if (/^xstate\.(done|error)\.actor\.\d+$/.test(type)) {
      // Still registered with the parent: the event is observed before the parent processes it.
      const registry = (actor.getSnapshot() as Partial<SessionView>).context?.children;
      const child = registry?.byActorId(String(event['actorId']))?.agent.id ?? `${agent}/?`;
      const output = event['output'] as AgentResult | undefined;
      const name = this.agents.get(child)?.agent.name ?? child.slice(child.lastIndexOf('/') + 1);
      if (output) {
        this.write({ kind: 'delivery', parent: agent, child, name, outcome: output.outcome, text: output.text, ...(output.reason ? { reason: output.reason } : {}) });
      } else {
        const error = event['error'];
        this.write({ kind: 'delivery', parent: agent, child, name, outcome: 'failed', text: '', reason: `sub-agent crashed: ${error instanceof Error ? error.message : String(error)}` });
      }
    } else if (type === 'user.message') {
      this.write({ kind: 'event', agent, type, detail: `${String(event['text'] ?? '').length} characters` });
    } else if (type === 'cancel') {
      this.write({ kind: 'event', agent, type, ...(typeof event['reason'] === 'string' ? { detail: event['reason'] } : {}) });
    } else if (type === 'model.error') {
      const error = event['error'];
      this.write({ kind: 'event', agent, type: 'model.error', detail: error instanceof Error ? error.message : String(error) });
    }
  }

  /** Writes what is buffered. */
  flush(): void {
    if (this.buffer.length === 0) return;
    appendFileSync(this.file, this.redactor.json(this.buffer.join('')));
    this.buffer = [];
    this.bytes = 0;
  }

  /** Ends the trace; later events are ignored. */
  close(): void {
    if (this.closed) return;
    this.write({ kind: 'trace.end' });
    this.closed = true;
    this.flush();
  }
}
