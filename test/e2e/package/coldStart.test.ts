import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Issue 40.1, load what is used: `import('exarch')` loads no provider SDK, no store, no OTel, no
 * MCP, no workspace tool and no zod, until a host uses them. Judged by what a child process loads
 * (module hooks that name every module resolved, and the CommonJS cache), never by a clock.
 * bench/cold-start.mjs times the same imports.
 */

const dist = (path: string): string => fileURLToPath(new URL(`../../../dist/src/${path}`, import.meta.url));
const register = fileURLToPath(new URL('../../fixtures/loadedModules/register.mjs', import.meta.url));

/**
 * Modules loaded by `import('exarch')` with nothing else, dependencies included: 91 when this was
 * written (exarch's own, xstate's two, ulid); 451 before issue 40, the Anthropic SDK being most of
 * them. Raise it only for a module the main entry cannot do without.
 */
const MAIN_ENTRY_CEILING = 110;

/** Packages no host pays for until it uses them (a provider, a store, OTel, MCP, the workspace tools, defineTool's schemas). */
const LAZY_PACKAGES = ['@anthropic-ai/sdk', 're2js', 'better-sqlite3', '@opentelemetry/', '@modelcontextprotocol/', 'pg', 'pg-boss', 'zod'];

/** Every module `program` (an ES module's text) loads, as URLs and CommonJS paths. */
function modulesLoadedBy(program: string): string[] {
  const listing = `;process.stdout.write(JSON.stringify(Object.keys((await import('node:module')).createRequire(import.meta.url).cache)));`;
  const child = spawnSync(process.execPath, ['--import', register, '--input-type=module', '-e', program + listing], { encoding: 'utf8', timeout: 60_000 });
  expect(child.status, child.stderr).toBe(0);
  const resolved = child.stderr
    .split('\n')
    .filter((line) => line.startsWith('loaded '))
    .map((line) => line.slice('loaded '.length));
  const required = JSON.parse(child.stdout) as string[];
  return [...new Set([...resolved.filter((url) => !url.startsWith('node:')), ...required])];
}

/** The packages of node_modules a list of modules comes from. */
function packagesOf(modules: readonly string[]): string[] {
  const names = modules.flatMap((module) => {
    const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(decodeURIComponent(module));
    return match?.[1] === undefined ? [] : [match[1]];
  });
  return [...new Set(names)].sort();
}

function lazyOnesIn(packages: readonly string[]): string[] {
  return packages.filter((name) => LAZY_PACKAGES.some((lazy) => (lazy.endsWith('/') ? name.startsWith(lazy) : name === lazy)));
}

describe("import('exarch') loads what is used (issue 40.1)", () => {
  it('the main entry alone: none of the lazy packages, and fewer modules than the ceiling', () => {
    const modules = modulesLoadedBy(`await import(${JSON.stringify(dist('index.js'))});`);
    expect(lazyOnesIn(packagesOf(modules))).toEqual([]);
    expect(packagesOf(modules)).toEqual(['ulid', 'xstate']);
    expect(modules.length).toBeLessThanOrEqual(MAIN_ENTRY_CEILING);
  });

  it('a one-step session with the scripted provider loads none of them either', () => {
    const program = `
      const { runAgent } = await import(${JSON.stringify(dist('index.js'))});
      const { scriptedProvider } = await import(${JSON.stringify(dist('testing/index.js'))});
      const provider = scriptedProvider({ agents: { root: [{ text: 'done' }] } });
      const result = await runAgent('hello', { provider });
      if (result.text !== 'done') throw new Error('unexpected result: ' + JSON.stringify(result.text));`;
    const modules = modulesLoadedBy(program);
    expect(lazyOnesIn(packagesOf(modules))).toEqual([]);
  });

  it('the hooks see what is loaded: a tool defined with zod, the workspace tools and the SDK each show', () => {
    // The oracle of the two tests above must be able to fail: the same listing, with the packages loaded.
    const program = `
      const { defineTool, AnthropicProvider } = await import(${JSON.stringify(dist('index.js'))});
      const { workspaceTools } = await import(${JSON.stringify(dist('workspace.js'))});
      const { z } = await import('zod');
      defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), run: ({ text }) => text });
      workspaceTools({ root: '.' });
      await new AnthropicProvider({ apiKey: 'unused', baseURL: 'http://127.0.0.1:9' }).stream(
        { messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }], tools: [], signal: AbortSignal.abort() },
        { text() {}, toolUseStart() {}, toolInputDelta() {}, heartbeat() {} },
      ).catch(() => undefined);`;
    expect(lazyOnesIn(packagesOf(modulesLoadedBy(program)))).toEqual(expect.arrayContaining(['@anthropic-ai/sdk', 're2js', 'zod']));
  });
});
