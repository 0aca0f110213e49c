"""run_script's limits (docs/run_script.md): :class:`ScriptLimits`, the one runtime value.

The ``scripts`` settings block is validated once, at the config boundary
(:class:`sagents.config._models.ScriptsParams`), and a loaded config carries its limits as
``SagentsConfig.scripts``. ``ScriptsParams`` is re-exported here because docs/run_script_session.md
named this path; use :mod:`sagents.config._models` in new code.
"""

from __future__ import annotations

from sagents.config._models import ScriptsParams
from sagents.core._limits import ScriptLimits

__all__ = ["ScriptLimits", "ScriptsParams"]
