"""The conformance suite's 2026-07-28 and extension scenarios against ``sagents serve``.

Runs the pre-release suite that has them (``conformance-next`` in tests/peers/package.json,
installed by scripts/setup-peers.sh) on the Node 22 of ``.peers``: the 2026-07-28 scenarios
against tests/gateway/fixtures/conformance.json, the Tasks and Skills scenarios against
tests/gateway/fixtures/conformance_ext.json (its fixture tools, skills and a 0.8 s
``backgroundCalls.autoAfterSec``). Results and the scenarios left failing are in
docs/gateway.md ("Conformance").
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.gateway.test_peer_clients import (
    FIXTURES,
    NODE_DIR,
    conformance_results,
    http_serve,
    run_node,
)

pytestmark = pytest.mark.anyio

SUITE = Path(  # another install of the same suite can be named (a checkout, a newer release)
    os.environ.get("SAGENTS_CONFORMANCE_NEXT", NODE_DIR / "conformance-next" / "dist" / "index.js")
)

PASSING_2026 = {
    "tools-list",
    "prompts-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "server-sse-multiple-streams",
    "resources-list",
    "dns-rebinding-protection",
    "http-header-validation",
    "sep-2164-resource-not-found",
    "input-required-result-ignore-extra-params",
    "input-required-result-missing-input-response",
    "input-required-result-unsupported-methods",
    "input-required-result-validate-input",
}
PASSING_EXTENSIONS = {
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "sep-2640-skills-directory",
    "tasks-capability-negotiation",
    "tasks-dispatch-and-envelope",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-request-state-removal",
    "tasks-wire-fields",
}


def _suite() -> str:
    if not SUITE.is_file():
        pytest.skip(f"{SUITE} is missing: run scripts/setup-peers.sh")
    return str(SUITE)


async def test_the_2026_07_28_scenarios_that_pass_keep_passing(tmp_path: Path) -> None:
    suite, out = _suite(), tmp_path / "results"
    config = FIXTURES / "conformance.json"
    async with http_serve("--config", str(config), "--mode", "auto") as url:
        options = ["--suite", "all", "--spec-version", "2026-07-28", "-o", str(out)]
        await run_node(suite, "server", "--url", url, *options)
    passed, failed = conformance_results(out)
    missing = PASSING_2026 - passed
    assert not missing, {name: failed.get(name, "not run") for name in missing}


async def test_the_tasks_and_skills_scenarios_pass(tmp_path: Path) -> None:
    suite, out = _suite(), tmp_path / "results"
    config = FIXTURES / "conformance_ext.json"
    async with http_serve("--config", str(config), "--mode", "auto") as url:
        for scenario in sorted(PASSING_EXTENSIONS):
            await run_node(suite, "server", "--url", url, "--scenario", scenario, "-o", str(out))
    passed, failed = conformance_results(out)
    missing = PASSING_EXTENSIONS - passed
    assert not missing, {name: failed.get(name, "not run") for name in missing}
