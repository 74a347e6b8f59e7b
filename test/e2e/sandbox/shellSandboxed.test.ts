import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { runShellTool } from '../../../src/tools/workspace/runShell.js';
import { bubblewrapSandbox } from '../../../src/tools/workspace/shellSandbox.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';

/**
 * What a command sees of its environment and of /tmp, run in-process by run_shell, under
 * bubblewrap and without it. (test/e2e/hostile/shellSandbox.test.ts attacks the sandbox itself.)
 */

const BWRAP = requireBubblewrap('test/e2e/sandbox/shellSandboxed.test.ts');
const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;
let root: string;

beforeAll(async () => {
  // Under /tmp, which the sandbox replaces: the working directory must stay visible on top of it.
  root = await mkdtemp(path.join('/tmp', 'exarch-shell-sandboxed-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function run(command: string, tool: Tool): Promise<string> {
  const prepared = tool.prepare({ command });
  if (!prepared.ok) throw new Error(prepared.error);
  return String(await prepared.value({ agent, toolUseId: 'toolu_1', signal: new AbortController().signal }));
}

/** Sets variables in exarch's own environment for the length of `body`. */
async function withEnv<T>(vars: Record<string, string>, body: () => Promise<T>): Promise<T> {
  const before = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]));
  Object.assign(process.env, vars);
  try {
    return await body();
  } finally {
    for (const [name, value] of Object.entries(before)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

// biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansions, not a template
const probe = 'echo "token=${EXARCH_PROBE_TOKEN-unset} plain=${EXARCH_PROBE_PLAIN-unset} tmpdir=${TMPDIR-unset}"';

describe('unsandboxed', () => {
  it("a command gets exarch's environment minus its credentials, TMPDIR included", async () => {
    const out = await withEnv({ EXARCH_PROBE_TOKEN: 'tok-77', EXARCH_PROBE_PLAIN: 'visible', TMPDIR: '/var/tmp/exarch-user-tmp' }, () =>
      run(probe, runShellTool(root, 10_000)),
    );
    expect(out).toBe('exit code: 0\n--- stdout ---\ntoken=unset plain=visible tmpdir=/var/tmp/exarch-user-tmp');
  });
});

describe.skipIf(BWRAP === undefined)('in the bubblewrap sandbox', () => {
  it("a command gets exarch's environment minus its credentials, with TMPDIR=/tmp", async () => {
    const tool = runShellTool(root, 10_000, bubblewrapSandbox(false));
    const out = await withEnv({ EXARCH_PROBE_TOKEN: 'tok-77', EXARCH_PROBE_PLAIN: 'visible', TMPDIR: '/var/tmp/exarch-user-tmp' }, () => run(probe, tool));
    expect(out).toBe('exit code: 0\n--- stdout ---\ntoken=unset plain=visible tmpdir=/tmp');
  });

  it('a command inherits no descriptor beyond stdin, stdout and stderr (the seccomp pipe stays with bubblewrap)', async () => {
    const out = await run(
      'for fd in 3 4 5; do [ -e /proc/$$/fd/$fd ] && echo "fd $fd open"; done; echo checked',
      runShellTool(root, 10_000, bubblewrapSandbox(false)),
    );
    expect(out).toBe('exit code: 0\n--- stdout ---\nchecked');
  });

  it('/tmp is private and writable, and a working directory under /tmp is still there', async () => {
    const name = `exarch-private-${process.pid}`;
    const out = await run(`echo kept > /tmp/${name} && cat /tmp/${name}; pwd; ls /tmp`, runShellTool(root, 10_000, bubblewrapSandbox(false)));
    expect(out).toBe(`exit code: 0\n--- stdout ---\nkept\n${root}\n${name}\n${path.basename(root)}`);
    expect(existsSync(`/tmp/${name}`)).toBe(false);
  });

  it('sees only the loopback interface without the network, and more with it', async () => {
    const interfaces = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '";
    expect(await run(interfaces, runShellTool(root, 10_000, bubblewrapSandbox(false)))).toBe('exit code: 0\n--- stdout ---\nlo ');
    expect(await run(interfaces, runShellTool(root, 10_000, bubblewrapSandbox(true)))).toMatch(/^exit code: 0\n--- stdout ---\n(\S+ )*lo (\S+ )*$/);
    expect(await run(interfaces, runShellTool(root, 10_000, bubblewrapSandbox(true)))).not.toBe('exit code: 0\n--- stdout ---\nlo ');
  });

  it('cannot open a Unix socket (the seccomp program is loaded) but can make a socket pair', async () => {
    const script =
      "const n=require('net');const s=n.createServer();s.on('error',e=>{console.log('listen: '+e.code)});s.listen('/tmp/s.sock',()=>{console.log('listening');s.close()});" +
      "require('child_process').spawn('true',{stdio:['pipe','ignore','ignore']}).on('exit',c=>console.log('pair: '+c))";
    const out = await run(`'${process.execPath}' -e "${script}"`, runShellTool(root, 20_000, bubblewrapSandbox(false)));
    expect(out).toContain('listen: EPERM');
    expect(out).toContain('pair: 0');
  });
});
