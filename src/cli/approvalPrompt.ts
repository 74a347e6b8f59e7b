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
      this.out.write(`\nexarch: ${request.agent.id} wants to run ${request.tool} (${request.callId})\n`);
      if (request.task) this.out.write(`  its task: ${clip(oneLine(request.task), 200)}\n`);
      this.out.write(`  input: ${clip(JSON.stringify(request.input), INPUT_CHARS)}\n`);
      const decision = await this.ask(`Approve? [y]es, [n]o, [a]lways for ${request.tool}: `, /^(y|yes|n|no|a|always)$/i);
      if (decision === undefined) break;
      const letter = decision.charAt(0).toLowerCase();
      if (letter === 'n') {
        const reason = (await this.ask('Reason, for the agent (optional): ', /^/)) ?? '';
        this.answer({ callId: request.callId, decision: 'deny', ...(reason.trim() ? { reason: reason.trim() } : {}) });
      } else {
        this.answer({ callId: request.callId, decision: letter === 'a' ? 'always' : 'approve' });
      }
    }
    this.asking = false;
    this.release();
  }

  /** One line matching `valid` (asked again until it does); undefined once input has ended. */
  private async ask(question: string, valid: RegExp): Promise<string | undefined> {
    for (;;) {
      const line = await this.input.ask(question);
      if (line === undefined || valid.test(line.trim())) return line?.trim();
    }
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
