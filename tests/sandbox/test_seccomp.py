"""The seccomp filter's assembly (its effect is tested in test_escape.py)."""

from __future__ import annotations

import struct

from sagents.sandbox._seccomp import seccomp_filter


def _instructions(prog: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]


def test_x86_64_checks_the_architecture_first_and_allows_by_default() -> None:
    prog = seccomp_filter("x86_64")
    assert prog is not None
    ops = _instructions(prog)
    assert ops[0] == (0x20, 0, 0, 4)  # load seccomp_data.arch
    assert ops[1][3] == 0xC000003E
    assert ops[-1] == (0x06, 0, 0, 0x7FFF0000)  # SECCOMP_RET_ALLOW
    assert len(ops) < 4096  # BPF_MAXINSNS


def test_every_jump_stays_inside_the_program() -> None:
    for machine in ("x86_64", "aarch64"):
        prog = seccomp_filter(machine)
        assert prog is not None
        ops = _instructions(prog)
        for index, (code, jt, jf, _k) in enumerate(ops):
            if code & 0x07 == 0x05:  # BPF_JMP
                assert index + 1 + max(jt, jf) < len(ops)


def test_an_unknown_architecture_gets_no_filter() -> None:
    assert seccomp_filter("mips") is None
