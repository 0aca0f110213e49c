"""The repository cites only what it contains: its own ``docs/`` and public specifications.

A comment, docstring or document that points at an issue number, at a design brief, a style
guide or a lessons file kept outside the repository, or at "the seed" design, sends a maintainer
to something they cannot open. Cite ``docs/architecture.md`` or the topic document instead (and
add the explanation there when it is missing), or a public specification (an MCP specification
section, the Agent Skills specification, the OpenAI docs).

``STILL_CITING`` lists the files that still hold such a citation because they were being changed
on other branches while the rest were fixed. It only shrinks: a file that cites and is not listed
fails, and so does a listed file that no longer cites (remove it from the list).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED_DIRS = ("sagents", "tests", "bench", "examples", "scripts", "docs")
SCANNED_SUFFIXES = frozenset({".py", ".md", ".sh"})
SCANNED_FILES = ("README.md",)

CITATION = re.compile(
    r"\bissue \d+"  # an issue number
    r"|\b(?:DESIGN|STYLE|LESSONS)\.md\b"  # briefs kept outside the repository
    r"|\bseed[- ]design\b",  # the original design notes
    re.IGNORECASE,
)

STILL_CITING: frozenset[str] = frozenset()


def _scanned() -> list[Path]:
    files = [ROOT / name for name in SCANNED_FILES]
    for directory in SCANNED_DIRS:
        files.extend(
            path
            for path in sorted((ROOT / directory).rglob("*"))
            if path.suffix in SCANNED_SUFFIXES
            and path.is_file()
            # not the installed packages of a venv inside the tree (bench/setup-peers.sh's)
            and not any(part.startswith(".venv") for part in path.relative_to(ROOT).parts)
        )
    this = Path(__file__).resolve()
    return [path for path in files if path.resolve() != this]


def _citations(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if CITATION.search(line):
            found.append(f"{path.relative_to(ROOT).as_posix()}:{number}: {line.strip()}")
    return found


def test_pattern_catches_each_kind_of_citation() -> None:
    cited = ["see issue 7 §2", "(DESIGN.md, Layers)", "STYLE.md", "LESSONS.md", "the Seed Design"]
    clean = ["docs/architecture.md", "an issue with the upstream", "a random seed", "issue #"]
    assert all(CITATION.search(text) for text in cited)
    assert not any(CITATION.search(text) for text in clean)


def test_no_file_outside_the_list_cites_a_document_the_repository_lacks() -> None:
    offending = [
        citation
        for path in _scanned()
        if path.relative_to(ROOT).as_posix() not in STILL_CITING
        for citation in _citations(path)
    ]
    assert not offending, (
        "these lines cite an issue or a document that is not in the repository; cite docs/ "
        "(docs/architecture.md or the topic document) or a public specification instead:\n"
        + "\n".join(offending)
    )


def test_the_list_only_holds_files_that_still_cite() -> None:
    stale = sorted(
        name for name in STILL_CITING if not (ROOT / name).is_file() or not _citations(ROOT / name)
    )
    assert not stale, (
        f"these files no longer cite anything outside the repository: remove them from "
        f"STILL_CITING in {Path(__file__).name}: {stale}"
    )
