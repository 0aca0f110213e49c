"""The slow tier's list names modules and tests that exist (a rename must not silently move a
slow test into the fast tier), and the fast tier leaves them out; the costliest modules are
collected first (pytest-xdist hands them out first)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from tests.conftest import COSTLY, SLOW

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


def test_every_costly_module_exists_once() -> None:
    assert len(set(COSTLY)) == len(COSTLY)
    missing = [path for path in COSTLY if not (ROOT / path).is_file()]
    assert not missing, f"no such test module: {missing}"


def test_the_costly_modules_are_collected_first(request: pytest.FixtureRequest) -> None:
    """pytest-xdist hands the modules out in the collection's order (its own reordering off):
    the collection starts with the modules of COSTLY, heaviest first."""
    if hasattr(request.config.option, "loadscopereorder"):  # pytest-xdist is loaded
        assert request.config.option.loadscopereorder is False
    modules = list(dict.fromkeys(item.nodeid.split("::", 1)[0] for item in request.session.items))
    present = [module for module in COSTLY if module in modules]
    assert modules[: len(present)] == present


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
        text = path.read_text(encoding="utf-8")
        if "max_examples" not in text:  # no such keyword: the module need not be parsed
            continue
        for node in ast.walk(ast.parse(text)):
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


def test_the_session_keeps_the_rewritten_test_modules() -> None:
    """pytest caches each test module's rewritten asserts as bytecode; the session writes them
    even where PYTHONDONTWRITEBYTECODE is set (tests/conftest.py), or every worker rewrites all
    of them again on every run."""
    assert sys.dont_write_bytecode is False
