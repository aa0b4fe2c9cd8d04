"""The sandbox's seccomp filter: kernel interfaces no shell command needs, refused with EPERM.

bubblewrap installs it (``--seccomp FD``) on the command once its own setup (namespaces, mounts) is
done, so it never gets in bwrap's way; every process the command starts inherits it and none can
remove it. The same calls are denied to the whole picoagent-sandbox unit (SystemCallFilter=), which
covers bwrap as well; this filter also covers ``make run``, where no unit is around the sandbox.

What it refuses: the interfaces an unprivileged process reaches that have the longest record of
kernel privilege escalations (bpf, io_uring, the key store, userfaultfd, perf events), looking into
other processes (ptrace, process_vm_*), and calls that need privileges the sandbox never has (mounts,
namespaces, modules, kexec, swap, reboot) -- refused here too, so that a kernel bug in a capability
check is not enough.

The program is classic BPF (``struct sock_filter[]``), built here without libseccomp: check the
architecture, load the system call number, return EPERM for the listed numbers, allow the rest. Only
the native ABI may call at all: a 32-bit compat call (i386, arm32) or an x32 call on x86_64 has other
numbers, so it kills the process instead of slipping past the table. Numbers: the kernel's
arch/x86/entry/syscalls/syscall_64.tbl and, for aarch64 (the Pi), include/uapi/asm-generic/unistd.h
(tests/test_sandbox.py checks them against the installed kernel headers). About 50 instructions;
measured on the x86_64 test machine: 20-60 ns more per system call (2 million getppid() under bwrap).
"""

from __future__ import annotations

import platform
import struct

# The kernel interfaces an unprivileged process reaches that have the longest record of privilege
# escalations: both systemd units deny them too (tests/test_systemd_unit.py checks it).
KERNEL_INTERFACES = (
    "bpf",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "perf_event_open",
)
# Refused with EPERM; in the order of the module docstring.
DENIED = (
    *KERNEL_INTERFACES,
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "lookup_dcookie",
    "syslog",
    "iopl",
    "ioperm",
)

# System call numbers per architecture (x86_64: syscall_64.tbl; aarch64: the generic table, which has
# no iopl or ioperm). 424 and up are the same on every architecture.
_COMMON = {
    "pidfd_getfd": 438,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "quotactl_fd": 443,
}
NUMBERS: dict[str, dict[str, int]] = {
    "x86_64": _COMMON
    | {
        "bpf": 321,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "userfaultfd": 323,
        "perf_event_open": 298,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "unshare": 272,
        "setns": 308,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "acct": 163,
        "quotactl": 179,
        "open_by_handle_at": 304,
        "lookup_dcookie": 212,
        "syslog": 103,
        "iopl": 172,
        "ioperm": 173,
    },
    "aarch64": _COMMON
    | {
        "bpf": 280,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "userfaultfd": 282,
        "perf_event_open": 241,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "unshare": 97,
        "setns": 268,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "swapon": 224,
        "swapoff": 225,
        "reboot": 142,
        "acct": 89,
        "quotactl": 60,
        "open_by_handle_at": 265,
        "lookup_dcookie": 18,
        "syslog": 116,
    },
}
# <linux/audit.h>: AUDIT_ARCH_X86_64, AUDIT_ARCH_AARCH64.
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000

# <linux/filter.h> and <linux/seccomp.h>
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # struct seccomp_data: int nr; __u32 arch; ...
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000
EPERM = 1


class UnsupportedArchitecture(Exception):
    """There is no system call table here for this machine's architecture."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    """One ``struct sock_filter`` {u16 code; u8 jt; u8 jf; u32 k}, in this machine's byte order."""
    return struct.pack("=HBBI", code, jt, jf, k)


def program(arch: str | None = None) -> bytes:
    """The filter for ``arch`` (default: this machine) as the bytes bwrap's ``--seccomp FD`` reads."""
    arch = arch or platform.machine()
    if arch not in NUMBERS:
        raise UnsupportedArchitecture(arch)
    numbers = sorted({NUMBERS[arch][name] for name in DENIED if name in NUMBERS[arch]})
    x86 = arch == "x86_64"
    # The checks, then three returns: ALLOW, ERRNO(EPERM), KILL_PROCESS. Jumps count from the next
    # instruction; a jump that does not fit in 8 bits makes struct.pack fail (50 entries are far from it).
    allow = 3 + x86 + len(numbers)
    deny, kill = allow + 1, allow + 2
    out = [
        _insn(_LD_W_ABS, _ARCH_OFFSET),
        _insn(_JEQ_K, AUDIT_ARCH[arch], jt=0, jf=kill - 2),  # a foreign ABI: none of these numbers is its
        _insn(_LD_W_ABS, _NR_OFFSET),
    ]
    if x86:
        out.append(_insn(_JGE_K, X32_SYSCALL_BIT, jt=kill - 4, jf=0))  # x32: its own numbering
    for number in numbers:
        out.append(_insn(_JEQ_K, number, jt=deny - len(out) - 1, jf=0))
    out += [_insn(_RET_K, RET_ALLOW), _insn(_RET_K, RET_ERRNO | EPERM), _insn(_RET_K, RET_KILL_PROCESS)]
    return b"".join(out)
