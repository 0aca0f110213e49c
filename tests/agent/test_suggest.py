"""suggest_tools: the offline ranking of a session's tools for one request."""

from __future__ import annotations

import logging
import math
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from sagents.agent import OfflineToolSelector, suggest_tools
from sagents.agent._ranking import embedding_model, split_words
from sagents.core._result import ToolResult
from sagents.core._spec import ToolSpec
from sagents.tool import ToolManager, ToolProxy
from sagents.tool._handler import ToolCall


def spec(name: str, description: str, **params: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        input_schema={
            "type": "object",
            "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
        },
    )


WORKSPACE = [
    spec(
        "weather__get_forecast",
        "Get the weather forecast (temperature, rain, wind) for a city.",
        city="The city's name",
    ),
    spec("fs__delete_file", "Delete a file from the disk.", path="Path of the file"),
    spec("fs__list_directory", "List the entries of a directory.", path="The directory"),
    spec(
        "mail__send_email",
        "Send an email message to one or more recipients.",
        to="Recipient addresses",
        subject="Subject line",
        body="Message text",
    ),
    spec("calendar__createEvent", "Create an event in the user's calendar.", start="Start time"),
    spec("git__git_commit", "Record changes to the repository.", message="Commit message"),
    spec(
        "currency.convert",
        "Convert an amount of money from one currency to another.",
        amount="Amount",
        from_currency="ISO code",
        to_currency="ISO code",
    ),
    spec("translate-text", "Translate text into another language.", target_language="Language"),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Will it rain in Lisbon tomorrow?", "weather__get_forecast"),
        ("please remove the file old.log", "fs__delete_file"),
        ("show me the contents of my downloads folder", "fs__list_directory"),  # synonym
        ("erase old.log", "fs__delete_file"),  # no word in common: the embeddings find it
        ("email alice that the meeting moved", "mail__send_email"),
        ("schedule a meeting with Bob on Friday at 3pm", "calendar__createEvent"),
        ("commit my changes with the message 'fix typo'", "git__git_commit"),
        ("how many euros is 100 dollars", "currency.convert"),
        ("say 'good morning' in Japanese", "translate-text"),
    ],
)
def test_the_obviously_right_tool_comes_first(query: str, expected: str) -> None:
    assert suggest_tools(query, WORKSPACE, k=3)[0] == expected


def test_camel_case_and_server_prefixes_are_split_into_words() -> None:
    assert split_words("fleet__getDeviceStatus") == ["fleet", "get", "device", "status"]
    assert split_words("HTTPServer2.read-file") == ["http", "server", "2", "read", "file"]
    tools = [
        spec("fleet__getDeviceStatus", "Returns a record."),
        spec("fleet__rebootDevice", "Restarts it."),
        spec("inventory__listItems", "Returns records."),
    ]
    assert suggest_tools("device status", tools, k=1) == ["fleet__getDeviceStatus"]
    assert suggest_tools("reboot the device", tools, k=1) == ["fleet__rebootDevice"]


def test_k_bounds_the_answer_and_names_are_distinct() -> None:
    assert len(suggest_tools("email", WORKSPACE, k=3)) == 3
    everything = suggest_tools("email", WORKSPACE, k=100)
    assert sorted(everything) == sorted(s.name for s in WORKSPACE)
    assert suggest_tools("email", WORKSPACE, k=0) == []
    assert len(suggest_tools("email", WORKSPACE)) == 8  # the default k is 10


@pytest.mark.parametrize("k", [-1, 2.5, True])
def test_a_bad_k_is_a_clear_error(k: Any) -> None:
    with pytest.raises(ValueError, match="k must be a whole number"):
        suggest_tools("email", WORKSPACE, k=k)


def test_a_bad_tools_argument_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="not a ToolSpec"):
        suggest_tools("email", ["mail__send_email"], k=1)  # type: ignore[list-item]  # the error
    with pytest.raises(TypeError, match="ToolManager or a ToolProxy"):
        suggest_tools("email", "mail__send_email", k=1)  # type: ignore[arg-type]  # the error


def test_an_empty_query_keeps_the_given_order() -> None:
    assert suggest_tools("", WORKSPACE, k=2) == [WORKSPACE[0].name, WORKSPACE[1].name]
    assert suggest_tools("   \n", WORKSPACE, k=1) == [WORKSPACE[0].name]


def test_an_empty_tool_set_ranks_nothing() -> None:
    assert suggest_tools("send an email", [], k=5) == []


def test_duplicate_names_are_ranked_once_and_the_first_wins() -> None:
    tools = [
        spec("lookup", "Look up a word in the dictionary."),
        spec("lookup", "Look up the weather forecast of a city."),
        spec("other", "Something else entirely."),
    ]
    ranked = suggest_tools("dictionary definition of a word", tools, k=5)
    assert ranked == ["lookup", "other"]
    assert (
        suggest_tools("weather forecast", tools, k=5)[0] == "other" or ranked.count("lookup") == 1
    )


def _manager() -> ToolManager:
    manager = ToolManager()
    for item in WORKSPACE:
        manager.register_tool((item, _noop))
    return manager


async def _noop(arguments: dict[str, Any], call: ToolCall) -> ToolResult:
    return ToolResult.from_text("ok")


def test_a_tool_manager_is_ranked_over_all_its_tools() -> None:
    manager = _manager()
    assert suggest_tools("send an email to bob", manager, k=1) == ["mail__send_email"]
    assert len(suggest_tools("send an email to bob", manager, k=50)) == len(WORKSPACE)


def test_a_tool_proxy_ranks_only_the_tools_it_allows() -> None:
    allowed = ["fs__delete_file", "fs__list_directory", "calendar__createEvent"]
    proxy = ToolProxy([_manager()], available_tools=allowed)
    for query in ("send an email to bob", "will it rain", "delete the file"):
        ranked = suggest_tools(query, proxy, k=10)
        assert sorted(ranked) == sorted(allowed)
    assert suggest_tools("send an email to bob", proxy, k=1)[0] in allowed
    assert suggest_tools("delete the file", proxy, k=1) == ["fs__delete_file"]


def test_the_index_is_rebuilt_when_the_tool_set_changes() -> None:
    selector = OfflineToolSelector()
    tools = list(WORKSPACE)
    assert selector.rank("send an email", tools, 1) == ["mail__send_email"]
    selector.rank("delete a file", tools, 1)
    assert selector.index_builds == 1
    selector.rank("delete a file", list(WORKSPACE), 1)  # equal specs, another list: same index
    assert selector.index_builds == 1
    tools.append(spec("sms__send_text", "Send an SMS text message to a phone number."))
    assert selector.rank("text my phone an SMS", tools, 1) == ["sms__send_text"]
    assert selector.index_builds == 2
    changed = [*WORKSPACE[:-1], spec("translate-text", "Say something in French.")]
    selector.rank("french", changed, 1)
    assert selector.index_builds == 3


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Record (and refuse) every connection or name lookup that is not to the loopback."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in (
            "127.0.0.1",
            "::1",
            "localhost",
        ):
            attempts.append(address)
            raise OSError(f"network access to {address!r} in an offline test")
        real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(host)
        raise OSError(f"name lookup of {host!r} in an offline test")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    embedding_model.cache_clear()  # load the model again, under the patch
    yield attempts
    embedding_model.cache_clear()


def test_ranking_is_offline_and_loads_the_bundled_embeddings(no_network: list[Any]) -> None:
    selector = OfflineToolSelector()
    assert selector.rank("will it rain in Oslo", WORKSPACE, 1) == ["weather__get_forecast"]
    assert selector.index(WORKSPACE).uses_embeddings
    assert no_network == []


@pytest.mark.parametrize(
    "query",
    ["???", "🙂", "\x00", "a" * 100_000, " ".join(["email"] * 5_000), "北京明天的天气怎么样"],
    ids=["punctuation", "emoji", "nul", "one-long-word", "repeated", "chinese"],
)
def test_odd_queries_still_rank_k_known_tools(query: str) -> None:
    ranked = suggest_tools(query, WORKSPACE, k=3)
    assert len(ranked) == len(set(ranked)) == 3
    assert set(ranked) <= {s.name for s in WORKSPACE}


def test_without_wordllama_bm25_ranks_alone_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)  # import wordllama raises ImportError
    embedding_model.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="sagents.agent._suggest"):
            selector = OfflineToolSelector()
            assert selector.rank("send an email to bob", WORKSPACE, 1) == ["mail__send_email"]
            assert not selector.index(WORKSPACE).uses_embeddings
    finally:
        embedding_model.cache_clear()
    assert any("ranking with BM25 alone" in r.getMessage() for r in caplog.records)


def test_odd_schemas_and_names_are_indexed_without_error() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        deep = {"type": "object", "properties": {"inner": deep}}
    tools = [
        ToolSpec(name="listed_properties", description="", input_schema={"properties": ["a"]}),
        ToolSpec(
            name="odd_enum",
            description="Pick a colour.",
            input_schema={"properties": {"c": {"enum": [1, None, "red"], "description": 7}}},
        ),
        ToolSpec(name="deep_tool", description="Deeply nested.", input_schema=deep),
        ToolSpec(name="天气", description="天气预报"),
        ToolSpec(name="__", description=""),
    ]
    selector = OfflineToolSelector()
    ranked = selector.rank("red colour", tools, k=5)
    assert ranked[0] == "odd_enum"
    assert sorted(ranked) == sorted(t.name for t in tools)
    # a tool with no words at all (an empty embedding) does not switch the embeddings off
    scores = selector.index(tools).scores("forecast of the weather")
    assert all(math.isfinite(score) for score in scores)
    assert scores[3] > max(scores[:3] + scores[4:])


def test_a_subset_of_an_indexed_set_is_ranked_without_a_new_index() -> None:
    selector = OfflineToolSelector()
    manager = _manager()
    assert selector.rank("send an email", manager, 1) == ["mail__send_email"]
    assert selector.index_builds == 1
    allowed = ["fs__delete_file", "fs__list_directory", "weather__get_forecast"]
    proxy = ToolProxy([manager], available_tools=allowed)
    assert selector.rank("delete the file", proxy, 2)[0] == "fs__delete_file"
    assert sorted(selector.rank("send an email", proxy, 10)) == sorted(allowed)
    reordered = list(reversed(manager.list_specs()))
    assert selector.rank("", reordered, 1) == [reordered[0].name]
    assert selector.rank("will it rain", reordered, 1) == ["weather__get_forecast"]
    assert selector.index_builds == 1  # views of the first index
    scores = selector.index(proxy).scores("will it rain tomorrow")
    assert len(scores) == 3
    assert scores.index(max(scores)) == sorted(allowed).index("weather__get_forecast")


TRAVEL = [
    spec("weather__get_forecast", "Get the weather forecast for a city.", city="The city"),
    spec("weather__hourly_forecast", "Hourly weather forecast of a city.", city="The city"),
    spec("weather__rain_forecast", "Forecast of rain and showers for a city.", city="The city"),
    spec("weather__wind_forecast", "Forecast of wind speed for a city.", city="The city"),
    spec("weather__weekly_forecast", "Weekly weather outlook for a city.", city="The city"),
    spec(
        "hotels__book_room",
        "Book a hotel room for some nights.",
        city="The city",
        nights="How many nights",
    ),
    spec("flights__search", "Search flights between two airports.", origin="From", to="To"),
]


def test_each_request_of_a_multi_request_query_gets_its_tool_near_the_top() -> None:
    # the weather words outnumber the flight's: ranked as one text, all five weather tools
    # come before the flight search; ranked per request, the flight's request counts on its own
    query = (
        "Give me the weather forecast of the city for the week, hour by hour, with the rain "
        "and the wind. Also find a flight from Porto to Lisbon."
    )
    ranked = suggest_tools(query, TRAVEL, k=3)
    assert "flights__search" in ranked
    assert ranked[0].startswith("weather__")


def test_a_tool_named_in_the_request_comes_first() -> None:
    # the request's words fit the hourly forecast best; the user named another tool
    query = "Get the hourly weather for Lisbon by hour with weather__get_forecast."
    assert suggest_tools(query, TRAVEL, k=1) == ["weather__get_forecast"]
    # its own name, without the server prefix, counts too
    query = "Hour by hour weather for Lisbon, please: use the get_forecast function."
    assert suggest_tools(query, TRAVEL, k=1) == ["weather__get_forecast"]
    # a name inside a longer identifier is not that name
    query = "Hour by hour weather for Lisbon (my_get_forecast_v2 is broken)."
    assert suggest_tools(query, TRAVEL, k=1) == ["weather__hourly_forecast"]


def test_a_long_text_of_many_sentences_is_ranked_whole_at_a_bounded_cost() -> None:
    text = " ".join(f"Sentence {i} says the weather in city {i} was fine." for i in range(400))
    ranked = suggest_tools(text + " Book a hotel room in Lisbon for two nights.", TRAVEL, k=7)
    assert sorted(ranked) == sorted(t.name for t in TRAVEL)


def test_a_named_tool_on_a_view_of_an_index_comes_first_only_if_the_view_has_it() -> None:
    selector = OfflineToolSelector()
    query = "Get the hourly weather for Lisbon by hour with weather__get_forecast."
    assert selector.rank(query, TRAVEL, 1) == ["weather__get_forecast"]
    subset = [TRAVEL[1], TRAVEL[4], TRAVEL[0]]
    assert selector.rank(query, subset, 1) == ["weather__get_forecast"]
    without = [TRAVEL[1], TRAVEL[4], TRAVEL[5]]
    assert "weather__get_forecast" not in selector.rank(query, without, 3)
    assert selector.rank(query, without, 1) == ["weather__hourly_forecast"]
    assert selector.index_builds == 1
