/** What a filter query keeps: the lanes to show, and the bars of each that hold a hit. */
interface SearchResult {
  readonly rows: number[];
  readonly hits: Map<number, Set<number>>;
  /** Agents that matched themselves (the others shown are their ancestors, for context). */
  readonly matched: number;
}

/**
 * The filter box: an agent matches when its id, or a record of its own (what it said, the tools it
 * called with their inputs and results, its task, a reply it received, an event), contains the
 * query, case-insensitively. Matching agents are shown with their ancestors (so the tree still
 * reads), and their bars that hold a hit are outlined.
 */
function search(run: RunData, query: string): SearchResult {
  const q = query.trim().toLowerCase();
  const { agents } = run.model;
  const hits = new Map<number, Set<number>>();
  const keep = new Set<number>();
  let matched = 0;
  agents.forEach((agent, lane) => {
    const bars = new Set<number>();
    agent.bars.forEach((bar, j) => {
      if (bar.items.some((index) => run.searchText(index).includes(q))) bars.add(j);
    });
    const start = run.searchText(agent.startRec);
    if (!agent.id.toLowerCase().includes(q) && !start.includes(q) && bars.size === 0) return;
    matched++;
    hits.set(lane, bars);
    for (let at = lane; at >= 0 && !keep.has(at); at = agents[at]?.parent ?? -1) keep.add(at);
  });
  return { rows: agents.map((_, lane) => lane).filter((lane) => keep.has(lane)), hits, matched };
}
