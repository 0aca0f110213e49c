"""The slow tier's list names modules and tests that exist (a rename must not silently move a
slow test into the fast tier), and the fast tier leaves them out."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import SLOW

ROOT = Path(__file__).resolve().parents[1]


def test_every_slow_entry_names_an_existing_module_or_test() -> None:
    for entry in sorted(SLOW):
        path, _, name = entry.partition("::")
        file = ROOT / path
        assert file.is_file(), f"{entry}: no such test module"
        if name:
            tree = ast.parse(file.read_text(encoding="utf-8"))
            functions = {
                node.name
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            }
            assert name in functions, f"{entry}: no such test in {path}"


def test_the_test_script_has_a_fast_tier_and_runs_in_parallel() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert '"not slow"' in script
    assert "--dist loadscope" in script
