/** A tool call as the page shows it: what was asked, by whom, and what came back. */
interface ToolCallInfo {
  readonly id: string;
  readonly name: string;
  input: unknown;
  result: { readonly content: string; readonly isError: boolean } | undefined;
}

/**
 * The run the page shows: its records (all of a finished trace, or those of a live run so far),
 * the model built from them with the same code as in Node (src/watch/viewer/model.ts), and an index of
 * tool calls by id, so a call's input and its result are shown together.
 */
class RunData {
  readonly records: TraceRecord[] = [];
  private readonly builder: ViewerModelBuilderType;
  private current: ViewerModel;
  private stale = false;
  /** On a live page, when its trace started (ms since the epoch); null once the run has ended. */
  private liveSince: number | null = null;
  private readonly calls = new Map<string, ToolCallInfo>();
  /** Each record's searchable text, lower-cased, made the first time a search needs it. */
  private readonly texts: (string | undefined)[] = [];

  constructor(title: string | undefined) {
    this.builder = new ViewerModelBuilder({ renderResult: renderAgentResult, price: estimateCost, ...(title === undefined ? {} : { title }) });
    this.current = this.builder.model();
  }

  add(record: TraceRecord): void {
    this.records.push(record);
    this.builder.add(record);
    this.stale = true;
    if (record.kind === 'message') this.indexCalls(record.message);
    else if (record.kind === 'response') {
      for (const call of record.toolCalls)
        if (!this.calls.has(call.id)) this.calls.set(call.id, { id: call.id, name: call.name, input: undefined, result: undefined });
    }
  }

  /** The model of every record so far (as of the last `refresh` on a live page). */
  get model(): ViewerModel {
    if (this.stale && this.liveSince === null) this.refresh();
    return this.current;
  }

  /**
   * A live page's run goes on between records: its open intervals last until now. `since` is
   * when the trace started (its `startedAt`, on this machine's clock, which is the server's).
   */
  following(since: number | null): void {
    this.liveSince = since;
    this.refresh();
  }

  /** Builds the model again: with what was added since, and on a live page up to now. */
  refresh(): void {
    this.current = this.liveSince === null ? this.builder.model() : this.builder.model(Math.max(0, Date.now() - this.liveSince));
    this.stale = false;
  }

  call(id: string): ToolCallInfo | undefined {
    return this.calls.get(id);
  }

  /** The record's text a search looks in: what it says, the tools it calls, their inputs and results, a task, a reply. */
  searchText(index: number): string {
    if (index < 0 || index >= this.records.length) return '';
    let text = this.texts[index];
    if (text === undefined) {
      text = recordText(this.records[index]).toLowerCase();
      this.texts[index] = text;
    }
    return text;
  }

  private indexCalls(message: Message): void {
    for (const block of message.content) {
      if (block.type === 'tool_use') {
        const known = this.calls.get(block.id);
        if (known) known.input = block.input;
        else this.calls.set(block.id, { id: block.id, name: block.name, input: block.input, result: undefined });
      } else if (block.type === 'tool_result') {
        const known = this.calls.get(block.tool_use_id);
        const result = { content: String(block.content), isError: block.is_error === true };
        if (known) known.result = result;
        else this.calls.set(block.tool_use_id, { id: block.tool_use_id, name: 'tool', input: undefined, result });
      }
    }
  }
}

function recordText(record: TraceRecord | undefined): string {
  if (!record) return '';
  switch (record.kind) {
    case 'message':
      return record.message.content
        .map((block) =>
          block.type === 'text' ? block.text : block.type === 'tool_use' ? `${block.name} ${JSON.stringify(block.input)}` : String(block.content),
        )
        .join('\n');
    case 'response':
      return record.toolCalls.map((call) => call.name).join(' ');
    case 'agent.start':
      return `${record.name}\n${record.task}`;
    case 'delivery':
      return `${record.name}\n${record.text}\n${record.reason ?? ''}`;
    case 'event':
      return `${record.type} ${record.detail ?? ''}`;
    default:
      return '';
  }
}
