import type { ApprovalAnswer, ApprovalRequest } from '../engine/approvals.js';
import { clip } from '../engine/render.js';
import type { TerminalInput } from './terminalInput.js';

/** Characters of a call's input shown in a question. */
const INPUT_CHARS = 400;

/** What the prompt needs of the live tree: to get out of the way while it asks. */
export interface PausableBoard {
  pause(): void;
  resume(): void;
}

/**
 * Asks a person at the terminal about each call that waits for approval, one at a time, in the
 * order they arrived: the live tree is cleared while a question is open and drawn again after.
 * `answer` is called with each reply (`respond` on the root). The lines come from the terminal's
 * one reader (shared with the steering command line), which reads stdin only once a first request
 * arrives when nothing else started it.
 */
export class ApprovalPrompt {
  private readonly queue: ApprovalRequest[] = [];
  private asking = false;
  private paused = false;
  private closed = false;

  constructor(
    private readonly input: TerminalInput,
    private readonly out: NodeJS.WritableStream,
    private readonly board: PausableBoard,
    private readonly answer: (answer: ApprovalAnswer) => void,
  ) {}

  readonly request = (request: ApprovalRequest): void => {
    if (this.closed) return;
    this.queue.push(request);
    if (!this.asking) void this.next();
  };

  /** Stops asking (the run ended); an open question is abandoned. */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.release();
  }

  /** Lets the tree draw again, if this prompt had cleared it. */
  private release(): void {
    if (!this.paused) return;
    this.paused = false;
    this.board.resume();
  }

  private async next(): Promise<void> {
    this.asking = true;
    this.paused = true;
    this.board.pause();
    while (!this.closed) {
      const request = this.queue.shift();
      if (!request) break;
      const answer = await askApproval(this.input, this.out, {
        callId: request.callId,
        tool: request.tool,
        input: request.input,
        agentId: request.agent.id,
        task: request.task,
      });
      if (answer === undefined) break;
      this.answer(answer);
    }
    this.asking = false;
    this.release();
  }
}

/** One call a question is about: a live run's request, or a stopped run's waiting call (`exarch run --db`). */
export interface ApprovalQuestion {
  readonly callId: string;
  readonly tool: string;
  readonly input: Readonly<Record<string, unknown>>;
  /** The asking agent's path in the tree (`root/lead`). */
  readonly agentId: string;
  /** The task its parent gave it, when known. */
  readonly task?: string;
}

/**
 * Asks the person at the terminal about one call: approve, deny (with an optional reason for the
 * agent) or always approve that tool. Undefined once input has ended (nothing was decided).
 */
export async function askApproval(input: TerminalInput, out: NodeJS.WritableStream, call: ApprovalQuestion): Promise<ApprovalAnswer | undefined> {
  out.write(`\nexarch: ${call.agentId} wants to run ${call.tool} (${call.callId})\n`);
  if (call.task) out.write(`  its task: ${clip(oneLine(call.task), 200)}\n`);
  out.write(`  input: ${clip(JSON.stringify(call.input), INPUT_CHARS)}\n`);
  const decision = await askLine(input, `Approve? [y]es, [n]o, [a]lways for ${call.tool}: `, /^(y|yes|n|no|a|always)$/i);
  if (decision === undefined) return undefined;
  const letter = decision.charAt(0).toLowerCase();
  if (letter !== 'n') return { callId: call.callId, decision: letter === 'a' ? 'always' : 'approve' };
  const reason = (await askLine(input, 'Reason, for the agent (optional): ', /^/)) ?? '';
  return { callId: call.callId, decision: 'deny', ...(reason.trim() ? { reason: reason.trim() } : {}) };
}

/** One line matching `valid` (asked again until it does); undefined once input has ended. */
async function askLine(input: TerminalInput, question: string, valid: RegExp): Promise<string | undefined> {
  for (;;) {
    const line = await input.ask(question);
    if (line === undefined || valid.test(line.trim())) return line?.trim();
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
