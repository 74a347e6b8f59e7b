import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CompiledBlocks, compileBlocks, where } from '../../support/blockProject.js';
import { codeBlocksUnder, documentsOf } from '../../support/markdownBlocks.js';
import { outputMisses, statedOutput } from '../../support/statedOutput.js';

/**
 * Every code block of the README and docs/ is what it says it is (docs/testing.md, "Code blocks in
 * the README and docs"): a complete TypeScript or JavaScript block compiles as a user's own strict
 * ES module against the built package (dist/, built by test/globalSetup.ts), and runs to exit 0
 * printing what its comments say; a JSON block parses.
 */

const root = fileURLToPath(new URL('../../..', import.meta.url));
const blocks = codeBlocksUnder(root);
const documents = new Map(documentsOf(root).map((file) => [file, readFileSync(join(root, file), 'utf8')]));
const runnable = blocks.filter((block) => block.index > 0 && block.marker === undefined);

/** A block's run: exit status, what it printed, and a fresh working directory for what it writes. */
function runBlock(output: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const cwd = mkdtempSync(join(tmpdir(), 'exarch-docblock-run-'));
  // Blocks run against the scripted provider; a key in the test's environment must not reach Claude.
  const { ANTHROPIC_API_KEY: _key, ...env } = process.env;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [output], { cwd, env, timeout: 60_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (status) => {
      rmSync(cwd, { recursive: true, force: true });
      resolve({ status, stdout, stderr });
    });
  });
}

describe('the code blocks of the README and docs/', () => {
  let compiled: CompiledBlocks;

  beforeAll(() => {
    compiled = compileBlocks(root, blocks, documents);
  }, 120_000);

  afterAll(() => {
    if (compiled) rmSync(compiled.dir, { recursive: true, force: true });
  });

  it('every complete TypeScript and JavaScript block compiles under strict, importing only what the docs tell a user to install', () => {
    expect(compiled.errors).toEqual([]);
  });

  it.each(runnable.map((block) => [where(block), block] as const))('%s runs and prints what it says', async (_where, block) => {
    const placed = compiled.placed.find((p) => p.block === block);
    expect(placed).toBeDefined();
    const errors = compiled.errors.filter((error) => error.startsWith(`${block.file}:`) && error.includes(`(block ${block.index})`));
    expect(errors, 'it does not compile: see the first test').toEqual([]);
    const run = await runBlock(placed?.output ?? '');
    expect({ status: run.status, stderr: run.stderr }, `${where(block)} failed`).toEqual({ status: 0, stderr: expect.any(String) });
    expect(outputMisses(run.stdout, statedOutput(block.code)), `${where(block)} printed:\n${run.stdout}`).toEqual([]);
  });

  it.each(blocks.filter((block) => block.lang === 'json').map((block) => [`${block.file}:${block.line}`, block] as const))('%s is JSON', (_where, block) => {
    expect(() => JSON.parse(block.code)).not.toThrow();
  });
});
