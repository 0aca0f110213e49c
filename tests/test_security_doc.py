"""docs/security.md names, for each security item, the tests that cover it: they must exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)?::(test_\w+)`")  # a file once, then ::name


def test_every_test_named_in_the_security_doc_exists() -> None:
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    missing: list[str] = []
    named = 0
    for row in text.splitlines():
        current: str | None = None
        for match in _REFERENCE.finditer(row):
            current = match.group(1) or current
            assert current is not None, f"{match.group(0)} names no file before it: {row}"
            source = (ROOT / current).read_text(encoding="utf-8")
            named += 1
            if not re.search(rf"^(async )?def {match.group(2)}\(", source, re.MULTILINE):
                missing.append(f"{current}::{match.group(2)}")
    assert named > 20
    assert not missing
