"""A stdio server's stderr log is redacted a line at a time: a secret split across two reads
of the pipe is still found (docs/gateway.md, "Secrets")."""

from __future__ import annotations

import io

from sagents.core._secrets import Redactor
from sagents.mcp._stdio import CappedLog

SECRET = "split-secret-value-1"


def test_a_secret_split_across_reads_is_redacted_and_the_last_partial_line_is_kept() -> None:
    out = io.StringIO()
    log = CappedLog(out, Redactor({"S": SECRET}))
    log.write("first line " + SECRET[:7])
    log.write(SECRET[7:] + " end\nlast words " + SECRET[:3])
    log.write(SECRET[3:])
    log.finish()
    assert out.getvalue() == "first line [redacted:S] end\nlast words [redacted:S]"


def test_without_secrets_text_is_written_as_it_comes() -> None:
    out = io.StringIO()
    log = CappedLog(out, Redactor())
    log.write("no newline yet")
    assert out.getvalue() == "no newline yet"
