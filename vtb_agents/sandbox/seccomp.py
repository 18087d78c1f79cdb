"""A seccomp filter for the sandbox worker: system calls model-written code never needs are denied.

Namespaces and a dropped uid keep code away from host files, processes and the network; the
kernel itself is still reachable through every system call. This filter (in the spirit of
Docker's default profile, much shorter) makes the calls that are the usual way into kernel bugs
or out of a sandbox fail with ``EPERM``: new namespaces (``unshare``, ``setns``, ``clone`` with
namespace flags), mounting, ``ptrace`` and reading other processes' memory, kernel keyrings,
eBPF, ``userfaultfd``, ``perf_event_open``, ``io_uring``, modules, kexec, handle-based opens,
swap, reboot, clock changes. ``clone3`` fails with ``ENOSYS`` (its flags live in memory a filter
cannot read), so the C library falls back to ``clone``, whose flags it can. On x86_64, the
x32 and i386 system call ABIs are denied whole.

The host builds the program here (``filter_program``) and sends it to the worker, which
installs it last, after its own set-up (``worker._install_seccomp``); everything the code starts
inherits it. Standard library only; x86_64 and aarch64 (other machines run without a filter
and the sandbox says so).
"""

from __future__ import annotations

import errno
import platform
import struct

DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount",
    "move_mount", "open_tree", "mount_setattr", "open_by_handle_at", "name_to_handle_at",
    "keyctl", "add_key", "request_key", "bpf", "userfaultfd", "perf_event_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog",
    "settimeofday", "clock_settime", "adjtimex",
)
"""System calls that fail with EPERM, on every supported machine."""

X86_ONLY_DENIED = ("iopl", "ioperm")
"""x86-only calls (port I/O) that fail with EPERM as well."""

SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
        "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "move_mount": 429,
        "open_tree": 428, "mount_setattr": 442, "open_by_handle_at": 304, "name_to_handle_at": 303,
        "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "userfaultfd": 323,
        "perf_event_open": 298, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "kexec_load": 246, "kexec_file_load": 320, "swapon": 167, "swapoff": 168, "reboot": 169,
        "acct": 163, "quotactl": 179, "syslog": 103, "settimeofday": 164, "clock_settime": 227,
        "adjtimex": 159, "iopl": 172, "ioperm": 173, "clone": 56, "clone3": 435,
    },
    "aarch64": {  # the generic table (asm-generic/unistd.h)
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
        "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "move_mount": 429, "open_tree": 428,
        "mount_setattr": 442, "open_by_handle_at": 265, "name_to_handle_at": 264, "keyctl": 219,
        "add_key": 217, "request_key": 218, "bpf": 280, "userfaultfd": 282,
        "perf_event_open": 241, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "kexec_load": 104, "kexec_file_load": 294, "swapon": 224, "swapoff": 225, "reboot": 142,
        "acct": 89, "quotactl": 60, "syslog": 116, "settimeofday": 170, "clock_settime": 112,
        "adjtimex": 171, "clone": 220, "clone3": 435,
    },
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
NAMESPACE_FLAGS = 0x7E020000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET."""
X32_BIT = 0x40000000

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_ABS_W, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0_LOW = 0, 4, 16  # offsets in struct seccomp_data (little-endian machines)


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The packed ``struct sock_filter`` array for ``machine`` (default: this one), or None."""
    machine = machine or platform.machine()
    table = SYSCALLS.get(machine)
    if table is None:
        return None
    denied = [table[name] for name in DENIED + (X86_ONLY_DENIED if machine == "x86_64" else ())]
    # Layout: arch check, load nr, [x32 check], one jump per denied call, clone flags, clone3,
    # allow; then the two shared returns. Jumps are relative to the next instruction.
    body: list[tuple[int, int, str | None, str | None]] = []  # (code, k, jt label, jf label)
    body.append((_LD_ABS_W, _ARCH, None, None))
    body.append((_JEQ, AUDIT_ARCH[machine], None, "deny"))
    body.append((_LD_ABS_W, _NR, None, None))
    if machine == "x86_64":
        body.append((_JGE, X32_BIT, "deny", None))
    body += [(_JEQ, nr, "deny", None) for nr in denied]
    body.append((_JEQ, table["clone3"], "enosys", None))
    body.append((_JEQ, table["clone"], None, "allow"))
    body.append((_LD_ABS_W, _ARG0_LOW, None, None))
    body.append((_JSET, NAMESPACE_FLAGS, "deny", "allow"))
    labels = {"allow": len(body), "deny": len(body) + 1, "enosys": len(body) + 2}
    program = b""
    for index, (code, k, jt, jf) in enumerate(body):
        offset = {label: target - index - 1 for label, target in labels.items()}
        program += _insn(code, k, offset[jt] if jt else 0, offset[jf] if jf else 0)
    program += _insn(_RET, _ALLOW) + _insn(_RET, _ERRNO | errno.EPERM) + \
        _insn(_RET, _ERRNO | errno.ENOSYS)
    return program


def describe(program: bytes | None) -> str:
    """One line for run metadata."""
    if program is None:
        return f"none (no system-call table for {platform.machine()})"
    return f"seccomp: {len(DENIED)} kinds of system call denied, namespace flags of clone refused"
