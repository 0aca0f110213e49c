"""A profile's ``resources`` patterns hold against URIs written to escape them
(docs/gateway.md, "Prompts, resources and completion"): every URI is normalised before any
match, dot-segments and encoded separators are refused, ``*`` never crosses ``/``."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import mcp_types as mt
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from sagents.errors import ConfigError
from sagents.gateway._factory import open_gateway
from sagents.gateway._resource_policy import normalised_uri, resource_offered
from sagents.gateway._settings import load_profiles
from tests.gateway.test_forwarding import settings_for, write_config

pytestmark = pytest.mark.anyio

PUBLIC = frozenset({"file:///public/*"})
ESCAPES = [
    "file:///public/../private/secret.txt",
    "file:///public/%2e%2e/private/x",
    "file:///public/%2E%2E/private/x",
    "file:///public/.%2e/private/x",
    "file:///public/./x",
    "file:///public/a%2Fb",
    "file:///public/a%2fb",
    "file:///public/a%5Cb",
    "file:///public/a\\b",
    "file:///public/a%2F..%2Fprivate",
]


@pytest.mark.parametrize("uri", ESCAPES)
def test_dot_segments_and_encoded_separators_are_refused_whatever_the_pattern(uri: str) -> None:
    with pytest.raises(ValueError, match=r"segment|separator"):
        normalised_uri(uri)
    assert not resource_offered(PUBLIC, uri)
    assert not resource_offered(frozenset({"**"}), uri)
    assert not resource_offered(None, uri)


# A gateway URI's query is its upstream URI's path when that URI holds a '?' or '#': an upstream
# that reads its URI as a path (``Path(uri.removeprefix("file://")).resolve()``) walks these.
QUERY_ESCAPES = [
    "file:///public/a?/../../private/secret.txt",
    "file:///public/a#/../../private/secret.txt",
    "file:///public/a?x=%2F..%2Fprivate",
    "sagents://upstream/files/file:///public/a?/../../private/secret.txt",
    "sagents://upstream/files/file:///public/a#/../private/secret.txt",
]


@pytest.mark.parametrize("uri", QUERY_ESCAPES)
def test_dot_segments_after_a_query_or_fragment_mark_are_refused_too(uri: str) -> None:
    with pytest.raises(ValueError, match=r"segment|separator"):
        normalised_uri(uri)
    assert not resource_offered(frozenset({"file:///public/**", "sagents://**"}), uri)


def test_a_query_without_dot_segments_is_kept() -> None:
    assert normalised_uri("note://items/a?page=2#top") == "note://items/a?page=2#top"


def test_a_star_never_crosses_a_slash_and_a_double_star_does() -> None:
    assert resource_offered(PUBLIC, "file:///public/a.txt")
    assert not resource_offered(PUBLIC, "file:///public/sub/a.txt")
    assert not resource_offered(PUBLIC, "file:///publicity/a.txt")
    assert resource_offered(frozenset({"file:///public/**"}), "file:///public/sub/a.txt")
    assert resource_offered(frozenset({"file:///public/**/*.txt"}), "file:///public/a.txt")
    assert not resource_offered(frozenset({"file:///public/?"}), "file:///public//")


def test_an_empty_segment_is_never_a_single_star_s_segment() -> None:
    """An upstream that reads ``a//b`` as ``a/b`` would read a resource the pattern does not
    name; ``**``, which names any depth, still spans empty segments (nested upstream URIs hold
    ``://``)."""
    middle = frozenset({"file:///public/*/notes.txt"})
    assert resource_offered(middle, "file:///public/team/notes.txt")
    assert not resource_offered(middle, "file:///public//notes.txt")
    assert not resource_offered(PUBLIC, "file:///public/")
    assert not resource_offered(PUBLIC, "file:///public//")
    assert resource_offered(frozenset({"file:///public/*.txt"}), "file:///public/.txt")
    deep = frozenset({"file:///public/**/notes.txt"})
    assert resource_offered(deep, "file:///public//notes.txt")
    assert resource_offered(deep, "file:///public/notes.txt")
    nested = frozenset({"sagents://upstream/files/**"})
    assert resource_offered(nested, "sagents://upstream/files/file:///public/a.txt")
    assert resource_offered(
        frozenset({"sagents://upstream/notes/note://*"}), "sagents://upstream/notes/note://a"
    )


def test_unreserved_characters_are_decoded_before_the_match() -> None:
    assert normalised_uri("file:///public/%61%7E.txt") == "file:///public/a~.txt"
    assert normalised_uri("FILE:///public/a%2cb") == "file:///public/a%2Cb"
    assert resource_offered(frozenset({"file:///public/a.txt"}), "file:///public/%61.txt")


def test_a_resources_pattern_that_cannot_be_compiled_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "sagents.json"
    document = {"mcpServers": {}, "profiles": {"p": {"resources": ["file:///[z-a]"]}}}
    config.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_profiles(config)
    assert refused.value.details["key"] == "profiles.p.resources"
    assert "invalid glob pattern" in str(refused.value)


async def test_a_gateway_refuses_uris_that_escape_a_profiles_pattern(tmp_path: Path) -> None:
    """The "narrow" profile offers ``note://items/*`` of the ``notes`` catalog server, which
    answers any ``note://items/...`` it is asked for."""
    config = write_config(tmp_path)
    base = "sagents://upstream/notes/note://items/"
    async with open_gateway(settings_for(config, "narrow")) as gateway:
        with anyio.fail_after(60):
            async with Client(gateway.server, mode="legacy") as client:
                refused: dict[str, int] = {}
                for tail in ("../hello", "%2e%2e/hello", "a%2Fb", "./7", "a/b"):
                    with pytest.raises(MCPError) as error:
                        await client.read_resource(base + tail)
                    refused[tail] = error.value.code
                decoded = await client.read_resource(base + "%37")
    assert refused == {
        "../hello": -32602,
        "%2e%2e/hello": -32602,
        "a%2Fb": -32602,
        "./7": -32602,
        "a/b": -32002,  # not offered: '*' stays within one segment
    }
    (content,) = decoded.contents
    assert isinstance(content, mt.TextResourceContents)
    assert content.text == "notes: note://items/7"  # the URI checked is the URI read
    assert content.uri == base + "7"
