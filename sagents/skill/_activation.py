"""Holding a session to a skill's ``allowed-tools`` while the skill is active (docs/skills.md).

Activation narrows the session's ``ToolProxy`` whitelist through ``ToolProxy.restrict(names)``,
which only ever narrows: activating a second skill with ``allowed-tools`` leaves the intersection,
and leaving a skill means building a new ``ToolProxy`` for the session (there is no widening
call, by design, so a model cannot talk its way out of a restriction). A skill without
``allowed-tools`` restricts nothing. Tools the host always needs (``load_skill`` itself, for
instance) are passed as ``always_allowed`` and stay callable if the proxy already allowed them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

from sagents.skill._schema import SkillSchema

__all__ = ["ToolRestrictor", "activate_skill"]

logger = logging.getLogger(__name__)


class ToolRestrictor(Protocol):
    """The part of ``sagents.tool.ToolProxy`` that activation needs."""

    def restrict(self, names: Iterable[str]) -> object:
        """Narrow the whitelist to ``names`` (intersected with what is already allowed)."""
        ...


def activate_skill(
    proxy: ToolRestrictor, skill: SkillSchema, *, always_allowed: Iterable[str] = ()
) -> frozenset[str] | None:
    """Hold the session's tool proxy to ``skill``'s ``allowed-tools``.

    Args:
        proxy: The session's ``ToolProxy`` (anything with ``restrict``).
        skill: The skill being activated.
        always_allowed: Tool names to keep callable whatever the skill says (host plumbing such
            as ``load_skill``); they are still subject to the proxy's own whitelist.

    Returns:
        The names passed to ``restrict``, or ``None`` when the skill has no ``allowed-tools``
        (nothing was restricted).
    """
    if skill.allowed_tools is None:
        return None
    names = frozenset(skill.allowed_tools) | frozenset(always_allowed)
    proxy.restrict(sorted(names))
    logger.info("skill %r active: tools restricted to %s", skill.name, sorted(names))
    return names
