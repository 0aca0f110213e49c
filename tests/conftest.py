"""Shared fixtures. Async tests run on asyncio through the anyio pytest plugin.

The whole session writes its data (audit store, script runtime, MCP server logs) under a
temporary directory, never into the user's home; under pytest-xdist each worker is a session of
its own, with its own directory.

Tests of the modules and node ids in :data:`SLOW` are marked ``slow``: they start real
sandboxes, the installed ``sagents`` command, Node clients or many server processes.
``scripts/test.sh --fast`` (``pytest -m "not slow"``) leaves them out.

Under pytest-xdist's ``--dist loadscope`` each module goes to one worker, handed out in the
order of the collection: the modules of :data:`COSTLY` first (heaviest first), then those with
slow-tier tests, then the rest, most tests first. pytest-xdist's own reordering (most tests
first, ``--loadscope-reorder``) is turned off: it put the few-test modules that start real
gateways and peers last, where one of them kept a single worker busy long after the others
had finished.

Property tests (hypothesis) take their example count from a settings profile, not from each test:
``ci`` (the default, what ``scripts/test.sh`` and CI run), ``dev`` (a quick local pass) and
``thorough`` (ten times ``ci``: run it after changing a tested area). Choose one with
``pytest --hypothesis-profile=NAME`` or ``SAGENTS_HYPOTHESIS_PROFILE=NAME``. A test whose every
example starts an event loop or walks a large value states its own, lower count.

The test session writes its bytecode caches even where ``PYTHONDONTWRITEBYTECODE`` is set:
pytest keeps each test module's rewritten asserts there, and rewriting all of them again cost
each pytest-xdist worker about 9 CPU seconds of its collection, every run (the processes the
tests start keep the environment's setting).
"""

import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.postgres_server import SKIP_REASON, PostgresServer, find_bin_dir, postgres_server

sys.dont_write_bytecode = False  # before the test modules are imported: see above

SLOW = frozenset(
    {
        "tests/agent/test_traces.py",
        "tests/agent/test_durable_web_example.py",
        "tests/agent/test_store_outage_runs.py",
        "tests/gateway/test_approval_restart.py",
        "tests/gateway/test_restart.py::test_a_background_run_killed_with_the_gateway_is_reported_after_restart",
        "tests/mcp/test_shutdown.py::test_sagents_serve_closes_its_upstreams_in_order_on_a_signal",
        "tests/mcp/test_shutdown.py::test_sagents_serve_answers_initialize_while_four_upstreams_are_still_starting",
        "tests/cli/test_chat_resume.py::test_a_chat_killed_while_it_asked_resumes_the_waiting_call_and_runs_it_once",
        "tests/cli/test_chat_resume.py::test_a_resumed_chat_may_deny_the_waiting_call_and_it_never_runs",
        "tests/cli/test_chat_resume.py::test_ctrl_c_at_the_approval_prompt_cancels_the_turn_and_leaves_nothing_waiting",
        "tests/cli/test_chat_resume.py::test_a_questionnaire_on_the_terminal_pauses_the_run_and_its_answer_continues_it",
        "tests/cli/test_help_layout.py::test_each_commands_help_is_clicks_plain_layout_without_rich",
        "tests/gateway/test_oauth_upstream.py::test_through_the_gateway_each_oauth_user_reaches_the_upstream_with_their_own_login",
        "tests/gateway/test_oauth_upstream.py::test_no_token_nor_client_secret_reaches_the_gateways_files_or_its_clients",
        "tests/gateway/test_definition_pins.py::test_sagents_tools_changes_shows_the_diff_and_accept_takes_it",
        "tests/gateway/console/test_console_browser.py",
        "tests/test_readme.py",
        "tests/cli/test_demo_cli.py",
        "tests/agent/test_conformance.py::test_a_run_script_turn_calls_the_tools_and_sends_the_result_back",
        "tests/cli/test_git_history_example.py",
        "tests/cli/test_run_script_cli.py",
        "tests/cli/test_run_script_terminal.py",
        "tests/cli/test_call_cli.py::test_on_a_terminal_a_destructive_call_is_asked_and_runs_when_allowed",
        "tests/cli/test_tools_cli.py::test_the_installed_command_exits_1_for_an_error_result",
        "tests/cli/test_workspace_option.py::test_serve_creates_a_missing_workspace_and_says_so",
        "tests/gateway/chat/test_console_chat.py::test_sagents_serve_serves_the_chat_of_its_agent_section",
        "tests/gateway/test_approval_decided_once.py",
        "tests/gateway/test_approval_rendering.py",
        "tests/gateway/test_conformance_2026.py",
        "tests/gateway/test_gateway_run_script.py",
        "tests/gateway/test_git_history_serve.py",
        "tests/gateway/test_oauth.py",
        "tests/gateway/test_oauth_keys.py",
        "tests/gateway/test_peer_clients.py",
        "tests/gateway/test_reload.py",
        "tests/gateway/test_replicas.py",
        "tests/gateway/test_replicas_audit.py",
        "tests/gateway/test_sandboxed_egress.py",
        "tests/gateway/test_serve_cli.py",
        "tests/gateway/test_session_lifetime.py::test_sequential_http_sessions_leave_the_serve_tree_as_the_first_one_left_it",
        "tests/gateway/test_session_lifetime.py::test_sessions_that_drop_their_connection_are_released_once_idle",
        "tests/gateway/test_session_lifetime.py::test_removing_the_workspace_of_a_live_session_does_not_end_the_gateway",
        "tests/gateway/test_stdin_lines.py",
        "tests/gateway/test_forwarded_progress.py::test_sagents_serve_asks_its_upstream_for_progress_only_for_a_client_that_asked",
        "tests/gateway/test_stdio_transport.py::test_sagents_serve_ends_cleanly_when_its_client_closes_stdout",
        "tests/gateway/test_stdio_transport.py::test_odd_and_invalid_lines_get_the_answers_of_the_sdks_stdio_server",
        "tests/gateway/test_stdio_transport.py::test_stray_output_of_a_handler_on_fd_1_goes_to_stderr_not_to_the_wire",
        "tests/gateway/test_stdio_transport.py::test_a_client_that_closes_the_servers_stdout_ends_it_cleanly",
        "tests/gateway/test_tool_search.py::test_sagents_serve_tool_search_over_stdio_with_the_fleet_server",
        "tests/mcp/test_sandbox_examples.py",
        "tests/mcp/test_sandbox_npx_uvx.py",
        "tests/mcp/test_sandboxed.py",
        "tests/mcp/test_stdio_faults.py",
        "tests/sandbox/test_egress.py",
        "tests/sandbox/test_escape.py",
        "tests/script/test_fleet_example.py",
        "tests/script/test_sandbox_launcher.py",
    }
)
"""Modules (``path``) and tests (``path::name``) of the slow tier."""

COSTLY = (
    "tests/agent/test_conformance.py",
    "tests/gateway/test_console_approval_restart.py",
    "tests/agent/test_store_outage_runs.py",
    "tests/tool/impl/test_memory_todo.py",
    "tests/cli/test_run_script_cli.py",
    "tests/mcp/test_sandboxed.py",
    "tests/gateway/test_approval_restart.py",
    "tests/gateway/test_oauth_upstream.py",
    "tests/gateway/test_conformance_2026.py",
    "tests/test_readme.py",
    "tests/cli/test_chat_resume.py",
    "tests/mcp/test_stdio_faults.py",
    "tests/agent/test_servers.py",
    "tests/gateway/test_gateway_builtins.py",
    "tests/gateway/test_store_outage.py",
    "tests/gateway/test_resource_subscriptions.py",
    "tests/agent/test_server_loops.py",
    "tests/agent/test_idle_timeout_calls.py",
    "tests/gateway/test_forwarded_call.py",
    "tests/gateway/test_session_lifetime.py",
    "tests/agent/test_durable_web_example.py",
    "tests/cli/test_first_use_cli.py",
    "tests/gateway/chat/test_chat_browser.py",
    "tests/gateway/test_upstream_skills.py",
    "tests/cli/test_chat_terminal.py",
    "tests/script/test_session.py",
    "tests/cli/test_demo_cli.py",
    "tests/cli/test_call_cli.py",
    "tests/gateway/chat/test_console_chat.py",
    "tests/agent/test_pause_resume.py",
)
"""The 30 modules that took longest in a measured full run (``pytest -n 4 --dist loadscope
--durations=0``, set-up, call and tear-down summed per module), heaviest first: handed to the
workers first, so that none of them is left to run alone at the end. A stale entry costs time,
never coverage."""


# No deadline in any profile: a loaded machine (the suite runs in parallel on shared cores) makes
# an example's time say nothing about the code.
settings.register_profile("ci", max_examples=100, deadline=None)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("SAGENTS_HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    """Keep the module order :func:`pytest_collection_modifyitems` gives (pytest-xdist's
    ``--no-loadscope-reorder``; the option exists only where pytest-xdist is loaded)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SLOW` ``slow``; order the modules costliest first (each
    module's tests keep their order)."""
    tests: dict[str, int] = {}
    slow: set[str] = set()
    for item in items:
        module = _module_of(item)
        tests[module] = tests.get(module, 0) + 1
        base = item.nodeid.split("[", 1)[0]
        if module in SLOW or base in SLOW:
            item.add_marker(pytest.mark.slow)
            slow.add(module)
    costly = {module: rank for rank, module in enumerate(COSTLY)}

    def cost_order(item: pytest.Item) -> tuple[int, int]:
        module = _module_of(item)
        if module in costly:
            return (0, costly[module])
        return (1 if module in slow else 2, -tests[module])

    items.sort(key=cost_order)  # stable: modules of one rank keep the collection's order


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _isolated_data_dirs() -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in ("SAGENTS_DATA_DIR", "XDG_STATE_HOME")}
    with tempfile.TemporaryDirectory(prefix="sagents-tests-") as root:
        os.environ["SAGENTS_DATA_DIR"] = os.path.join(root, "data")
        os.environ["XDG_STATE_HOME"] = os.path.join(root, "state")
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _utf8_safe(text: str) -> str:
    """``text`` with lone surrogates (undecodable file names, ``surrogateescape``) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Captured output and logs that hold undecodable file names (tests of hostile input) are
    made valid UTF-8: pytest-xdist must send each report from its worker as UTF-8."""
    report = yield
    report.sections = [(title, _utf8_safe(content)) for title, content in report.sections]
    return report


def _cpu_seconds() -> float:
    """CPU time (user and system) of this process and of its children it has waited for."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """With ``SAGENTS_TEST_CPU_LOG=FILE``, append each test's CPU seconds and node id to FILE
    (set-up and tear-down included, with the subprocesses it waited for). On a loaded machine a
    test's wall time says little; its CPU time is what the suite's time is made of."""
    log = os.environ.get("SAGENTS_TEST_CPU_LOG")
    if not log:
        return (yield)
    before = _cpu_seconds()
    try:
        return (yield)
    finally:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{_cpu_seconds() - before:.2f} {item.nodeid}\n")


def _new_postgres() -> Iterator[PostgresServer]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip(SKIP_REASON)
    with postgres_server(bin_dir) as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test session (skipped where the binaries are missing)."""
    yield from _new_postgres()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """The URI of a new, empty database on :func:`postgres`."""
    return postgres.new_database()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this test alone, which the test may stop and start (outages)."""
    yield from _new_postgres()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a file system of its own, 512 KiB (a tmpfs), for full-disk tests."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the full-disk tests needs root")
    mount = tmp_path / "small-disk"
    mount.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(mount)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], capture_output=True, timeout=30)
