"""The worker's seccomp filter: the system-call tables and the program's shape.

What the filter does to real code is in test_sandbox_hostile.py.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from vtb_agents.sandbox.seccomp import DENIED, SYSCALLS, X86_ONLY_DENIED, describe, filter_program

HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
           "aarch64": Path("/usr/include/asm-generic/unistd.h")}


@pytest.mark.parametrize("machine", sorted(SYSCALLS))
def test_system_call_numbers_match_the_kernel_headers(machine: str) -> None:
    header = HEADERS[machine]
    if not header.exists():
        pytest.skip(f"{header} is not installed here")
    numbers = {m.group(1): int(m.group(2)) for m in
               re.finditer(r"^#define __NR(?:3264)?_(\w+)\s+(\d+)\s*$", header.read_text(), re.M)}
    assert {name: numbers.get(name) for name in SYSCALLS[machine]} == SYSCALLS[machine]


@pytest.mark.parametrize("machine", sorted(SYSCALLS))
def test_every_denied_call_has_a_number_and_every_jump_lands_inside(machine: str) -> None:
    needed = set(DENIED) | {"clone", "clone3"} | (set(X86_ONLY_DENIED) if machine == "x86_64" else set())
    assert needed <= set(SYSCALLS[machine])
    program = filter_program(machine)
    assert program is not None and len(program) % 8 == 0
    instructions = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    for index, (code, jt, jf, _) in enumerate(instructions):
        if code & 0x07 == 0x05:  # a jump
            assert index + 1 + max(jt, jf) < len(instructions)
    assert instructions[-1][0] == 0x06 and instructions[-3][3] == 0x7FFF0000  # returns at the end


def test_machines_without_a_table_run_without_a_filter_and_say_so() -> None:
    assert filter_program("sparc64") is None
    assert describe(None).startswith("none (no system-call table for")
