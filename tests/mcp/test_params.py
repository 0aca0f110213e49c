import pytest
from mcp import StdioServerParameters
from mcp.server.mcpserver import MCPServer

from sagents.mcp import (
    ServerSettings,
    SseServerParameters,
    StreamableHttpServerParameters,
    describe_params,
)


def test_api_key_becomes_a_bearer_header_unless_one_is_given() -> None:
    plain = StreamableHttpServerParameters(url="http://h/mcp", api_key="k")
    given = SseServerParameters(
        url="http://h/sse", headers={"authorization": "Basic x"}, api_key="k"
    )
    assert plain.effective_headers == {"Authorization": "Bearer k"}
    assert given.effective_headers == {"authorization": "Basic x"}


def test_descriptions_never_show_secrets() -> None:
    remote = StreamableHttpServerParameters(url="http://h/mcp", api_key="s3cret")
    local = StdioServerParameters(command="srv", args=["--x"], env={"TOKEN": "s3cret"})
    assert describe_params(remote) == "http: http://h/mcp"
    assert describe_params(local) == "stdio: srv --x"
    assert describe_params(MCPServer("inproc")) == "in-process: inproc"
    assert "s3cret" not in repr(remote)


@pytest.mark.parametrize(
    ("field", "value"),
    [("connect_timeout", 0), ("call_timeout", -1.0), ("max_concurrency", 0), ("list_timeout", -2)],
)
def test_nonsense_settings_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        ServerSettings(**{field: value})  # type: ignore[arg-type]
