import { appendAssistantBlocks, appendUserBlocks } from '../../engine/history.js';
import { sessionStatechart } from '../statechart/extract.js';
import { TRACE_VERSION, type TraceRecord } from './format.js';
import type { AgentIdentity, AssistantBlock, Message, Usage, UserBlock } from '../../engine/types.js';
import { ZERO_USAGE } from '../../engine/usage.js';
import type { JournalRecord } from '../../engine/log/journalRecord.js';

type Draft = TraceRecord extends infer R ? (R extends TraceRecord ? Omit<R, 't'> : never) : never;

interface OpenBatch {
  /** Tool name by tool_use id, from the response that opened it. */
  readonly calls: ReadonlyMap<string, string>;
  readonly incomplete: ReadonlySet<string>;
  /** Calls whose result a `tool` record holds. */
  readonly noted: Set<string>;
  /** Until a record other than `spawn` / `tool`: the answers `openBatch` recorded. */
  opening: boolean;
}

export interface Track {
  agent: AgentIdentity;
  started: boolean;
  ended: boolean;
  state: string;
  /** Model requests in the current turn (each `streaming` entry), and responses committed in it. */
  steps: number;
  committed: number;
  usage: Usage;
  readonly messages: Message[];
  /** The blocks of the response being committed, and its message records not yet written. */
  response: AssistantBlock[];
  deferred: Set<number>;
  batch: OpenBatch | null;
  /** Children by the actor id their deliveries carry. */
  readonly spawns: Map<string, string>;
  /** The session's previous record. */
  prev: JournalRecord | undefined;
}

/**
 * The trace being written: its clock, and a track per session (its agent, state, history and open
 * batch) with the writes that keep the trace in step with it. `JournalConverter` says what each
 * record means.
 */
export abstract class TraceTracks {
  private started = false;
  protected readonly tracks = new Map<string, Track>();
  protected t0 = 0;
  protected t = 0;

  constructor(
    private readonly title: string,
    private readonly emit: (record: TraceRecord) => void,
  ) {}

  /** Ends the trace (started at 0 if no row came). */
  end(): void {
    this.start(0);
    this.write({ kind: 'trace.end' });
  }

  protected start(ts: number): void {
    if (this.started) return;
    this.started = true;
    this.t0 = ts;
    this.emit({ t: 0, kind: 'trace.start', version: TRACE_VERSION, startedAt: new Date(ts).toISOString(), title: this.title, statechart: sessionStatechart() });
  }

  protected write(draft: Draft): void {
    this.emit({ t: this.t, ...draft } as TraceRecord);
  }

  protected track(id: string): Track {
    let track = this.tracks.get(id);
    if (!track) {
      const name = id.slice(id.lastIndexOf('/') + 1);
      const path = id.split('/');
      track = {
        agent: { name, path, depth: path.length - 1, id },
        started: false,
        ended: false,
        state: '',
        steps: 0,
        committed: 0,
        usage: ZERO_USAGE,
        messages: [],
        response: [],
        deferred: new Set(),
        batch: null,
        spawns: new Map(),
        prev: undefined,
      };
      this.tracks.set(id, track);
    }
    return track;
  }

  /** Enters `state`; `request`: a `streaming` entry, a new model request. */
  protected enter(track: Track, state: string, request = state === 'streaming'): void {
    if (request) track.steps += 1;
    if (state === track.state && !request) return;
    track.state = state;
    this.write({ kind: 'state', agent: track.agent.id, state, steps: track.steps, usage: track.usage });
  }

  /** Appends to the history as the machine does, and writes the message it added or merged into. */
  protected append(track: Track, role: Message['role'], content: readonly (AssistantBlock | UserBlock)[], defer = false): void {
    const { messages } = track;
    const before = messages.length;
    const last = messages[before - 1];
    if (role === 'assistant') appendAssistantBlocks(messages, content as readonly AssistantBlock[]);
    else appendUserBlocks(messages, content as readonly UserBlock[]);
    if (messages.length === before && messages[before - 1] === last) return;
    const index = messages.length - 1;
    if (defer) track.deferred.add(index);
    else this.writeMessage(track, index);
  }

  protected writeMessage(track: Track, index: number): void {
    const message = track.messages[index];
    if (message) this.write({ kind: 'message', agent: track.agent.id, index, message });
  }

  protected flushDeferred(track: Track): void {
    for (const index of track.deferred) this.writeMessage(track, index);
    track.deferred.clear();
  }

  protected endAgent(track: Track, draft: Extract<Draft, { kind: 'agent.end' }>): void {
    track.ended = true;
    track.batch = null;
    this.write(draft);
  }
}
