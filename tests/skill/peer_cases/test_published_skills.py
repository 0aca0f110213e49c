"""Front-matter shapes of the published skills in anthropics/skills, run through the parser.

Source: anthropics/skills, ``skills/*/SKILL.md`` (17 skills; the shapes below are those skills'
front matter with descriptions shortened). All 17 published skills load with sagents; the one
problem is ``skills/claude-api/SKILL.md``, whose description is 1068 characters long, over the
specification's 1024, which the reference validator reports too (see docs/tool-schema.md).
"""

from pathlib import Path

import pytest

from sagents.skill._parser import parse_skill_dir

SHAPES = {
    # skills/pdf/SKILL.md: plain description, a license sentence with a period
    "pdf": (
        "name: pdf\n"
        "description: Use this skill whenever the user wants to do anything with PDF files. "
        "If the user mentions a .pdf file or asks to produce one, use this skill.\n"
        "license: Proprietary. LICENSE.txt has complete terms"
    ),
    # skills/docx/SKILL.md: a double-quoted description holding colons and single quotes
    "docx": (
        "name: docx\n"
        'description: "Use this skill whenever the user wants to create Word documents. '
        "Triggers include: any mention of 'Word doc', '.docx'.\"\n"
        "license: Proprietary. LICENSE.txt has complete terms"
    ),
    # skills/claude-api/SKILL.md: a block scalar (|-) over several lines, with an em dash
    "claude-api": (
        "name: claude-api\n"
        "description: |-\n"
        "  Reference for the Claude API / Anthropic SDK — model ids, pricing, params.\n"
        "  TRIGGER — read BEFORE opening the target file: whenever the prompt names Claude.\n"
        "license: Complete terms in LICENSE.txt"
    ),
    # skills/mcp-builder/SKILL.md: parentheses and slashes in a plain scalar
    "mcp-builder": (
        "name: mcp-builder\n"
        "description: Guide for creating MCP (Model Context Protocol) servers, whether in "
        "Python (FastMCP) or Node/TypeScript (MCP SDK).\n"
        "license: Complete terms in LICENSE.txt"
    ),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_published_skill_shapes_load_without_problems(tmp_path: Path, name: str) -> None:
    skill_dir = tmp_path / name
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_text(f"---\n{SHAPES[name]}\n---\n# {name}\n", encoding="utf-8")
    load = parse_skill_dir(skill_dir)
    assert load.skill is not None
    assert load.skill.name == name
    assert load.skill.license
    assert [p for p in load.problems if p.severity != "warning"] == []
    assert "\n" in load.skill.description or name != "claude-api"  # the block scalar kept
