/** The turn-flow viewer (`exarch view`): a self-contained HTML page for a trace. */
export { renderViewerHtml, type ViewerPageOptions } from './html.js';
export { writeViewer, type WrittenViewer } from './write.js';
export { buildViewerModel, viewerModelBuilder } from './buildModel.js';
export { ViewerModelBuilder, type ViewerAgent, type ViewerArrow, type ViewerBar, type ViewerModel, type ViewerModelBuilderOptions } from './model.js';
