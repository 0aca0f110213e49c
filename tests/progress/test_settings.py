import logging

import pytest

from sagents.progress import ProgressHub, ProgressSettings


def test_defaults_follow_the_seed_design() -> None:
    settings = ProgressSettings.from_env({})
    assert settings == ProgressSettings(enabled=True, flush_interval_s=0.05, flush_bytes=16384)


def test_environment_values_are_read() -> None:
    settings = ProgressSettings.from_env(
        {
            "SAGE_TOOL_PROGRESS_ENABLED": "False",
            "SAGE_TOOL_PROGRESS_FLUSH_INTERVAL_MS": "0",
            "SAGE_TOOL_PROGRESS_FLUSH_BYTES": "1024",
        }
    )
    assert (settings.enabled, settings.flush_interval_s, settings.flush_bytes) == (False, 0, 1024)


def test_the_hub_reads_its_environment_when_created() -> None:
    hub = ProgressHub(environ={"SAGE_TOOL_PROGRESS_FLUSH_INTERVAL_MS": "250"})
    assert hub.settings.flush_interval_s == 0.25


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SAGE_TOOL_PROGRESS_ENABLED", "maybe"),
        ("SAGE_TOOL_PROGRESS_FLUSH_INTERVAL_MS", "-5"),
        ("SAGE_TOOL_PROGRESS_FLUSH_INTERVAL_MS", "fast"),
        ("SAGE_TOOL_PROGRESS_FLUSH_INTERVAL_MS", "nan"),
        ("SAGE_TOOL_PROGRESS_FLUSH_BYTES", "0"),
        ("SAGE_TOOL_PROGRESS_FLUSH_BYTES", "16k"),
        ("SAGE_TOOL_PROGRESS_FLUSH_BYTES", "1.5"),
    ],
)
def test_an_invalid_value_warns_and_falls_back_to_the_default(
    name: str, value: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sagents.progress._settings"):
        settings = ProgressSettings.from_env({name: value})
    assert settings == ProgressSettings()
    assert name in caplog.text
    assert repr(value) in caplog.text


@pytest.mark.parametrize(
    "kwargs", [{"flush_interval_s": -1.0}, {"flush_bytes": 0}, {"max_buffered": 0}]
)
def test_out_of_range_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        ProgressSettings(**kwargs)  # type: ignore[arg-type]
