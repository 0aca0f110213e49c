"""The slow tier's list names modules and tests that exist (a rename must not silently move a
slow test into the fast tier), and the fast tier leaves them out."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import settings

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


def _stated_example_counts() -> dict[str, int]:
    """``path:line`` of every ``max_examples=N`` a test module states itself, with ``N``."""
    counts: dict[str, int] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == "conftest.py":  # where the profiles are
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "max_examples":
                place = f"{path.relative_to(ROOT)}:{node.value.lineno}"
                assert isinstance(node.value, ast.Constant), f"{place}: not a number"
                assert isinstance(node.value.value, int), f"{place}: not a number"
                counts[place] = node.value.value
    return counts


def test_property_tests_take_their_example_count_from_the_profile() -> None:
    assert settings.get_profile("ci").deadline is None
    assert settings.get_profile("dev").max_examples < settings.get_profile("ci").max_examples
    assert settings.get_profile("thorough").max_examples > settings.get_profile("ci").max_examples
    ci = settings.get_profile("ci").max_examples
    stated = _stated_example_counts()
    above = {place: count for place, count in stated.items() if count >= ci}
    assert not above, f"more examples than the ci profile's {ci}: use the profile ({above})"
    assert stated, "the lower counts of the costly property tests are found"
