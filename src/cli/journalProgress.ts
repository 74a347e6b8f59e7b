import { PROTOCOL_TOOL_NAMES } from '../tools/protocolTools.js';
import type { TraceRecord } from '../watch/trace/format.js';
import type { AgentIdentity, Message, Usage } from '../engine/types.js';
import { ZERO_USAGE } from '../engine/usage.js';
import { describeToolUse, type ProgressBoard } from './progress.js';

interface FollowedAgent {
  readonly agent: AgentIdentity;
  readonly parent: string | null;
  state: string;
  requests: number;
  usage: Usage;
  ended: boolean;
  /** Host tool calls of the last response still without a result: id → name. */
  running: Map<string, string>;
  /** Its last assistant message: where those calls' inputs are. */
  lastAssistant: Message | undefined;
  /** Sub-agents started and not yet ended. */
  liveChildren: number;
}

const FINAL_STATES: ReadonlySet<string> = new Set(['replied', 'finishedWithoutReply', 'capped', 'failed', 'cancelled']);

/**
 * The progress board fed from a run's journal rather than from its live actors: `exarch run --db`
 * follows a run the workers run by reading its journal as a trace (`JournalTraceStream`), and
 * each record updates the agent it is about as a live snapshot would, so the board shows the
 * same tree, states, requests and tokens. What a journal does not hold (streamed text as it
 * arrives) is not shown.
 */
export class JournalProgress {
  private readonly agents = new Map<string, FollowedAgent>();

  constructor(private readonly board: ProgressBoard) {}

  /** One trace record of the run, in order (pass as `JournalTraceStream`'s `emit`). */
  readonly onRecord = (record: TraceRecord): void => {
    switch (record.kind) {
      case 'agent.start': {
        const parent = record.parent === null ? undefined : this.agents.get(record.parent);
        const agent: AgentIdentity = { name: record.name, path: [...(parent?.agent.path ?? []), record.name], depth: record.depth, id: record.agent };
        if (parent) parent.liveChildren += 1;
        this.agents.set(record.agent, {
          agent,
          parent: record.parent,
          state: '',
          requests: 0,
          usage: ZERO_USAGE,
          ended: false,
          running: new Map(),
          lastAssistant: undefined,
          liveChildren: 0,
        });
        if (parent) this.show(parent);
        return;
      }
      case 'state': {
        const followed = this.agents.get(record.agent);
        if (!followed) return;
        // Each entry into `streaming`, and each new request while in it, is written as a state record.
        if (record.state === 'streaming') followed.requests += 1;
        followed.state = record.state;
        followed.usage = record.usage;
        if (FINAL_STATES.has(record.state)) followed.ended = true;
        this.show(followed);
        return;
      }
      case 'response': {
        const followed = this.agents.get(record.agent);
        if (followed)
          followed.running = new Map(
            record.toolCalls.filter((call) => call.complete && !PROTOCOL_TOOL_NAMES.has(call.name)).map((call) => [call.id, call.name]),
          );
        return;
      }
      case 'message': {
        const followed = this.agents.get(record.agent);
        if (followed && record.message.role === 'assistant') followed.lastAssistant = record.message;
        return;
      }
      case 'tool.result': {
        const followed = this.agents.get(record.agent);
        if (!followed) return;
        followed.running.delete(record.toolUseId);
        this.show(followed);
        return;
      }
      case 'agent.end': {
        const followed = this.agents.get(record.agent);
        if (!followed) return;
        followed.ended = true;
        followed.running.clear();
        followed.lastAssistant = undefined;
        this.show(followed);
        const parent = followed.parent === null ? undefined : this.agents.get(followed.parent);
        if (parent) {
          parent.liveChildren -= 1;
          this.show(parent);
        }
        return;
      }
      default:
        return;
    }
  };

  private show(followed: FollowedAgent): void {
    if (followed.state === '') return;
    this.board.show({
      agent: followed.agent,
      state: followed.state,
      requests: followed.requests,
      usage: followed.usage,
      ended: followed.ended,
      doing: followed.ended ? '' : this.doing(followed),
    });
  }

  /** What it is doing, in the board's words (see `activity` in progress.ts). */
  private doing(followed: FollowedAgent): string {
    if (followed.state === 'streaming') return 'waiting for the model';
    if (followed.state === 'dispatchingBatch' && followed.running.size > 0) {
      const [id, name] = [...followed.running][0] ?? ['', ''];
      const content = followed.lastAssistant?.content;
      const block = Array.isArray(content) ? content.find((b) => b.type === 'tool_use' && b.id === id) : undefined;
      const shown = `running ${describeToolUse(name, block?.type === 'tool_use' ? block.input : undefined)}`;
      return followed.running.size > 1 ? `${shown} (+${followed.running.size - 1} more)` : shown;
    }
    if (followed.state === 'dispatchingBatch') return '';
    return followed.liveChildren > 0 ? `waiting for ${followed.liveChildren} sub-agent${followed.liveChildren === 1 ? '' : 's'}` : '';
  }
}
