import { describe, expect, it } from 'vitest';
import { unixSocketFilter } from '../../../../src/tools/workspace/seccompFilter.js';

/**
 * What the sandbox's seccomp program decides for a system call. The program runs here in a small
 * classic-BPF interpreter written from the kernel's definitions (the four instructions it uses), so
 * a wrong constant, jump or byte is seen as a wrong verdict; test/e2e/hostile/shellSandbox.test.ts
 * loads it into a real kernel.
 */

const AUDIT_ARCH_X86_64 = 0xc000003e;
const AUDIT_ARCH_AARCH64 = 0xc00000b7;
const AUDIT_ARCH_I386 = 0x40000003;

type Verdict = 'allow' | 'EPERM' | 'kill' | `other ${string}`;

/** Runs the program on struct seccomp_data { nr, arch, instruction_pointer, args[6] }. */
function decide(program: Buffer, call: { arch: number; nr: number; arg0?: number }): Verdict {
  const data = Buffer.alloc(64);
  data.writeUInt32LE(call.nr >>> 0, 0);
  data.writeUInt32LE(call.arch >>> 0, 4);
  data.writeUInt32LE((call.arg0 ?? 0) >>> 0, 16);
  expect(program.length % 8).toBe(0);
  let acc = 0;
  for (let pc = 0; pc < program.length / 8; ) {
    const at = pc * 8;
    const code = program.readUInt16LE(at);
    const jt = program.readUInt8(at + 2);
    const jf = program.readUInt8(at + 3);
    const k = program.readUInt32LE(at + 4);
    pc += 1;
    switch (code) {
      case 0x20: // BPF_LD | BPF_W | BPF_ABS
        acc = data.readUInt32LE(k);
        break;
      case 0x15: // BPF_JMP | BPF_JEQ | BPF_K
        pc += acc === k ? jt : jf;
        break;
      case 0x35: // BPF_JGE
        pc += acc >= k ? jt : jf;
        break;
      case 0x25: // BPF_JGT
        pc += acc > k ? jt : jf;
        break;
      case 0x06: // BPF_RET | BPF_K
        if (k === 0x7fff0000) return 'allow';
        if (k === 0x00050001) return 'EPERM';
        if (k === 0x80000000) return 'kill';
        return `other ${k.toString(16)}`;
      default:
        throw new Error(`unexpected opcode ${code.toString(16)} at ${pc - 1}`);
    }
  }
  throw new Error('the program ran off its end');
}

const AF_UNIX = 1;
const AF_INET = 2;
const AF_NETLINK = 16;

describe('the seccomp program on x86-64', () => {
  const program = unixSocketFilter('x64') as Buffer;
  const x64 = (nr: number, arg0?: number): Verdict => decide(program, { arch: AUDIT_ARCH_X86_64, nr, ...(arg0 === undefined ? {} : { arg0 }) });

  it('is thirteen instructions', () => {
    expect(program.length).toBe(13 * 8);
  });

  it('refuses socket(AF_UNIX) with EPERM and allows other socket families', () => {
    expect(x64(41, AF_UNIX)).toBe('EPERM');
    expect(x64(41, AF_INET)).toBe('allow');
    expect(x64(41, 0)).toBe('allow');
    expect(x64(41, AF_NETLINK)).toBe('allow');
  });

  it('refuses io_uring_setup, io_uring_enter and io_uring_register, and nothing next to them', () => {
    expect(x64(424)).toBe('allow');
    expect(x64(425)).toBe('EPERM');
    expect(x64(426)).toBe('EPERM');
    expect(x64(427)).toBe('EPERM');
    expect(x64(428)).toBe('allow');
  });

  it('allows ordinary system calls, socketpair included', () => {
    expect(x64(0)).toBe('allow'); // read
    expect(x64(1, AF_UNIX)).toBe('allow'); // write, whose first argument happens to be 1
    expect(x64(53, AF_UNIX)).toBe('allow'); // socketpair(AF_UNIX)
    expect(x64(42)).toBe('allow'); // connect
    expect(x64(40)).toBe('allow'); // sendfile
    expect(x64(0x3fffffff)).toBe('allow');
  });

  it('kills a process that makes an x32 system call or one of another ABI', () => {
    expect(x64(0x40000000 + 41, AF_UNIX)).toBe('kill');
    expect(x64(0x40000000)).toBe('kill');
    expect(x64(0xffffffff)).toBe('kill');
    expect(decide(program, { arch: AUDIT_ARCH_I386, nr: 359, arg0: AF_UNIX })).toBe('kill');
    expect(decide(program, { arch: AUDIT_ARCH_AARCH64, nr: 198, arg0: AF_UNIX })).toBe('kill');
  });

  it('is the program run_shell uses on this machine when it is x86-64', () => {
    if (process.arch === 'x64') expect(unixSocketFilter()).toEqual(program);
  });
});

describe('the seccomp program on arm64', () => {
  const program = unixSocketFilter('arm64') as Buffer;
  const arm64 = (nr: number, arg0?: number): Verdict => decide(program, { arch: AUDIT_ARCH_AARCH64, nr, ...(arg0 === undefined ? {} : { arg0 }) });

  it('refuses socket(AF_UNIX) and io_uring by arm64 numbers', () => {
    expect(arm64(198, AF_UNIX)).toBe('EPERM');
    expect(arm64(198, AF_INET)).toBe('allow');
    expect(arm64(41, AF_UNIX)).toBe('allow'); // pivot_root on arm64, not socket
    expect(arm64(425)).toBe('EPERM');
    expect(arm64(199, AF_UNIX)).toBe('allow'); // socketpair
  });

  it('kills a process of another ABI', () => {
    expect(decide(program, { arch: AUDIT_ARCH_X86_64, nr: 41, arg0: AF_UNIX })).toBe('kill');
  });
});

describe('elsewhere', () => {
  it('there is no program for an architecture it does not know (32-bit x86 and ARM, RISC-V)', () => {
    expect(unixSocketFilter('ia32')).toBeUndefined();
    expect(unixSocketFilter('arm')).toBeUndefined();
    expect(unixSocketFilter('riscv64')).toBeUndefined();
  });
});
