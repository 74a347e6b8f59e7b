import { finalAssistantText } from '../engine/history.js';
import { renderAgentResult } from '../engine/inbox.js';
import type { InspectionEvent } from 'xstate';
import { createSessionActor, waitForSettled, type SessionSnapshot } from '../run/runtime.js';
import type { FileError } from '../engine/fs/fileError.js';
import { TraceRecorder } from '../watch/trace/recorder.js';
import { scriptedProvider } from '../testing/scriptedProvider.js';
import type { Message } from '../engine/types.js';
import { demoScripts, demoTools, EXPLORER_BRIEF, USER_TASK } from './demoScript.js';
import { excerpt, palette, type Palette } from './palette.js';
import { TurnFlow } from './turnFlow.js';
import { RunObserver } from '../watch/observe/runObserver.js';
import type { RunEventListener } from '../watch/observe/events.js';

/**
 * `exarch demo`: plays the incident of the reply-tool design record (demoScript.ts) on the real
 * session machines with the scripted provider, prints every agent's turn flow live (turnFlow.ts),
 * then sets what the parent received next to what the old positional contract would have
 * handed it.
 */

export interface DemoOptions {
  /** The narration: the turn flow and the comparison (the CLI's stderr, like `run`'s progress). */
  readonly out: NodeJS.WritableStream;
  /** Where the root's final answer goes (the CLI's stdout, like `run`'s answer); defaults to `out`. */
  readonly answer?: NodeJS.WritableStream;
  /** Where a run that did not go as scripted says so; defaults to `out`. */
  readonly err?: NodeJS.WritableStream;
  readonly color: boolean;
  /** Divides every scripted delay: 1 is watchable (a few seconds), a large value is instant. */
  readonly speed?: number;
  /** Record the run as a JSONL trace here (src/watch/trace/format.ts). */
  readonly trace?: string;
  /** Another inspection observer (the live inspector). */
  readonly inspect?: (event: InspectionEvent) => void;
  /** Another consumer of the run's events (the live viewer of `--ui`). */
  readonly onEvent?: RunEventListener;
}

export interface DemoResult {
  /** The run went as scripted: the root is back at `readyForUser` and each child replied as planned. */
  readonly ok: boolean;
  readonly problems: readonly string[];
  /** Every state each agent was seen in, in order, by agent id (`root`, `root/explorer`, …). */
  readonly states: ReadonlyMap<string, readonly string[]>;
  /** The synthetic user turns that carried the children's results to the root. */
  readonly rootInboxTurns: readonly string[];
  readonly finalAnswer: string;
  /** What reached the root from `explorer`: through `reply`, and by the old positional rule. */
  readonly delivered: { readonly exarch: string; readonly positional: string };
  /** The trace could not be written (a full disk, a file-size limit): it holds whole lines, up to where it stopped. */
  readonly traceFault?: FileError;
}

/**
 * A run that has not settled by then has hit a bug in the core: say so, rather than hang or
 * (a stuck actor may hold no timer) let the process drain and exit 0.
 */
function settleTimeoutMs(speed: number): number {
  return Math.max(5_000, 30_000 / speed);
}

export async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const speed = options.speed ?? 1;
  if (!(speed > 0) || !Number.isFinite(speed)) throw new RangeError(`demo speed must be a positive number, got ${speed}`);
  const style = palette(options.color);
  const write = (line: string): void => void options.out.write(`${line}\n`);

  // Before anything is printed: a trace path that cannot be written is the only line.
  let traceFault: FileError | undefined;
  const recorder =
    options.trace === undefined ? undefined : new TraceRecorder({ file: options.trace, title: 'exarch demo', onFault: (fault) => (traceFault ??= fault) });
  write(style.bold('exarch demo') + style.dim(' — a scripted model, offline; the session machines are the real ones'));
  write(style.dim(`user → root: ${USER_TASK}`));
  write('');

  const provider = scriptedProvider({ agents: demoScripts(speed) });
  const flow = new TurnFlow(write, style);
  // One observer decodes the run for the narration and the trace.
  const observer = new RunObserver();
  observer.subscribe(flow.onEvent);
  if (recorder) observer.subscribe(recorder.onEvent);
  if (options.onEvent) observer.subscribe(options.onEvent);
  const actor = createSessionActor(
    { provider, task: USER_TASK, tools: demoTools(Math.round(150 / speed)) },
    {
      inspect: (event) => {
        observer.inspect(event);
        options.inspect?.(event);
      },
    },
  );
  // A referenced timer, unlike AbortSignal.timeout's: it keeps the process alive to report.
  const watchdog = new AbortController();
  const limitMs = settleTimeoutMs(speed);
  const timer = setTimeout(() => watchdog.abort(new Error(`the root did not settle within ${limitMs / 1000} s`)), limitMs);
  actor.start();
  let root: SessionSnapshot;
  try {
    root = await waitForSettled(actor, watchdog.signal);
  } catch (error) {
    throw new Error(`the demo did not finish: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    clearTimeout(timer);
    actor.stop();
    flow.flush();
    recorder?.close();
  }

  const finalAnswer = finalAssistantText(root.context.messages);
  const rootInboxTurns = inboxTurns(root.context.messages);
  const delivered = {
    exarch: flow.resultFor('root/explorer')?.text ?? '',
    positional: positionalScrape(flow.lastSnapshot('root/explorer')?.context.messages ?? []),
  };
  const reviewer = flow.resultFor('root/reviewer');

  write('');
  write(style.bold("root's final answer") + (options.answer && options.answer !== options.out ? style.dim(' (on stdout)') : ''));
  if (options.answer && options.answer !== options.out)
    options.answer.write(finalAnswer.endsWith('\n') || finalAnswer === '' ? finalAnswer : `${finalAnswer}\n`);
  else write(indent(finalAnswer || style.dim('(none)')));
  write('');
  write(style.bold("What reached root from 'reviewer'") + style.dim(' — reminded once, then a JSON object, pretty-printed'));
  write(indent(reviewer ? renderAgentResult(reviewer) : style.dim('(nothing)')));
  write('');
  for (const line of comparison(delivered, style)) write(line);

  const states = flow.states();
  const problems = checkRun(root, states, delivered, rootInboxTurns, provider.pairingViolations.length);
  if (problems.length > 0) {
    (options.err ?? options.out).write(`exarch demo: the run did not go as scripted:\n${problems.map((p) => `  - ${p}\n`).join('')}`);
  }
  return { ok: problems.length === 0, problems, states, rootInboxTurns, finalAnswer, delivered, ...(traceFault ? { traceFault } : {}) };
}

/**
 * The old contract (design record, "Context"): the parent got the prose the child wrote after its
 * last tool call — the tail of its final tool-call-free step. Computed from the explorer's real
 * history, so the comparison is of this run, not of constants.
 */
function positionalScrape(messages: readonly Message[]): string {
  let tail = '';
  for (const message of messages) {
    if (message.role !== 'assistant') continue;
    for (const block of message.content) {
      if (block.type === 'tool_use') tail = '';
      else tail += block.text;
    }
  }
  return tail;
}

function comparison(delivered: DemoResult['delivered'], style: Palette): string[] {
  const row = (label: string, text: string, what: string): string[] => [
    `  ${label.padEnd(30)}${style.bold(String(text.length).padStart(5))} chars  ${what}`,
    `  ${' '.repeat(30)}${excerpt(text, 66)}`,
  ];
  return [
    style.bold("What reached root from 'explorer'"),
    ...row('old positional contract', delivered.positional, style.bad('the prose after its last tool call: the sign-off')),
    ...row('exarch, through `reply`', delivered.exarch, style.good('the `result` argument of reply: the whole brief')),
    '',
    style.dim('The explorer sent its brief through reply, made one more tool call and signed off in prose, all in one'),
    style.dim(`response. Handing up the last tool-call-free prose would have delivered the ${delivered.positional.length}-char sign-off, which`),
    style.dim(`reads like an answer but holds none of the map. With reply the ${delivered.exarch.length}-char brief is the value the child`),
    style.dim('chose to send: neither a trailing tool call nor a sign-off can displace it, and no prose is ever scraped.'),
  ];
}

/** What the demo promises; a miss is reported on stderr, and the CLI exits 1. */
function checkRun(
  root: SessionSnapshot,
  states: ReadonlyMap<string, readonly string[]>,
  delivered: DemoResult['delivered'],
  rootInboxTurns: readonly string[],
  pairingViolations: number,
): string[] {
  const problems: string[] = [];
  if (root.value !== 'readyForUser') problems.push(`root ended in '${String(root.value)}', not readyForUser`);
  if (delivered.exarch !== EXPLORER_BRIEF) problems.push("explorer's reply is not the brief");
  if (!rootInboxTurns.some((turn) => turn.includes(`[agent 'explorer' replied]\n${EXPLORER_BRIEF}`))) {
    problems.push("the brief did not reach root's inbox verbatim");
  }
  // Delegate-and-wait, then answer: two requests, as in a synchronous design (issue 15).
  const rootRequests = (states.get('root') ?? []).filter((state) => state === 'streaming').length;
  if (rootRequests !== 2) problems.push(`root made ${rootRequests} model requests, not 2`);
  if (!(states.get('root') ?? []).includes('waitingForAgents')) problems.push('root never waited in waitingForAgents');
  const reviewer = states.get('root/reviewer') ?? [];
  if (!reviewer.includes('nudged') || reviewer.at(-1) !== 'replied') problems.push(`reviewer went ${reviewer.join(' → ') || 'nowhere'}`);
  if (pairingViolations > 0) problems.push(`${pairingViolations} request(s) broke the tool_use/tool_result pairing rule`);
  return problems;
}

/** The text of every synthetic inbox turn in a history (CONTRACT §4). */
function inboxTurns(messages: readonly Message[]): string[] {
  const turns: string[] = [];
  for (const message of messages) {
    if (message.role !== 'user') continue;
    for (const block of message.content) if (block.type === 'text' && block.text.startsWith("[agent '")) turns.push(block.text);
  }
  return turns;
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => (line.length > 0 ? `  ${line}` : line))
    .join('\n');
}
