"""sagents.script: run_script, model-written scripts that call many tools in one turn.

The host side lives here (policy, dispatcher, records, runner); the guest helper, stdlib only,
is ``sagents/script/guest/agent_tools.py`` and the wire format is :mod:`sagents.script.protocol`.
Floor 4 of ``docs/architecture.md`` ("Layers"), which also draws one run; see
``docs/run_script.md``.
"""

from sagents.script.description import (
    run_script_description,
    run_script_spec,
    should_offer_run_script,
)
from sagents.script.dispatcher import CallTool, ScriptDispatcher
from sagents.script.launcher import Launcher, LaunchSpec, PlainLauncher, ScriptProcess
from sagents.script.policy import ScriptPlan, plan_script
from sagents.script.records import ScriptRecords, mark_interrupted_runs
from sagents.script.runner import ScriptRunner
from sagents.script.runtime import ScriptRuntime, install_runtime
from sagents.script.sandbox_launcher import SandboxLauncher, SandboxScriptProcess
from sagents.script.session import RunScriptSettings, RunScriptTool
from sagents.script.settings import ScriptLimits, ScriptsParams
from sagents.script.values import (
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
