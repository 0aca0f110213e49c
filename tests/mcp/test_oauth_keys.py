"""The key that seals upstream logins (docs/oauth.md, "The key"): where it comes from, bad
keys refused clearly, and ``sagents auth rotate-key``'s re-sealing losing nothing."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from mcp.shared.auth import OAuthToken

from sagents.errors import ConfigError
from sagents.mcp._oauth import (
    SECRET_KEY_ENV,
    SECRET_KEY_FILE,
    LoginRecord,
    LoginVault,
    load_secret_key,
    rotate_secret_key,
)
from sagents.store._logins import SqliteLogins

pytestmark = pytest.mark.anyio


def record(token: str) -> LoginRecord:
    return LoginRecord(tokens=OAuthToken(access_token=token, refresh_token=f"r-{token}"))


async def test_without_the_variable_a_key_is_generated_once_into_a_private_file(
    tmp_path: Path,
) -> None:
    first = load_secret_key(tmp_path, environ={})
    second = load_secret_key(tmp_path, environ={})
    sealed = first.encrypt(b"login")
    assert second.decrypt(sealed) == b"login"  # the same key, read back
    mode = stat.S_IMODE((tmp_path / SECRET_KEY_FILE).stat().st_mode)
    assert mode == 0o600


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not-a-key", "key 1 of SAGENTS_SECRET_KEY is not a Fernet key"),
        (Fernet.generate_key().decode() + ",short", "key 2 of SAGENTS_SECRET_KEY"),
        (" , ", "SAGENTS_SECRET_KEY holds no key"),
    ],
    ids=["not a key", "a second key cut short", "no key"],  # stable ids: the key is random
)
def test_a_malformed_key_is_refused_naming_the_variable(
    tmp_path: Path, value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_secret_key(tmp_path, environ={SECRET_KEY_ENV: value})
    assert caught.value.details["key"] == SECRET_KEY_ENV
    assert "Fernet.generate_key" in (caught.value.hint or "")
    assert not (tmp_path / SECRET_KEY_FILE).exists()  # no key of its own made instead


async def test_a_shared_store_needs_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"shared \(PostgreSQL\) store needs"):
        load_secret_key(tmp_path, environ={}, shared=True)
    store = SqliteLogins(tmp_path / "logins.sqlite3")  # standing in for the shared one
    with pytest.raises(ConfigError, match=r"shared \(PostgreSQL\) store needs"):
        await rotate_secret_key(store, tmp_path, environ={}, shared=True)  # no replica's key
    assert not (tmp_path / SECRET_KEY_FILE).exists()
    key = Fernet.generate_key().decode()
    assert load_secret_key(tmp_path, environ={SECRET_KEY_ENV: key}, shared=True)


async def test_rotating_the_file_key_reseals_every_login_with_a_new_key(tmp_path: Path) -> None:
    store = SqliteLogins(tmp_path / "logins.sqlite3")
    old = load_secret_key(tmp_path, environ={})
    await LoginVault(store, old).save("gh", "", record("one"))
    await LoginVault(store, old).save("gh", "alice", record("two"))
    assert await rotate_secret_key(store, tmp_path, environ={}) == 2
    new = load_secret_key(tmp_path, environ={})
    opened = await LoginVault(store, new).load("gh", "alice")
    assert opened is not None
    assert opened.tokens == OAuthToken(access_token="two", refresh_token="r-two")
    assert len((tmp_path / SECRET_KEY_FILE).read_text().split()) == 1  # the old key is gone
    assert await LoginVault(store, old).load("gh", "alice") is None  # the old key opens none


async def test_rotating_to_the_variables_first_key_and_a_login_no_key_opens(
    tmp_path: Path,
) -> None:
    store = SqliteLogins(tmp_path / "logins.sqlite3")
    old, new, lost = (Fernet.generate_key().decode() for _ in range(3))
    await LoginVault(store, MultiFernet([Fernet(old)])).save("gh", "alice", record("two"))
    rotated = await rotate_secret_key(store, tmp_path, environ={SECRET_KEY_ENV: f"{new},{old}"})
    assert rotated == 1
    assert await LoginVault(store, MultiFernet([Fernet(new)])).load("gh", "alice") is not None
    # a login sealed with a key given nowhere: the rotation changes nothing at all
    await LoginVault(store, MultiFernet([Fernet(lost)])).save("jira", "alice", record("x"))
    with pytest.raises(InvalidToken):
        await rotate_secret_key(store, tmp_path, environ={SECRET_KEY_ENV: old})
    assert await LoginVault(store, MultiFernet([Fernet(new)])).load("gh", "alice") is not None
    assert await LoginVault(store, MultiFernet([Fernet(lost)])).load("jira", "alice") is not None


@pytest.mark.parametrize("mode", [0o640, 0o604], ids=["group", "other"])
async def test_a_key_file_others_can_read_is_refused_naming_it(tmp_path: Path, mode: int) -> None:
    path = tmp_path / SECRET_KEY_FILE
    first = load_secret_key(tmp_path, environ={})
    path.chmod(mode)
    with pytest.raises(ConfigError, match="readable by other users") as caught:
        load_secret_key(tmp_path, environ={})
    assert str(path) in str(caught.value)
    assert f"chmod 600 {path}" in (caught.value.hint or "")
    store = SqliteLogins(tmp_path / "logins.sqlite3")
    with pytest.raises(ConfigError, match="readable by other users"):
        await rotate_secret_key(store, tmp_path, environ={})
    path.chmod(0o600)  # the fix the hint names: the same key, nothing lost
    assert load_secret_key(tmp_path, environ={}).decrypt(first.encrypt(b"login")) == b"login"


async def test_the_logins_file_and_its_journals_are_private_new_or_old(tmp_path: Path) -> None:
    path = tmp_path / "data" / "logins.sqlite3"
    store = SqliteLogins(path)
    await store.save("gh", "alice", b"sealed")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # A file left readable (by a copy, a restore, another umask) with its write-ahead log open:
    keeper = sqlite3.connect(path)
    try:
        keeper.execute("PRAGMA journal_mode=WAL")
        keeper.execute("UPDATE upstream_logins SET sealed = x'00'")
        keeper.commit()
        sidecars = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
        for loose in (path, *sidecars):
            loose.chmod(0o644)
        await store.save("gh", "bob", b"sealed")
        for each in (path, *sidecars):
            assert stat.S_IMODE(each.stat().st_mode) == 0o600, each
    finally:
        keeper.close()
    assert [login.principal for login in await store.logins()] == ["alice", "bob"]
