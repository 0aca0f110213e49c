"""The key that seals upstream logins (docs/oauth.md, "Tokens at rest"): one or more Fernet keys
from ``SAGENTS_SECRET_KEY`` (a shared store needs it: every replica seals with the same key),
else a key file kept 0600 in the data directory and generated on first use; and its rotation
(``sagents auth rotate-key``), which re-seals every stored login so that no step loses one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from cryptography.fernet import Fernet, MultiFernet

from sagents.errors import ConfigError
from sagents.store._protocols import LoginStore

__all__ = ["SECRET_KEY_ENV", "SECRET_KEY_FILE", "load_secret_key", "rotate_secret_key"]

SECRET_KEY_ENV = "SAGENTS_SECRET_KEY"
"""The variable holding the key that seals upstream logins: one or more Fernet keys separated
by commas (the first seals; every one opens, so that a key can be rotated)."""

SECRET_KEY_FILE = "secret.key"
"""The key file in the data directory (0600) when ``SAGENTS_SECRET_KEY`` is not set."""


_KEY_HINT = (
    "generate one with: python -c 'from cryptography.fernet import Fernet; "
    "print(Fernet.generate_key().decode())'"
)


def _fernets(text: str, *, source: str) -> list[Fernet]:
    keys = [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]
    if not keys:
        raise ConfigError(f"{source} holds no key", key=SECRET_KEY_ENV, hint=_KEY_HINT)
    fernets: list[Fernet] = []
    for number, key in enumerate(keys, 1):
        try:
            fernets.append(Fernet(key))
        except (ValueError, TypeError):
            raise ConfigError(
                f"key {number} of {source} is not a Fernet key (32 bytes, URL-safe base64)",
                key=SECRET_KEY_ENV,
                hint=_KEY_HINT,
            ) from None
    return fernets


def load_secret_key(
    data_dir: Path, *, environ: Mapping[str, str] | None = None, shared: bool = False
) -> MultiFernet:
    """The key that seals upstream logins.

    ``SAGENTS_SECRET_KEY`` when set; else the data directory's ``secret.key``, generated (0600)
    on first use. Replicas must share one key, so a shared store (``shared``) needs the
    variable.

    Raises:
        ConfigError: a malformed key; a shared store without ``SAGENTS_SECRET_KEY``; the key
            file cannot be read or written.
    """
    env = os.environ if environ is None else environ
    value = env.get(SECRET_KEY_ENV)
    if value:
        return MultiFernet(_fernets(value, source=SECRET_KEY_ENV))
    if shared:
        raise ConfigError(
            f"a shared (PostgreSQL) store needs {SECRET_KEY_ENV}: every replica must seal "
            "upstream logins with the same key",
            key=SECRET_KEY_ENV,
            hint=_KEY_HINT + f", and give it to every replica as {SECRET_KEY_ENV}",
        )
    path = data_dir / SECRET_KEY_FILE
    try:
        text = _read_key_file(path)
    except FileNotFoundError:
        text = _write_key_file(path, [Fernet.generate_key().decode()])
    return MultiFernet(_fernets(text, source=str(path)))


def _read_key_file(path: Path) -> str:
    """The text of the key file ``path``, refused when other users may read it (as the
    gateway's ``gateway.key`` is: a key others can read opens every login it seals).

    Raises:
        FileNotFoundError: there is no such file.
        ConfigError: it cannot be read, or its group or other permission bits are set.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(descriptor, encoding="ascii") as file:
            mode = os.fstat(file.fileno()).st_mode
            text = file.read()
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read the key file {path}: {error}", key=SECRET_KEY_ENV) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"the key file {path} is readable by other users (mode {stat.S_IMODE(mode):o})",
            file=str(path),
            key=SECRET_KEY_ENV,
            hint=f"chmod 600 {path}",
        )
    return text


def _write_key_file(path: Path, keys: list[str]) -> str:
    """Write ``keys`` (one a line) to ``path`` 0600, replacing it at once; the text written."""
    text = "".join(f"{key}\n" for key in keys)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial_path = path.with_name(path.name + ".new")
        descriptor = os.open(
            partial_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600
        )
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial_path, path)
    except OSError as error:
        raise ConfigError(
            f"cannot write the key file {path}: {error}", key=SECRET_KEY_ENV
        ) from None
    return text


async def rotate_secret_key(
    store: LoginStore,
    data_dir: Path,
    *,
    environ: Mapping[str, str] | None = None,
    shared: bool = False,
) -> int:
    """Re-seal every stored login with a new key (``sagents auth rotate-key``).

    With ``SAGENTS_SECRET_KEY`` set, its first key is the new one and the others the old ones
    (``new,old``); the logins are re-sealed with the first, after which the old keys can be
    dropped from the variable. Without it, a new key is generated into ``secret.key``: the file
    holds the new and the old key while the logins are re-sealed (one transaction), then only
    the new one, so that a failure at any step loses no login.

    Returns:
        How many logins were re-sealed.

    Raises:
        ConfigError: a malformed key, the key file cannot be written, or a shared store
            (``shared``) without ``SAGENTS_SECRET_KEY`` (a key file of one replica would lock
            the others out).
        InvalidToken: a stored login none of the keys opens (nothing was changed): it was
            sealed with a key given neither in the variable nor in the file.
        StoreError: the store cannot be used (nothing was changed).
    """
    env = os.environ if environ is None else environ
    if env.get(SECRET_KEY_ENV) or shared:  # a shared store: only the variable (every replica's)
        keys = load_secret_key(data_dir, environ=env, shared=shared)
        return await store.reseal(keys.rotate)
    path = data_dir / SECRET_KEY_FILE
    load_secret_key(data_dir, environ=env)  # generated if missing, checked if not
    old_keys = _read_key_file(path).split()
    new_key = Fernet.generate_key().decode()
    _write_key_file(path, [new_key, *old_keys])
    keys = MultiFernet([Fernet(new_key), *(Fernet(key) for key in old_keys)])
    count = await store.reseal(keys.rotate)
    _write_key_file(path, [new_key])
    return count
