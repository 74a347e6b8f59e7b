/**
 * A classic-BPF seccomp program for bubblewrap's `--seccomp FD`: it refuses `socket(AF_UNIX, …)`
 * and io_uring. A read-only bind mount does not stop `connect()` to a Unix socket on it, and a
 * network namespace only hides abstract sockets, so without this a sandboxed command could talk
 * to `/run/docker.sock`, a D-Bus bus or an agent socket outside the workspace. io_uring can create
 * sockets without the `socket` system call, so it goes too. `socketpair` stays allowed: it
 * reaches nothing outside.
 *
 * Written out by hand because libseccomp has no binding for Node 20 that needs no compiler; the
 * program is thirteen instructions and checked by test/e2e/hostile/shellSandbox.test.ts on a real kernel.
 */

interface Abi {
  /** AUDIT_ARCH_* from <linux/audit.h>: the filter kills a system call of any other ABI (i386, x32). */
  readonly auditArch: number;
  readonly socket: number;
}

/** The architectures the filter knows; elsewhere the sandbox runs without it (see README). */
const ABIS: Partial<Record<NodeJS.Architecture, Abi>> = {
  x64: { auditArch: 0xc000003e, socket: 41 },
  arm64: { auditArch: 0xc00000b7, socket: 198 },
};

// The same numbers on every architecture (system calls added after the tables were unified).
const IO_URING_SETUP = 425;
const IO_URING_REGISTER = 427;
/** x86-64's x32 ABI sets this bit in the system call number under the same AUDIT_ARCH. */
const X32_SYSCALL_BIT = 0x40000000;
const AF_UNIX = 1;
const EPERM = 1;

// BPF opcodes (<linux/bpf_common.h>) and seccomp return values (<linux/seccomp.h>).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JGT_K = 0x25;
const RET_K = 0x06;
const RET_KILL_PROCESS = 0x80000000;
const RET_ERRNO = 0x00050000;
const RET_ALLOW = 0x7fff0000;
// Offsets in struct seccomp_data: nr, arch, then args[0] (its low 32 bits first, little-endian).
const NR = 0;
const ARCH = 4;
const ARG0_LOW = 16;

/** The program as bytes (struct sock_filter[], host byte order), or undefined on an architecture it does not know. */
export function unixSocketFilter(arch: NodeJS.Architecture = process.arch): Buffer | undefined {
  const abi = ABIS[arch];
  if (abi === undefined) return undefined;
  const deny = RET_ERRNO | EPERM;
  // [code, jump if true, jump if false, k]; a jump counts the instructions it skips.
  const program: [number, number, number, number][] = [
    [LD_W_ABS, 0, 0, ARCH],
    [JEQ_K, 1, 0, abi.auditArch],
    [RET_K, 0, 0, RET_KILL_PROCESS],
    [LD_W_ABS, 0, 0, NR],
    [JGE_K, 7, 0, X32_SYSCALL_BIT], // → kill
    [JEQ_K, 2, 0, abi.socket], // → check the domain
    [JGE_K, 0, 3, IO_URING_SETUP], // below io_uring → allow
    [JGT_K, 2, 3, IO_URING_REGISTER], // above io_uring → allow, else → deny
    [LD_W_ABS, 0, 0, ARG0_LOW],
    [JEQ_K, 1, 0, AF_UNIX], // → deny
    [RET_K, 0, 0, RET_ALLOW],
    [RET_K, 0, 0, deny],
    [RET_K, 0, 0, RET_KILL_PROCESS],
  ];
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], i) => {
    bytes.writeUInt16LE(code, i * 8);
    bytes.writeUInt8(jt, i * 8 + 2);
    bytes.writeUInt8(jf, i * 8 + 3);
    bytes.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return bytes;
}
