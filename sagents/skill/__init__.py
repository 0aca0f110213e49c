"""Agent Skills: parsing and validation, ``SkillManager``, ``SkillProxy``, progressive disclosure,
``allowed-tools`` activation and ``SandboxSkillManager`` (see docs/skills.md and the Agent
Skills specification, https://agentskills.io/specification). Floor 4 of
``docs/architecture.md`` ("Layers").

Usage::

    from sagents.skill import SkillManager, SkillProxy

    skill_manager = SkillManager()
    skill_manager.add_skill_dir("/path/to/skills_root")
    session_skills = SkillProxy(skill_manager, available_skills=["my_skill"])
"""

from sagents.skill._activation import ToolRestrictor, activate_skill
from sagents.skill._disclosure import (
    LoadedSkill,
    count_tokens,
    load_skill,
    read_skill_resource,
    render_skills_prompt,
)
from sagents.skill._manager import SkillManager
from sagents.skill._parser import SkillLoad, parse_skill_dir
from sagents.skill._proxy import SkillProxy, SkillSource
from sagents.skill._sandbox_sync import (
    DEFAULT_SANDBOX_SKILLS_ROOT,
    SandboxFiles,
    SandboxSkillManager,
    SkillProjection,
    SyncOutcome,
)
from sagents.skill._schema import ProblemSeverity, SkillProblem, SkillSchema, SourceForm
from sagents.skill._session import SkillSession
from sagents.skill._skill_tool import LOAD_SKILL_SPEC, READ_SKILL_FILE_SPEC, SkillTools

__all__ = [
    "DEFAULT_SANDBOX_SKILLS_ROOT",
    "LOAD_SKILL_SPEC",
    "READ_SKILL_FILE_SPEC",
    "LoadedSkill",
    "ProblemSeverity",
    "SandboxFiles",
    "SandboxSkillManager",
    "SkillLoad",
    "SkillManager",
    "SkillProblem",
    "SkillProjection",
    "SkillProxy",
    "SkillSchema",
    "SkillSession",
    "SkillSource",
    "SkillTools",
    "SourceForm",
    "SyncOutcome",
    "ToolRestrictor",
    "activate_skill",
    "count_tokens",
    "load_skill",
    "parse_skill_dir",
    "read_skill_resource",
    "render_skills_prompt",
]
