export { connectMcpServers, type McpConnectOptions, type McpServerInfo, type McpToolset } from './toolset.js';
export { McpServerError } from './mcpError.js';
export { McpSpecError, parseMcpFlag, type McpHttpServer, type McpServerSpec, type McpStdioServer } from './serverSpec.js';
