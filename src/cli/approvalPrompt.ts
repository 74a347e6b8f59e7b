import { createInterface, type Interface } from 'node:readline';
import type { ApprovalAnswer, ApprovalRequest } from '../approvals.js';
import { clip } from '../render.js';

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
 * `answer` is called with each reply (`respond` on the root). Reads stdin only once a first
 * request arrives, so a run that asks nothing never touches it.
 */
export class ApprovalPrompt {
  private readonly queue: ApprovalRequest[] = [];
  private asking = false;
  private lines: Interface | undefined;
  private closed = false;

  constructor(
    private readonly input: NodeJS.ReadableStream,
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
    this.lines?.close();
    this.board.resume();
  }

  private async next(): Promise<void> {
    this.asking = true;
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
    if (!this.closed) this.board.resume();
  }

  /** One line matching `valid` (asked again until it does); undefined once input has ended. */
  private ask(question: string, valid: RegExp): Promise<string | undefined> {
    const lines = (this.lines ??= createInterface({ input: this.input, output: this.out, terminal: false }));
    return new Promise((resolve) => {
      const onClose = (): void => resolve(undefined);
      lines.once('close', onClose);
      const prompt = (): void => {
        this.out.write(question);
        lines.once('line', (line: string) => {
          if (valid.test(line.trim())) {
            lines.off('close', onClose);
            resolve(line.trim());
          } else {
            prompt();
          }
        });
      };
      prompt();
    });
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
