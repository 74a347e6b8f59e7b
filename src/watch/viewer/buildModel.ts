import { renderAgentResult } from '../../engine/inbox.js';
import { estimateCost } from '../../engine/pricing.js';
import type { TraceRecord } from '../trace/format.js';
import { ViewerModelBuilder, type ViewerModel } from './model.js';

/** A model builder with exarch's inbox tags and list prices (the page wires the same two in). */
export function viewerModelBuilder(title?: string): ViewerModelBuilder {
  return new ViewerModelBuilder({ renderResult: renderAgentResult, price: estimateCost, ...(title === undefined ? {} : { title }) });
}

/** What the viewer draws for a whole trace (see `ViewerModelBuilder`). */
export function buildViewerModel(records: readonly TraceRecord[], title?: string): ViewerModel {
  const builder = viewerModelBuilder(title);
  for (const record of records) builder.add(record);
  return builder.model();
}
