"""A seccomp filter that stops the sandboxed code from creating user namespaces.

bubblewrap's ``--disable-userns`` needs a user namespace of its own, which a root worker
cannot use (see ``bwrap.py``). This filter gives both modes the same guarantee: ``clone``
and ``unshare`` with ``CLONE_NEWUSER`` fail with EPERM, and ``clone3`` (whose flags a
classic BPF filter cannot read) fails with ENOSYS so the C library falls back to ``clone``.
Syscalls of another ABI (x32, 32-bit) are refused. A new user namespace is the usual first
step of kernel exploits from unprivileged code.

The program is classic BPF (``struct sock_filter``), handed to ``bwrap --seccomp FD``.
Only x86_64 and aarch64 are known; elsewhere ``filter_program()`` returns None.
"""

from __future__ import annotations

import platform
import struct

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM = 1
_ENOSYS = 38
_CLONE_NEWUSER = 0x10000000

# offsets in struct seccomp_data: nr (int), arch (u32), instruction_pointer, args[6]
_NR, _ARCH, _ARG0 = 0, 4, 16

#: machine -> (AUDIT_ARCH, clone, unshare, clone3, lowest syscall number of a foreign ABI)
_ARCHES = {
    "x86_64": (0xC000003E, 56, 272, 435, 0x40000000),
    "aarch64": (0xC00000B7, 220, 97, 435, None),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The BPF program for this machine, or None when its syscall numbers are unknown."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, nr_clone, nr_unshare, nr_clone3, foreign_from = arch
    deny = _op(_RET_K, _ERRNO | _EPERM)
    prog = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ_K, audit_arch, jt=1),  # native ABI: go on
        deny,
        _op(_LD_W_ABS, _NR),
    ]
    if foreign_from is not None:  # x32 syscalls share x86_64's arch value
        prog += [_op(_JGE_K, foreign_from, jf=1), deny]
    prog += [
        _op(_JEQ_K, nr_clone3, jf=1),
        _op(_RET_K, _ERRNO | _ENOSYS),
        _op(_JEQ_K, nr_clone, jt=1),
        _op(_JEQ_K, nr_unshare, jf=3),
        _op(_LD_W_ABS, _ARG0),  # flags, low 32 bits
        _op(_JSET_K, _CLONE_NEWUSER, jf=1),
        deny,
        _op(_RET_K, _ALLOW),
    ]
    return b"".join(prog)
