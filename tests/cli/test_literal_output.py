"""Model-written text reaches a person literally: terminal prompts, progress, elicitation
messages, logs (no Rich markup applied, control characters escaped), and the terminal approval
prompt shows every script line whole."""

from __future__ import annotations

import io
import logging

import mcp_types as mt
import pytest
from rich.console import Console

from sagents.cli._run_script import setup_logging
from sagents.cli._script_host import LiveProgress, NoTerminalApprover
from sagents.cli.terminal_approval import TerminalApprover
from sagents.core._literal import LiteralFormatter, printable
from sagents.errors import NotAllowedError
from sagents.gateway._approval import ClientScriptApprover, approval_form
from sagents.script._values import ScriptProgressUpdate
from sagents.tool._approval import ApprovalAnswer, ApprovalRequest, DenyAllApprover, denial_reason

MARKUP = "[bold red]SAFE[/]"
CONTROLS = "\x1b[2J\x1b]0;owned\x07\r\u202e"
ESCAPED = "\\x1b[2J\\x1b]0;owned\\x07\\x0d\\u202e"


def test_printable_escapes_controls_and_keeps_markup_newlines_and_tabs() -> None:
    assert printable(f"{MARKUP}\t{CONTROLS}\nnext") == f"{MARKUP}\t{ESCAPED}\nnext"
    assert printable("a\nb", newlines=False) == "a\\x0ab"
    assert printable("plain ünïcode ✓") == "plain ünïcode ✓"
    assert printable("bad\udcff.txt") == "bad\\udcff.txt"  # an undecodable file name


def _approve_on(console: Console, request: ApprovalRequest) -> ApprovalAnswer:
    import anyio

    async def main() -> ApprovalAnswer:
        return await TerminalApprover(console=console, ask=lambda prompt: "d").approve(request)

    return anyio.run(main)


def test_the_terminal_approver_shows_the_description_and_tools_literally() -> None:
    screen = io.StringIO()
    request = ApprovalRequest.for_script(
        ("fleet__set[/]",), "print(1)\n", description=MARKUP + CONTROLS
    )
    _approve_on(Console(file=screen, force_terminal=True, width=120), request)
    shown = screen.getvalue()
    assert MARKUP + ESCAPED in shown
    assert "fleet__set[/]" in shown
    for control in ("\x1b[2J", "\x1b]0;", "\x07", "\u202e"):
        assert control not in shown


def test_the_terminal_approver_wraps_long_script_lines_instead_of_cutting_them() -> None:
    screen = io.StringIO()
    line = "# " + "word " * 40 + "THE_END_OF_THE_LINE"
    script = f"print(1)\n{line}\nx = '{CONTROLS}'\n"
    request = ApprovalRequest.for_script(("fleet__set",), script, description="")
    _approve_on(Console(file=screen, width=80), request)
    shown = screen.getvalue()
    assert "THE_END_OF_THE_LINE" in shown
    assert all(len(row) <= 80 for row in shown.splitlines())
    assert ESCAPED in shown
    assert "\x1b" not in shown


def test_the_progress_bar_shows_the_scripts_message_literally() -> None:
    screen = io.StringIO()
    update = ScriptProgressUpdate(
        script_id="s", tool_call_id=None, calls=1, failures=0, done=None, total=None,
        message=MARKUP + CONTROLS, elapsed_s=0.0, status="running",
    )  # fmt: skip
    with LiveProgress(console=Console(file=screen, force_terminal=True, width=200)) as live:
        live.update(update)
    shown = screen.getvalue()
    assert MARKUP in shown
    assert "\x1b[2J" not in shown
    assert "\u202e" not in shown


def test_elicitation_messages_carry_no_control_characters() -> None:
    message, _ = approval_form(
        ApprovalRequest.for_tool_call(
            "t", {"note": "x\u202ey\x9b"}, permission="write", session_id="s"
        )
    )
    assert "\u202e" not in message
    assert "\x9b" not in message
    assert "\\u202e" in message


def test_logs_show_model_text_literally_on_one_line() -> None:
    record = logging.LogRecord(
        "sagents.x", logging.WARNING, __file__, 1, "tool %r failed: %s", ("a\x1b[31m", "l1\nl2"),
        None,
    )  # fmt: skip
    line = LiteralFormatter("sagents: %(message)s").format(record)
    assert line == "sagents: tool 'a\\x1b[31m' failed: l1\\x0al2"


def test_the_command_lines_log_handler_is_literal(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger("sagents")
    saved = list(root.handlers)
    root.handlers.clear()
    try:
        setup_logging()
        logging.getLogger("sagents.test").warning("server %s: %s", "[red]x[/]", "\x1b[2J")
    finally:
        root.handlers[:] = saved
    err = capsys.readouterr().err
    assert "sagents: server [red]x[/]: \\x1b[2J" in err


def test_denials_say_whether_anybody_was_asked() -> None:
    request = ApprovalRequest.for_script(("fleet__set",), "", description="")
    assert "nobody was asked" in denial_reason(NoTerminalApprover(), request)
    assert "needs a terminal" in denial_reason(NoTerminalApprover(), request)
    assert "nobody was asked" in denial_reason(DenyAllApprover(), request)
    terminal = TerminalApprover(console=Console(file=io.StringIO()), ask=lambda p: "d")
    assert "the user denied" in denial_reason(terminal, request)
    assert "elicitation" in denial_reason(ClientScriptApprover(), request)  # no client call

    class Silent:
        async def approve(self, request: ApprovalRequest) -> str:
            return "deny"

    assert denial_reason(Silent(), request) == "the write tools fleet__set were not approved"


def test_sagents_tools_tables_show_server_text_literally() -> None:
    from sagents.cli._tools import _print_rich

    screen = io.StringIO()
    listing = {
        "tools": [
            {"name": "s__t", "server": "s", "permission": "read_only", "status": "ready",
             "description": MARKUP + "\x1b[2J"},
        ],
        "servers": [
            {"name": "s", "state": "failed", "transport": "stdio", "tools": [],
             "last_error": "[red]boom[/red]", "withheld": []},
        ],
    }  # fmt: skip
    _print_rich(Console(file=screen, force_terminal=True, width=200), listing)
    shown = screen.getvalue()
    assert MARKUP in shown
    assert "[red]boom[/red]" in shown
    assert "\x1b[2J" not in shown


def test_a_client_that_cannot_carry_the_request_was_not_asked() -> None:
    import anyio
    from mcp.shared.exceptions import NoBackChannelError

    from sagents.gateway._approval import ClientAsker
    from tests.gateway.fakes import in_a_call_asking

    class Unreachable(ClientAsker):
        def __init__(self) -> None:
            pass

        @property
        def can_ask(self) -> bool:
            return True

        async def choose(self, message: str, schema: mt.ElicitRequestedSchema) -> mt.ElicitResult:
            raise NoBackChannelError("no back channel")

    request = ApprovalRequest.for_script(("fleet__set",), "", description="")

    async def main() -> None:
        with in_a_call_asking(Unreachable()):
            await ClientScriptApprover().approve(request)

    # nobody was asked: the approver refuses with that reason itself (the runner records it)
    with pytest.raises(NotAllowedError) as refused:
        anyio.run(main)
    assert refused.value.message.startswith("nobody was asked")
