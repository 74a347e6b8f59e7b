/**
 * The viewer page's browser script is these files (src/watch/viewer/page/, plain scripts sharing one
 * scope) together with three exarch modules compiled as they are for Node: inbox.ts, pricing.ts
 * and viewer/model.ts. src/watch/viewer/pageScript.ts joins them, in order, into the page's one module
 * script, so the modules' exports are names in the same scope. What the page uses of them, and of
 * markdown-it (inlined as its own script, which sets `markdownit`), is declared here with its
 * real types.
 */

declare const ViewerModelBuilder: typeof import('../model.js').ViewerModelBuilder;
declare const renderAgentResult: typeof import('../../../engine/inbox.js').renderAgentResult;
declare const estimateCost: typeof import('../../../engine/pricing.js').estimateCost;
declare const markdownit: typeof import('markdown-it').default;

type TraceRecord = import('../../trace/format.js').TraceRecord;
type RecordOf<K extends TraceRecord['kind']> = Extract<TraceRecord, { kind: K }>;
type ViewerModel = import('../model.js').ViewerModel;
type ViewerAgent = import('../model.js').ViewerAgent;
type ViewerBar = import('../model.js').ViewerBar;
type ViewerArrow = import('../model.js').ViewerArrow;
type ViewerModelBuilderType = import('../model.js').ViewerModelBuilder;
type Usage = import('../../../engine/types.js').Usage;
type Message = import('../../../engine/types.js').Message;

/** What the page embeds as JSON (`#exarch-trace`), written by src/watch/viewer/html.ts. */
interface PageData {
  readonly records: readonly TraceRecord[];
  /** The page's title, when it overrides the trace's own. */
  readonly title?: string;
  readonly colors: Readonly<Record<string, string>>;
  readonly outcomeColors: Readonly<Record<string, string>>;
  readonly unknownColor: string;
  /** States drawn light, with dark text on them. */
  readonly lightStates: readonly string[];
  /** What each state means, in a few words. */
  readonly meanings: Readonly<Record<string, string>>;
  /** A live page: where the rest of the run's records stream from (server-sent events, one record each). */
  readonly live?: { readonly events: string };
}

/** What tests and benchmarks read of a page (`window.exarchViewer`). */
interface ViewerHandle {
  readonly parseMs: number;
  readonly renderMs: number;
  readonly readyAt: number;
  lastRenderMs(): number;
  readonly agents: number;
  readonly records: number;
  /** A live page: `connecting`, `open`, `ended` (the run ended and every record arrived) or `retrying`. */
  readonly live: string | null;
}

interface Window {
  exarchViewer: ViewerHandle;
}
