/** The turn-flow viewer: a self-contained HTML page for a trace (`exarch view`), or served live as a run goes (`--ui`, `serveViewer`). */
export { renderViewerHtml, type ViewerPageOptions } from './html.js';
export { ViewerInputError, writeViewer, type WrittenViewer } from './write.js';
export { buildViewerModel, viewerModelBuilder } from './buildModel.js';
export { ViewerModelBuilder, type ViewerAgent, type ViewerArrow, type ViewerBar, type ViewerModel, type ViewerModelBuilderOptions } from './model.js';
export { LiveViewerError, serveViewer, startLiveViewer, type LiveViewer, type LiveViewerOptions, type ServedViewer } from './liveServer.js';
export { PageScriptError } from './pageScript.js';
export { newViewerToken, ViewerTokenError } from './viewerToken.js';
