"""A small seccomp filter for the ``local`` sandbox (docs/sandbox.md, "What the ``local``
sandbox blocks").

A program may run as the host's uid 0 (``sandbox_uid=0``, or where ``setpriv`` is missing), so
a file it creates in the workspace may belong to root on the host; in any case it belongs to a
host uid. The workspace is mounted ``nosuid`` inside, but not on the host: a program that sets
the set-user-ID bit on a copy of a shell would hand that uid to every local user who can reach
the workspace. The filter therefore refuses
(``EPERM``) every system call that would set ``S_ISUID`` or ``S_ISGID`` through a mode
argument (``chmod`` family, ``open``/``openat``/``creat`` and ``mknod``/``mknodat`` with such
a mode), and answers ``ENOSYS`` to the calls whose mode it cannot inspect (``openat2``, whose
mode is behind a pointer, and ``io_uring``, whose operations bypass seccomp). System calls of
another architecture (i386 or x32 on x86-64) are refused, since their numbers differ.

When the host runs as root, programs run as an unprivileged host uid outside any user
namespace (see :mod:`sagents.sandbox._bwrap`), where the kernel would let them create one and
gain every capability inside it: the filter refuses (``EPERM``) ``unshare`` and ``clone`` with
``CLONE_NEWUSER``, and answers ``ENOSYS`` to ``clone3``, whose flags are behind a pointer (the C
library then falls back to ``clone``).

Keyrings are not namespaced: the program inherits the host's session keyring and, possessing
it, could read the keys in it whatever its uid. ``add_key``, ``request_key`` and ``keyctl``
answer ``ENOSYS``, as in the default seccomp profiles of container runtimes.

Sockets: only the address families a program needs exist inside, ``AF_UNIX``, ``AF_INET``,
``AF_INET6`` and ``AF_NETLINK`` (the C library's ``getaddrinfo`` asks the kernel for the
interfaces' addresses). ``socket`` and ``socketpair`` of any other family (``AF_VSOCK``, which
reaches the hypervisor and other virtual machines whatever the network namespace; ``AF_PACKET``,
``AF_ALG``, ``AF_BLUETOOTH``, ...) answer ``EAFNOSUPPORT``, as for a family the kernel lacks.

It is classic BPF, assembled here (no libseccomp needed); bubblewrap installs it with
``--seccomp FD`` right before it execs the program.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["ALLOWED_FAMILIES", "CLONE_NEWUSER", "SETID_BITS", "seccomp_filter"]

SETID_BITS = 0o6000  # S_ISUID | S_ISGID
CLONE_NEWUSER = 0x10000000
ALLOWED_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_X32_BIT = 0x40000000

# (audit arch, {syscall: index of its mode argument}, {syscall: index of its clone flags},
#  syscalls refused outright: io_uring_setup/enter/register, openat2, clone3, and the key
#  management calls add_key/request_key/keyctl; socket and socketpair, whose first argument
#  is the address family)
_ARCHES: dict[str, tuple[int, dict[int, int], dict[int, int], tuple[int, ...], tuple[int, ...]]] = {
    "x86_64": (
        0xC000003E,
        {2: 2, 85: 1, 90: 1, 91: 1, 133: 1, 257: 3, 259: 2, 268: 2, 452: 2},
        {56: 0, 272: 0},
        (425, 426, 427, 437, 435, 248, 249, 250),
        (41, 53),
    ),
    "aarch64": (
        0xC00000B7,
        {52: 1, 53: 2, 33: 2, 56: 3, 452: 2},
        {220: 0, 97: 0},
        (425, 426, 427, 437, 435, 217, 218, 219),
        (198, 199),
    ),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """Return the filter as raw ``struct sock_filter`` bytes, or None on an architecture this
    module has no system call table for (``describe().warnings`` then says so).

    Args:
        machine: ``platform.machine()`` by default.
    """
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, mode_calls, clone_calls, refused, socket_calls = arch
    prog = [
        _op(_LD_ABS, 4),  # seccomp_data.arch
        _op(_JEQ, audit_arch, 1, 0),
        _op(_RET, _ERRNO | errno.ENOSYS),
        _op(_LD_ABS, 0),  # seccomp_data.nr
    ]
    if audit_arch == 0xC000003E:
        prog += [_op(_JGE, _X32_BIT, 0, 1), _op(_RET, _ERRNO | errno.ENOSYS)]
    checks = [(nr, arg, SETID_BITS) for nr, arg in mode_calls.items()]
    checks += [(nr, arg, CLONE_NEWUSER) for nr, arg in clone_calls.items()]
    for nr, arg, bits in checks:
        prog += [
            _op(_JEQ, nr, 0, 4),
            _op(_LD_ABS, 16 + 8 * arg),  # low 32 bits of seccomp_data.args[arg]
            _op(_JSET, bits, 0, 1),
            _op(_RET, _ERRNO | errno.EPERM),
            _op(_RET, _ALLOW),
        ]
    for nr in socket_calls:
        families = len(ALLOWED_FAMILIES)
        prog += [_op(_JEQ, nr, 0, families + 3), _op(_LD_ABS, 16)]  # low 32 bits: an int
        prog += [
            _op(_JEQ, family, families - index, 0) for index, family in enumerate(ALLOWED_FAMILIES)
        ]
        prog += [_op(_RET, _ERRNO | errno.EAFNOSUPPORT), _op(_RET, _ALLOW)]
    for nr in refused:
        prog += [_op(_JEQ, nr, 0, 1), _op(_RET, _ERRNO | errno.ENOSYS)]
    prog.append(_op(_RET, _ALLOW))
    return b"".join(prog)
