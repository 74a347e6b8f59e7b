/** The turn-flow viewer (`exarch view`): a self-contained HTML page for a trace. */
export { renderViewerHtml } from './html.js';
export { writeViewer, type WrittenViewer } from './write.js';
export { buildViewerModel, type ViewerAgent, type ViewerArrow, type ViewerBar, type ViewerModel } from './model.js';
