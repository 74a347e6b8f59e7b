import type { InspectionEvent } from 'xstate';
import { textOf, toolUses } from '../engine/history.js';
import { replyReminder } from '../engine/nudges.js';
import type { RunEvent } from '../watch/observe/events.js';
import { parentIdOf } from '../watch/observe/decoder.js';
import { RunObserver } from '../watch/observe/runObserver.js';
import { renderValue } from '../engine/render.js';
import type { SessionSnapshot } from '../run/runtime.js';
import type { AgentIdentity, AgentResult, Message, ToolUseBlock } from '../engine/types.js';
import { cut, excerpt, padVisible, type Palette } from './palette.js';

/**
 * The live log of a session tree: one line per event, as it happens —
 *
 *     +0.72s  root/explorer    calls             list_files(.), list_files(test)
 *
 * It follows every session through xstate's inspection API. Sub-agents are spawned actors of the
 * same system, so an `inspect` callback on the root sees them all; a snapshot whose context has
 * an `agent` is a session (the model request, the tool batch and the log lifetime are actors
 * too, and are skipped). A line is printed when a session's state value changes, when a step's
 * message is committed (what it said, which tools it called), and when a child's result reaches
 * its parent's inbox.
 *
 * xstate reports a macrostep's effects before the macrostep's own snapshot: a spawned child's
 * first snapshot comes before the parent snapshot that spawned it, and the parent's handling of
 * a child's `done` event before the child's final snapshot. Lines are put back in causal order:
 * a new child's lines wait for its parent's next snapshot, and a child's final state is printed
 * when its `done` event reaches the parent.
 */
export class TurnFlow {
  private readonly started = performance.now();
  private readonly agents = new Map<string, AgentView>();
  private readonly observer = new RunObserver();
  /** Lines of newly spawned children, by child id, until their parent's snapshot is printed. */
  private readonly held = new Map<string, string[]>();

  constructor(
    private readonly write: (line: string) => void,
    private readonly style: Palette,
  ) {
    this.observer.subscribe(this.onEvent);
  }

  /** Pass as the actor's `inspect` option. */
  observe(event: InspectionEvent): void {
    this.observer.inspect(event);
  }

  /** One run event, from an observer shared with other consumers (or `observe`'s own). */
  readonly onEvent = (event: RunEvent): void => {
    if (event.type === 'agent.snapshot') this.onSnapshot(event.snapshot);
    else if (event.type === 'delivery') this.onDelivery(event.agent, event.result);
  };

  /**
   * Every state each agent was seen in, in order, by agent id. Two `streaming` in a row are two
   * requests (one step ended and the next began within one macrostep).
   */
  states(): ReadonlyMap<string, readonly string[]> {
    return new Map([...this.agents].map(([id, view]) => [id, view.states]));
  }

  lastSnapshot(agentId: string): SessionSnapshot | undefined {
    return this.agents.get(agentId)?.snapshot;
  }

  resultFor(agentId: string): AgentResult | undefined {
    const snapshot = this.lastSnapshot(agentId);
    return snapshot?.status === 'done' ? snapshot.output : undefined;
  }

  /** Prints whatever is still held back (a parent whose snapshot never came). */
  flush(): void {
    for (const lines of this.held.values()) for (const line of lines) this.write(line);
    this.held.clear();
  }

  private onSnapshot(snapshot: SessionSnapshot): void {
    const { agent } = snapshot.context;
    let view = this.agents.get(agent.id);
    if (!view) {
      view = { snapshot, value: undefined, states: [], assistantSeen: 0, announced: agent.depth === 0 };
      this.agents.set(agent.id, view);
      if (agent.depth > 0) this.held.set(agent.id, []);
    }
    // A sub-agent's first snapshot can come before its task is in its history: say it started
    // once the task is there (or it is already over), so the line never reads `task: ""`.
    const task = firstUserText(snapshot.context.messages);
    if (!view.announced && (task !== '' || snapshot.status !== 'active')) {
      view.announced = true;
      this.line(agent, this.style.dim('started'), this.style.dim(`task: ${excerpt(task, 70)}`));
    }
    view.snapshot = snapshot;
    if (!view.announced) {
      // Before its task: the state is kept for `states()` but not printed ahead of `started`.
      const value = String(snapshot.value);
      if (value !== view.value) view.states.push(value);
      view.value = value;
      return;
    }
    this.reportState(agent, view, snapshot);
    this.release(agent.id);
  }

  private reportState(agent: AgentIdentity, view: AgentView, snapshot: SessionSnapshot): void {
    const value = String(snapshot.value);
    const stepEnded = view.value === 'streaming' && this.reportStep(agent, view, snapshot.context.messages);
    // A step can end and the next begin within one macrostep (a turn ends while results wait in
    // the inbox): the value stays `streaming`, but it is a new request, so it gets a line.
    if (value === view.value && !(stepEnded && value === 'streaming')) return;
    view.value = value;
    view.states.push(value);
    this.line(agent, this.style.state(value), this.detailFor(value, snapshot));
  }

  /**
   * A child's result arriving at its parent. A child that crashed has no result: its parent's
   * next state says what follows.
   */
  private onDelivery(parentId: string, result: AgentResult | undefined): void {
    const parent = this.agents.get(parentId)?.snapshot.context.agent;
    if (!parent || !result) return;
    const size = result.text.length > 0 ? ` (${result.text.length} chars)` : '';
    this.line(parent, this.style.inbox('inbox ←'), this.style.inbox(`[agent '${result.name}' ${outcomeTag(result)}]${size}`));
  }

  /**
   * Prints what the step just committed said and called. The prose matters: it is where a
   * positional contract would look for the result.
   */
  private reportStep(agent: AgentIdentity, view: AgentView, messages: readonly Message[]): boolean {
    const assistants = messages.filter((m) => m.role === 'assistant');
    if (assistants.length <= view.assistantSeen) return false;
    view.assistantSeen = assistants.length;
    const content = assistants[assistants.length - 1]?.content ?? [];
    const said = textOf(content);
    if (said.length > 0) this.line(agent, this.style.dim('says'), `${excerpt(said, 60)} ${this.style.dim(`(${said.length} chars)`)}`);
    // Reported with the message rather than on `dispatchingBatch`: a batch that needs no tool to
    // run (only `reply`, say) may drain within the step that opened it, unseen by snapshots.
    const calls = toolUses(content);
    if (calls.length > 0) this.line(agent, this.style.dim('calls'), calls.map((call) => this.style.tool(describeCall(call))).join(this.style.dim(', ')));
    return true;
  }

  private detailFor(value: string, snapshot: SessionSnapshot): string {
    const { context } = snapshot;
    if (snapshot.status === 'done') return this.style.dim(`→ ${parentOf(context.agent) ?? 'parent'}: ${snapshot.output.text.length} chars`);
    if (value === 'nudged') {
      return this.style.dim(lastUserText(context.messages) === replyReminder.message ? 'reminder: call `reply`' : 'reminder');
    }
    if (value === 'readyForUser' || value === 'waitingForAgents') {
      const running = this.runningChildrenOf(context.agent.id);
      return running.length > 0 ? this.style.dim(`waiting for ${running.join(', ')}`) : '';
    }
    return '';
  }

  private line(agent: AgentIdentity, what: string, detail: string): void {
    const seconds = `+${((performance.now() - this.started) / 1000).toFixed(2)}s`;
    const line = `${this.style.dim(seconds.padStart(7))}  ${this.style.agent(agent.id.padEnd(16))} ${padVisible(what, 18)}${detail}`;
    const held = this.held.get(agent.id);
    if (held) held.push(line.trimEnd());
    else this.write(line.trimEnd());
  }

  /** Children of `parentId` seen running: from the flow itself, not from the parent's internals. */
  private runningChildrenOf(parentId: string): string[] {
    const running: string[] = [];
    for (const view of this.agents.values()) {
      const { agent } = view.snapshot.context;
      if (parentOf(agent) === parentId && view.snapshot.status === 'active') running.push(agent.name);
    }
    return running;
  }

  /** The parent's snapshot is printed: the children it spawned may speak. */
  private release(parentId: string): void {
    for (const [childId, lines] of this.held) {
      if (parentOf(this.agents.get(childId)?.snapshot.context.agent) !== parentId) continue;
      this.held.delete(childId);
      for (const line of lines) this.write(line);
    }
  }
}

interface AgentView {
  snapshot: SessionSnapshot;
  value: string | undefined;
  states: string[];
  /** Assistant messages already reported, so each step is printed once. */
  assistantSeen: number;
  /** Its `started` line is printed (a root has none). */
  announced: boolean;
}

function parentOf(agent: AgentIdentity | undefined): string | undefined {
  return agent ? (parentIdOf(agent) ?? undefined) : undefined;
}

/** The words of the inbox tag (CONTRACT §4), without the reason of a failure. */
function outcomeTag(result: AgentResult): string {
  switch (result.outcome) {
    case 'replied':
      return 'replied';
    case 'empty':
      return 'finished with no output';
    case 'capped':
      return 'hit the step cap';
    case 'failed':
      return 'failed';
    case 'cancelled':
      return 'was cancelled';
  }
}

/** `reply(string, 3354 chars rendered)`, `agent(explorer)`, `read_file(vitest.config.ts)`. */
function describeCall(call: ToolUseBlock): string {
  if (call.name === 'reply') {
    const result = call.input['result'];
    const kind = Array.isArray(result) ? 'array' : result === null ? 'null' : typeof result;
    return `reply(${kind}, ${renderValue(result).length} chars rendered)`;
  }
  const argument = call.name === 'agent' ? call.input['name'] : Object.values(call.input).find((v) => typeof v === 'string');
  return typeof argument === 'string' ? `${call.name}(${cut(argument, 30)})` : call.name;
}

function firstUserText(messages: readonly Message[]): string {
  const first = messages.find((m) => m.role === 'user');
  return first?.content.map((b) => (b.type === 'text' ? b.text : '')).join('') ?? '';
}

function lastUserText(messages: readonly Message[]): string {
  const last = messages[messages.length - 1];
  if (last?.role !== 'user') return '';
  const texts = last.content.filter((b) => b.type === 'text');
  return texts[texts.length - 1]?.text ?? '';
}
