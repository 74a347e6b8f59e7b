import type { TraceStatechart } from '../trace/format.js';
import { sessionStatechart } from './extract.js';
import { toMermaid } from './mermaid.js';
import { toSvg } from './svg.js';

/** The files `npm run visualize` writes into `visualizations/`, by name, with their exact contents. */
export function visualizationFiles(chart: TraceStatechart = sessionStatechart()): Record<string, string> {
  return {
    'session-machine.mmd': toMermaid(chart),
    'session-machine.svg': toSvg(chart),
    'session-machine.json': `${JSON.stringify(chart, null, 2)}\n`,
  };
}
