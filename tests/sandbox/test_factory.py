"""``create_sandbox`` and parameter validation: clear errors, no silent fallback."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from sagents.errors import SandboxUnavailableError
from sagents.sandbox import (
    LocalSandbox,
    MemorySandbox,
    ReadOnlyBind,
    SandboxLimits,
    SandboxParams,
    create_sandbox,
)
from sagents.sandbox import _cgroup as cgroup
from sagents.sandbox import _local as local


def test_local_without_bubblewrap_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailableError) as caught:
        create_sandbox("local", workspace=str(tmp_path))
    assert "apt-get install bubblewrap" in str(caught.value)
    assert caught.value.code == "sandbox_unavailable"


def test_an_old_bubblewrap_is_refused_with_the_version_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'usage: bwrap [OPTIONS...] COMMAND'\necho '  --bind SRC DEST'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(fake))
    with pytest.raises(SandboxUnavailableError, match=r"bubblewrap >= 0\.8") as caught:
        create_sandbox("local", workspace=str(tmp_path / "ws"))
    assert "--size" in caught.value.message


def test_passthrough_is_explicit_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sagents.sandbox"):
        sandbox = create_sandbox("passthrough", workspace=str(tmp_path))
    assert isinstance(sandbox, LocalSandbox)
    assert "WITHOUT isolation" in caplog.text
    info = sandbox.describe()
    assert (info.kind, info.isolation) == ("passthrough", "none")
    assert any("no isolation" in w for w in info.warnings)


def test_local_describes_bubblewrap_and_cgroups(tmp_path: Path) -> None:
    info = create_sandbox("local", workspace=str(tmp_path)).describe()
    assert (info.kind, info.isolation, info.workspace) == ("local", "bubblewrap", "/workspace")
    assert info.cgroups
    assert info.warnings == ()


def test_missing_cgroups_are_reported_as_a_weaker_protection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unavailable = cgroup.CgroupSupport(available=False, version=None, reason="read-only mount")
    monkeypatch.setattr(local, "cgroup_support", lambda: unavailable)
    info = create_sandbox("local", workspace=str(tmp_path)).describe()
    assert not info.cgroups
    assert any("fork bomb" in w and "read-only mount" in w for w in info.warnings)


def test_memory_files_are_not_on_the_host(tmp_path: Path) -> None:
    sandbox = create_sandbox("memory", workspace=str(tmp_path))
    assert isinstance(sandbox, MemorySandbox)
    assert sandbox.describe().isolation == "in_memory"
    assert list(tmp_path.iterdir()) == []


def test_overrides_replace_fields_of_given_params(tmp_path: Path) -> None:
    params = SandboxParams(workspace=str(tmp_path))
    sandbox = create_sandbox("memory", params, mode="read_only")
    assert sandbox.describe().mode == "read_only"


def test_unknown_kind_and_missing_workspace_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown sandbox kind"):
        create_sandbox("remote", workspace=str(tmp_path))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="workspace"):
        create_sandbox("memory")


@pytest.mark.parametrize("field", ["memory_bytes", "processes", "wall_timeout_seconds"])
def test_non_positive_limits_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SandboxLimits(**{field: 0})  # type: ignore[arg-type]  # one int field at a time


def test_bad_params_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="workspace_path"):
        SandboxParams(workspace=str(tmp_path), workspace_path="relative")
    with pytest.raises(ValueError, match="read_only_subpaths"):
        SandboxParams(workspace=str(tmp_path), read_only_subpaths=("../up",))
    with pytest.raises(ValueError, match="absolute"):
        ReadOnlyBind(host_path="rel", sandbox_path="/x")


def test_bubblewrap_is_probed_once_per_process_and_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.which("bwrap")
    assert real is not None
    fake = tmp_path / "bwrap"  # a bwrap of its own, so that no earlier probe answers for it
    runs = tmp_path / "runs"
    fake.write_text(f'#!/bin/sh\necho probe >> {str(runs)!r}\nexec {real!r} "$@"\n')
    fake.chmod(0o755)
    which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name, **kw: str(fake) if name == "bwrap" else which(name, **kw)
    )
    for name in ("a", "b", "c"):
        LocalSandbox(SandboxParams(workspace=str(tmp_path / name)))
    assert runs.read_text().count("probe") == 2  # --help and one sandbox, the first time only
    fake.write_text(fake.read_text() + "\n")  # another binary at the same path: probed anew
    LocalSandbox(SandboxParams(workspace=str(tmp_path / "d")))
    assert runs.read_text().count("probe") == 4
