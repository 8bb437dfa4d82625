"""Settings: flags > environment (SVC_*) > config file ($TOOLRUN_HOME/config/config.toml) > defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from toolrun.errors import UsageError
from toolrun.settings import BY_NAME, SETTINGS, Settings


def setting_of(settings: Settings, name: str) -> object:
    """A setting's value by its documented name (`rate_limit.calls`)."""
    return getattr(settings, BY_NAME[name].attr)


CONFIG = """\
port = 7000
debug = true
allowed_hosts = ["tools.example", "localhost"]

[rate_limit]
enabled = true
calls = 5
window = 30
"""


def write_config(home: Path, text: str) -> Path:
    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(home: Path, flags: dict[str, object] | None = None, **env: str) -> Settings:
    return Settings.load(flags=flags or {}, environ={"TOOLRUN_HOME": str(home), **env})


def test_settings_are_typed_frozen_attributes_generated_from_the_one_table(tmp_path: Path) -> None:
    settings = load(tmp_path, SVC_PORT="9000", SVC_ALLOWED_ORIGINS="https://a.example, https://b.example")
    attrs = {f.name for f in dataclasses.fields(Settings)} - {"dirs", "origins", "config_file"}
    assert attrs == {s.attr for s in SETTINGS}  # one attribute per row, no other
    for row in SETTINGS:
        value = getattr(settings, row.attr)
        assert setting_of(settings, row.name) == value
        assert isinstance(value, tuple if row.type is list else row.type), row.name
    assert settings.port == 9000 and settings.rate_limit_enabled is False
    assert settings.allowed_origins == ("https://a.example", "https://b.example")
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.port = 1  # type: ignore[misc]
    assert BY_NAME["rate_limit.enabled"].attr == "rate_limit_enabled"
    assert BY_NAME["rate_limit.enabled"].env == "SVC_RATE_LIMIT_ENABLED"


def test_defaults_apply_when_nothing_is_set(tmp_path: Path) -> None:
    settings = load(tmp_path)
    for setting in SETTINGS:
        assert setting_of(settings, setting.name) == setting.default, setting.name
    assert setting_of(settings, "host") == "127.0.0.1"
    assert setting_of(settings, "rate_limit.enabled") is False
    assert setting_of(settings, "ui_enabled") is False


def test_every_setting_has_an_svc_environment_name(tmp_path: Path) -> None:
    assert BY_NAME["rate_limit.enabled"].env == "SVC_RATE_LIMIT_ENABLED"
    assert BY_NAME["ui_enabled"].env == "SVC_UI_ENABLED"
    assert all(s.env == "SVC_" + s.name.upper().replace(".", "_") for s in SETTINGS)


def test_the_config_file_overrides_defaults_with_dotted_tables(tmp_path: Path) -> None:
    write_config(tmp_path, CONFIG)
    settings = load(tmp_path)
    assert setting_of(settings, "port") == 7000
    assert setting_of(settings, "debug") is True
    assert setting_of(settings, "rate_limit.enabled") is True
    assert setting_of(settings, "rate_limit.calls") == 5
    assert setting_of(settings, "rate_limit.window") == 30
    assert settings.allowed_hosts == ("tools.example", "localhost")
    assert setting_of(settings, "ui_enabled") is False


def test_the_environment_overrides_the_config_file(tmp_path: Path) -> None:
    write_config(tmp_path, "ui_enabled = false\n" + CONFIG)
    settings = load(
        tmp_path,
        SVC_RATE_LIMIT_ENABLED="false",
        SVC_UI_ENABLED="true",
        SVC_PORT="9",
        SVC_ALLOWED_HOSTS="a.example, b.example",
    )
    assert setting_of(settings, "rate_limit.enabled") is False
    assert setting_of(settings, "ui_enabled") is True
    assert setting_of(settings, "port") == 9
    assert settings.allowed_hosts == ("a.example", "b.example")
    assert setting_of(settings, "rate_limit.calls") == 5  # still from the file


def test_flags_override_the_environment_and_the_config_file(tmp_path: Path) -> None:
    write_config(tmp_path, CONFIG)
    env = {"SVC_RATE_LIMIT_ENABLED": "true", "SVC_UI_ENABLED": "true", "SVC_PORT": "9"}
    settings = load(tmp_path, {"port": 8123, "ui_enabled": False, "rate_limit.enabled": False}, **env)
    assert (
        setting_of(settings, "port"),
        setting_of(settings, "ui_enabled"),
        setting_of(settings, "rate_limit.enabled"),
    ) == (8123, False, False)


def test_a_flag_left_unset_falls_through_to_the_environment(tmp_path: Path) -> None:
    settings = load(tmp_path, {"port": None, "ui_enabled": None, "catalog": []}, SVC_PORT="9", SVC_UI_ENABLED="yes")
    assert (setting_of(settings, "port"), setting_of(settings, "ui_enabled")) == (9, True)


def test_env_true_turns_the_rate_limit_and_ui_on(tmp_path: Path) -> None:
    settings = load(tmp_path, SVC_RATE_LIMIT_ENABLED="true", SVC_UI_ENABLED="TRUE")
    assert setting_of(settings, "rate_limit.enabled") is True
    assert setting_of(settings, "ui_enabled") is True


def test_svc_catalog_is_split_on_the_path_separator(tmp_path: Path) -> None:
    settings = load(tmp_path, SVC_CATALOG="a.yaml:dir/b.yaml:")
    assert settings.catalog == ("a.yaml", "dir/b.yaml")


def test_svc_config_points_at_another_config_file(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.toml"
    other.write_text("port = 6000\n", encoding="utf-8")
    assert load(tmp_path, SVC_CONFIG=str(other)).port == 6000


def test_an_int_in_the_file_is_accepted_for_a_float_setting(tmp_path: Path) -> None:
    write_config(tmp_path, "default_timeout = 5\n")
    value = load(tmp_path).default_timeout
    assert value == 5.0 and isinstance(value, float)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SVC_PORT": "eighty"}, "setting port from SVC_PORT: expected int, got 'eighty'"),
        ({"SVC_UI_ENABLED": "maybe"}, "setting ui_enabled from SVC_UI_ENABLED: expected bool, got 'maybe'"),
        (
            {"SVC_RATE_LIMIT_ENABLED": "2"},
            "setting rate_limit.enabled from SVC_RATE_LIMIT_ENABLED: expected bool, got '2'",
        ),
        ({"SVC_READINESS_TIMEOUT": "soon"}, "setting readiness_timeout from SVC_READINESS_TIMEOUT: expected float"),
    ],
)
def test_a_bad_environment_value_names_the_setting_and_the_variable(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        load(tmp_path, **env)
    assert str(caught.value).startswith(message)


def test_a_bad_config_file_value_names_the_setting_and_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[rate_limit]\nenabled = "yes please"\n')
    with pytest.raises(UsageError) as caught:
        load(tmp_path)
    assert str(caught.value) == f"setting rate_limit.enabled from {path}: expected bool, got 'yes please'"


def test_a_string_port_in_the_config_file_is_an_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'port = "9000"\n')
    with pytest.raises(UsageError, match=f"setting port from {path}: expected int"):
        load(tmp_path)


def test_a_list_setting_in_the_config_file_must_hold_strings(tmp_path: Path) -> None:
    path = write_config(tmp_path, "allowed_hosts = [1, 2]\n")
    with pytest.raises(UsageError) as caught:
        load(tmp_path)
    assert str(caught.value) == f"setting allowed_hosts from {path}: expected list of strings, got [1, 2]"


def test_a_bad_flag_value_names_the_command_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="setting port from command line: expected int"):
        load(tmp_path, {"port": "x"})


@pytest.mark.parametrize(
    ("text", "unknown"),
    [("prot = 80\n", "prot"), ("[rate_limit]\nenable = true\n", "rate_limit.enable"), ("[nope]\nx = 1\n", "nope.x")],
)
def test_an_unknown_config_key_is_an_error_naming_it(tmp_path: Path, text: str, unknown: str) -> None:
    path = write_config(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load(tmp_path)
    assert str(caught.value) == f"config file {path}: unknown setting {unknown!r}"


def test_a_config_file_that_is_not_toml_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, "port = = 1\n")
    with pytest.raises(UsageError, match=f"config file {path}: "):
        load(tmp_path)


def test_toolrun_home_puts_config_data_and_cache_under_one_directory(tmp_path: Path) -> None:
    settings = load(tmp_path)
    assert settings.dirs == {"config": tmp_path / "config", "data": tmp_path / "data", "cache": tmp_path / "cache"}


def test_settings_from_the_file_and_the_environment_reach_the_server(tmp_path: Path) -> None:
    from support.app import write_test_catalog
    from toolrun.server.run import build_app
    from toolrun.state.memory import MemoryLimiter

    home = tmp_path / "toolrun-home"
    write_config(home, "max_body_bytes = 4096\n[rate_limit]\ncalls = 3\nwindow = 10\n")
    settings = load(home, SVC_RATE_LIMIT_ENABLED="true", SVC_DEBUG="on")
    app = build_app(settings, [str(write_test_catalog(tmp_path / "catalog"))])
    parts = app.app.state.parts
    limiter = parts.service.limiter
    assert isinstance(limiter, MemoryLimiter)
    assert (limiter.calls, limiter.window) == (3, 10)
    assert setting_of(parts.settings, "debug") is True and setting_of(parts.settings, "max_body_bytes") == 4096
