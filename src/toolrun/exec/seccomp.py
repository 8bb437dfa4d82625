"""The seccomp filter of sandboxed tools: a classic BPF program, built here with `struct`, no native code.

bubblewrap loads it (`bwrap --seccomp FD`) into the sandboxed process right before the tool's
command starts; every process the tool starts inherits it, and nothing can remove it. It refuses
the system calls that serve to escape or attack a sandbox, and allows everything else:

- refused with EPERM: ptrace, process_vm_readv/writev, pidfd_getfd and process_madvise (reading or
  steering other processes), mount, umount2, pivot_root, chroot and the new mount API (open_tree,
  open_tree_attr, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr), unshare and setns (new or
  other namespaces), the kernel keyring (keyctl, add_key, request_key), bpf, userfaultfd, perf_event_open,
  kexec_load, kexec_file_load, init/finit/delete_module, reboot, swapon/swapoff, acct, quotactl, quotactl_fd,
  syslog, vhangup, lookup_dcookie, open_by_handle_at and name_to_handle_at (file handles that
  reach outside the mounted view), io_uring (its operations bypass seccomp), uselib, iopl, ioperm;
- clone with any CLONE_NEW* flag (a new namespace) is refused with EPERM, and clone3, whose flags
  a filter cannot read, answers ENOSYS, so the C library falls back to clone (as Docker's filter does);
- ioctl TIOCSTI and TIOCLINUX (typing into a terminal) are refused;
- setsockopt SO_REUSEPORT is refused: with `network: host`, a socket of the server's user (a server that is not
  root) joins the port of any listener of that user that set it, toolrun's own workers included, and takes a share
  of its connections;
- a mode with S_ISUID or S_ISGID in chmod, fchmod, fchmodat, fchmodat2, open, openat, creat, mknod and mknodat is
  refused (EPERM), and openat2 (its mode is in a struct the filter cannot read) answers ENOSYS: a `writable` path
  is a host folder, and a setuid program of the tool's user planted there lets any local user act as that user
  outside every sandbox (bwrap's nosuid mounts hold inside the jail only); under a server that is not root, that
  user is the server's own;
- prctl PR_SET_PDEATHSIG is refused: the tool's shell is its PID namespace's first process and dies with bwrap
  (so with the server) through that signal alone; cleared or changed, it outlived a killed server;
- a system call of another architecture than the host's (a 32-bit program on x86_64, or the x32 ABI)
  kills the process: the numbers above would mean other calls there;
- under `network: none` (`program(no_network=True)`), `socket` and `socketpair` of any address family but
  AF_UNIX, AF_INET and AF_INET6 answer EAFNOSUPPORT ("address family not supported"): no network namespace
  covers AF_VSOCK (on a virtual machine it leads to the host), netlink carries the host's device events
  (uevents), and AF_PACKET, AF_BLUETOOTH, AF_CAN and the others serve nothing a tool without a network
  needs. AF_INET and AF_INET6 reach the sandbox's own loopback only (its network namespace has nothing
  else); AF_UNIX stays, and a Unix socket file inside a bound folder still reaches the host service
  listening on it (docs/security.md).
"""

from __future__ import annotations

import functools
import platform
import struct

# Audit architectures (linux/audit.h) and the number of each refused call, per architecture.
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000

# Each refused call, then clone, clone3 and ioctl (checked apart): its number on x86_64 (<asm/unistd_64.h>)
# and on aarch64 (<asm-generic/unistd.h>); - where the architecture has no such call.
_TABLE = """
ptrace 101 117          process_vm_readv 310 270   process_vm_writev 311 271   mount 165 40
umount2 166 39          pivot_root 155 41          chroot 161 51               open_tree 428 428
move_mount 429 429      fsopen 430 430             fsconfig 431 431            fsmount 432 432
fspick 433 433          mount_setattr 442 442      unshare 272 97              setns 308 268
keyctl 250 219          add_key 248 217            request_key 249 218         bpf 321 280
userfaultfd 323 282     perf_event_open 298 241    kexec_load 246 104          kexec_file_load 320 294
init_module 175 105     finit_module 313 273       delete_module 176 106       reboot 169 142
swapon 167 224          swapoff 168 225            acct 163 89                 quotactl 179 60
syslog 103 116          vhangup 153 58             lookup_dcookie 212 18       open_by_handle_at 304 265
name_to_handle_at 303 264  io_uring_setup 425 425  io_uring_enter 426 426      io_uring_register 427 427
uselib 134 -            iopl 172 -                 ioperm 173 -               open_tree_attr 467 467
quotactl_fd 443 443     pidfd_getfd 438 438        process_madvise 440 440
clone 56 220            clone3 435 435             ioctl 16 29                 prctl 157 167
setsockopt 54 208       socket 41 198              socketpair 53 199           openat2 437 437
chmod 90 -              fchmod 91 52               fchmodat 268 53             fchmodat2 452 452
open 2 -                openat 257 56              creat 85 -                  mknod 133 -
mknodat 259 33
"""
# The calls that set a file's mode, and which argument holds it: refused when it asks for S_ISUID or S_ISGID.
MODE_ARGUMENT = {
    "chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2, "open": 2, "openat": 3, "creat": 1, "mknod": 1,
    "mknodat": 2,
}  # fmt: skip
_WORDS = _TABLE.split()
_ROWS = [_WORDS[i : i + 3] for i in range(0, len(_WORDS), 3)]
SYSCALLS: dict[str, dict[str, int | None]] = {
    machine: {row[0]: None if row[column] == "-" else int(row[column]) for row in _ROWS}
    for machine, column in (("x86_64", 1), ("aarch64", 2))
}
_CHECKED_APART = ("clone", "clone3", "ioctl", "prctl", "setsockopt", "socket", "socketpair", "openat2", *MODE_ARGUMENT)
_REFUSED_NAMES = [row[0] for row in _ROWS if row[0] not in _CHECKED_APART]

# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET, and CLONE_NEWTIME.
CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
OFFLINE_FAMILIES = (AF_UNIX, AF_INET, AF_INET6)  # the socket families `network: none` keeps
PR_SET_PDEATHSIG = 1
SOL_SOCKET, SO_REUSEPORT = 1, 15  # the same numbers on x86_64 and aarch64
SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID

# Classic BPF (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
# Offsets in struct seccomp_data: nr, arch, then args[6] as 64-bit values (the low half first: little-endian).
_NR, _ARCH, _ARG0_LOW, _ARG1_LOW, _ARG2_LOW, _ARG3_LOW = 0, 4, 16, 24, 32, 40
_ARG_LOW = (_ARG0_LOW, _ARG1_LOW, _ARG2_LOW, _ARG3_LOW)

# An instruction: (code, jump-if-true label, jump-if-false label, k); labels resolve to offsets.
_Insn = tuple[int, str | None, str | None, int]


def _assemble(program: list[_Insn | str]) -> bytes:
    """Bytes of `program`, where a str item is a label and jumps name the label they go to."""
    labels: dict[str, int] = {}
    insns: list[_Insn] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)
    out = bytearray()
    for index, (code, jt, jf, k) in enumerate(insns):
        offsets = [0 if label is None else labels[label] - index - 1 for label in (jt, jf)]
        if not all(0 <= o <= 255 for o in offsets):  # pragma: no cover - the program is small
            raise ValueError("seccomp jump out of range")
        out += struct.pack("=HBBI", code, offsets[0], offsets[1], k)
    return bytes(out)


@functools.cache
def program(machine: str | None = None, no_network: bool = False) -> bytes:
    """The filter for this machine's architecture (x86_64 or aarch64); ValueError for another one.
    `no_network`: also refuse every socket family but OFFLINE_FAMILIES (`network: none`)."""
    machine = machine or platform.machine()
    if machine not in SYSCALLS:
        raise ValueError(f"no seccomp filter for the {machine} architecture (x86_64 and aarch64 have one)")
    numbers = SYSCALLS[machine]
    code: list[_Insn | str] = [
        (_LD_W_ABS, None, None, _ARCH),
        (_JEQ, None, "kill", AUDIT_ARCH[machine]),
        (_LD_W_ABS, None, None, _NR),
    ]
    if machine == "x86_64":
        code.append((_JGE, "kill", None, X32_SYSCALL_BIT))
    code += [(_JEQ, "deny", None, nr) for name in _REFUSED_NAMES if (nr := numbers[name]) is not None]
    if no_network:
        code += [(_JEQ, "socket", None, nr) for name in ("socket", "socketpair") if (nr := numbers[name]) is not None]
    code += [
        (_JEQ, f"mode{index}", None, nr) for name, index in MODE_ARGUMENT.items() if (nr := numbers[name]) is not None
    ]
    code += [
        (_JEQ, "clone", None, numbers["clone"] or 0),
        (_JEQ, "enosys", None, numbers["clone3"] or 0),
        (_JEQ, "enosys", None, numbers["openat2"] or 0),
        (_JEQ, "ioctl", None, numbers["ioctl"] or 0),
        (_JEQ, "prctl", None, numbers["prctl"] or 0),
        (_JEQ, "setsockopt", None, numbers["setsockopt"] or 0),
        (_RET, None, None, RET_ALLOW),
        "clone",
        (_LD_W_ABS, None, None, _ARG0_LOW),
        (_JSET, "deny", None, CLONE_NEW_FLAGS),
        (_RET, None, None, RET_ALLOW),
        "ioctl",
        (_LD_W_ABS, None, None, _ARG1_LOW),
        (_JEQ, "deny", None, TIOCSTI),
        (_JEQ, "deny", None, TIOCLINUX),
        (_RET, None, None, RET_ALLOW),
        "prctl",
        (_LD_W_ABS, None, None, _ARG0_LOW),
        (_JEQ, "deny", None, PR_SET_PDEATHSIG),
        (_RET, None, None, RET_ALLOW),
        "setsockopt",
        (_LD_W_ABS, None, None, _ARG1_LOW),
        (_JEQ, None, "other_option", SOL_SOCKET),
        (_LD_W_ABS, None, None, _ARG2_LOW),
        (_JEQ, "deny", None, SO_REUSEPORT),
        "other_option",
        (_RET, None, None, RET_ALLOW),
        *_mode_checks(),
        "socket",
        (_LD_W_ABS, None, None, _ARG0_LOW),
        *((_JEQ, "allow", None, family) for family in OFFLINE_FAMILIES),
        (_RET, None, None, RET_ERRNO | EAFNOSUPPORT),
        "allow",
        (_RET, None, None, RET_ALLOW),
        "deny",
        (_RET, None, None, RET_ERRNO | EPERM),
        "enosys",
        (_RET, None, None, RET_ERRNO | ENOSYS),
        "kill",
        (_RET, None, None, RET_KILL_PROCESS),
    ]
    return _assemble(code)


def _mode_checks() -> list[_Insn | str]:
    """`mode1`..`mode3`: refuse (EPERM) a mode, in that argument, that asks for S_ISUID or S_ISGID."""
    code: list[_Insn | str] = []
    for index in sorted(set(MODE_ARGUMENT.values())):
        code += [
            f"mode{index}",
            (_LD_W_ABS, None, None, _ARG_LOW[index]),
            (_JSET, "deny", None, SET_ID_BITS),
            (_RET, None, None, RET_ALLOW),
        ]
    return code


def refused() -> tuple[str, ...]:
    """The names of the system calls the filter refuses outright (docs list them)."""
    return tuple(_REFUSED_NAMES)
