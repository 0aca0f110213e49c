"""``--store`` and the config's ``store``: addresses are read, and refused clearly."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagents.errors import ConfigError
from sagents.store import DEFAULT_LEASE_S, parse_store_url, redact_url


def test_no_address_is_the_embedded_store() -> None:
    location = parse_store_url(None)
    assert (location.kind, location.directory, location.lease_s) == (
        "sqlite",
        None,
        DEFAULT_LEASE_S,
    )


def test_a_sqlite_address_names_the_folder_of_its_files() -> None:
    assert parse_store_url("sqlite:///var/lib/sagents").directory == Path("/var/lib/sagents")


def test_a_postgresql_address_is_kept_and_shown_without_its_password() -> None:
    location = parse_store_url("postgresql://u:secret@db:5433/sagents", lease_s=4)
    assert (location.kind, location.lease_s) == ("postgresql", 4)
    assert location.shown == "postgresql://u:***@db:5433/sagents"
    assert redact_url("postgres://db/x") == "postgres://db/x"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("mysql://u@db/x", "must start with postgresql://"),
        ("postgresql://u:pw@db:5432", "names no database"),
        ("postgresql://u:pw@db:port/x", "malformed store address"),
    ],
)
def test_a_bad_address_names_the_key_and_hides_the_password(value: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_store_url(value, key="store.url", file="/etc/sagents.json")
    message = str(caught.value)
    assert expected in message
    assert "key 'store.url'" in message
    assert "file '/etc/sagents.json'" in message
    assert ":pw@" not in message


def test_a_lease_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="more than 0 seconds"):
        parse_store_url(None, lease_s=0)


def test_the_config_store_expands_variables_and_the_flag_wins() -> None:
    from sagents.config._loader import parse_config
    from sagents.gateway._runtime import _store_location
    from sagents.gateway._settings import GatewaySettings

    config = parse_config(
        {"store": {"url": "postgresql://u:${PW}@db/x", "leaseSec": 5}}, environ={"PW": "s3"}
    )
    from_config = _store_location(config, GatewaySettings())
    from_flag = _store_location(config, GatewaySettings(store="postgresql://v@other/y"))
    assert (config.store_url, config.store_lease_s) == ("postgresql://u:s3@db/x", 5)
    assert (from_config.url, from_config.lease_s) == ("postgresql://u:s3@db/x", 5)
    assert from_flag.url == "postgresql://v@other/y"


def test_an_unknown_key_of_the_config_store_is_refused() -> None:
    from sagents.config._loader import parse_config

    with pytest.raises(ConfigError, match=r"store\.uri"):
        parse_config({"store": {"uri": "postgresql://db/x"}})
