"""sagents.script: run_script, model-written scripts that call many tools in one turn.

The host side lives here (policy, dispatcher, records, runner); the guest helper, stdlib only,
is ``sagents/script/_guest/agent_tools.py`` and the wire format is :mod:`sagents.script._protocol`.
Floor 4 of ``docs/architecture.md`` ("Layers"), which also draws one run; see
``docs/run_script.md``.
"""

from sagents.config._models import ScriptsParams
from sagents.core._limits import ScriptLimits
from sagents.script._description import (
    run_script_description,
    run_script_spec,
    should_offer_run_script,
)
from sagents.script._dispatcher import CallTool, ScriptDispatcher
from sagents.script._launcher import Launcher, LaunchSpec, PlainLauncher, ScriptProcess
from sagents.script._policy import ScriptPlan, plan_script
from sagents.script._records import ScriptRecords, mark_interrupted_runs
from sagents.script._runner import ScriptRunner
from sagents.script._runtime import ScriptRuntime, install_runtime
from sagents.script._sandbox_launcher import SandboxLauncher, SandboxScriptProcess
from sagents.script._session import RunScriptSettings, RunScriptTool
from sagents.script._values import (
    ScriptHandle,
    ScriptProgressUpdate,
    ScriptRequest,
    ScriptRunResult,
    ScriptStatus,
)

__all__ = [
    "CallTool",
    "LaunchSpec",
    "Launcher",
    "PlainLauncher",
    "RunScriptSettings",
    "RunScriptTool",
    "SandboxLauncher",
    "SandboxScriptProcess",
    "ScriptDispatcher",
    "ScriptHandle",
    "ScriptLimits",
    "ScriptPlan",
    "ScriptProcess",
    "ScriptProgressUpdate",
    "ScriptRecords",
    "ScriptRequest",
    "ScriptRunResult",
    "ScriptRunner",
    "ScriptRuntime",
    "ScriptStatus",
    "ScriptsParams",
    "install_runtime",
    "mark_interrupted_runs",
    "plan_script",
    "run_script_description",
    "run_script_spec",
    "should_offer_run_script",
]
