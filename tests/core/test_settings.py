"""Settings come from the environment, options override them, and bad values say how to fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.http.settings import ServerSettings, load_server_settings
from pipelines.core.errors import ConfigurationError, ReactomeAnswersError
from pipelines.core.settings import Settings, default_home, env_var_for, load_settings
from tests.support.cli import cli


def test_tests_never_touch_the_users_home(isolated_home: Path) -> None:
    assert load_settings().home == isolated_home
    assert Path.home() not in isolated_home.parents


def test_defaults_run_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTOME_ANSWERS_HOME")
    settings = load_settings()
    assert settings.home == Path.home() / ".local" / "share" / "reactome-answers"
    assert settings.llm == "extractive"
    assert settings.cite_urls is False
    assert settings.uses_chroma_server is False
    assert settings.chroma_path == settings.home / "chroma"


def test_xdg_data_home_moves_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("REACTOME_ANSWERS_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert load_settings().home == tmp_path / "data" / "reactome-answers"
    assert default_home() == tmp_path / "data" / "reactome-answers"


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_LLM", "openai:gpt-4o-mini")
    monkeypatch.setenv("REACTOME_ANSWERS_CITE_URLS", "true")
    monkeypatch.setenv("CHROMA_HOST", "127.0.0.1")
    monkeypatch.setenv("CHROMA_PORT", "8123")
    monkeypatch.setenv("REACTOME_ANSWERS_MAX_QUESTION_CHARS", "500")
    settings = load_settings()
    assert settings.llm == "openai:gpt-4o-mini"
    assert settings.cite_urls is True
    assert (settings.chroma_host, settings.chroma_port) == ("127.0.0.1", 8123)
    assert settings.uses_chroma_server
    assert settings.max_question_chars == 500


def test_overrides_beat_the_environment_and_none_falls_through(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_LLM", "llamacpp")
    monkeypatch.setenv("CHROMA_PORT", "8123")
    settings = load_settings(llm="extractive", home=tmp_path / "elsewhere", chroma_port=None)
    assert settings.llm == "extractive"
    assert settings.home == tmp_path / "elsewhere"
    assert settings.chroma_port == 8123


def test_home_expands_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_HOME", "~/ra-home")
    assert load_settings().home == Path.home() / "ra-home"


@pytest.mark.parametrize("llm", ["extractive", "llamacpp", "llamacpp:/models/x.gguf", "openai:m"])
def test_model_choices(llm: str) -> None:
    assert load_settings(llm=llm).llm == llm


def test_bad_environment_value_names_the_variable_and_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_LLM", "gpt-4")
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    message = str(caught.value)
    assert "REACTOME_ANSWERS_LLM" in message
    assert "'gpt-4'" in message
    assert "openai:MODEL" in message
    assert "\n" not in message


def test_bad_override_names_the_option() -> None:
    with pytest.raises(ConfigurationError, match="--chroma-port"):
        load_settings(chroma_port=70000)


def test_bad_chroma_port_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHROMA_PORT", "eighty")
    with pytest.raises(ConfigurationError, match="CHROMA_PORT"):
        load_settings()


def test_unknown_override_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="unknown setting"):
        load_settings(colour="blue")


def test_every_setting_has_an_environment_variable() -> None:
    names = {env_var_for(field) for field in Settings.model_fields}
    assert "REACTOME_ANSWERS_HOME" in names
    assert {"CHROMA_HOST", "CHROMA_PORT"} <= names
    assert len(names) == len(Settings.model_fields)


def test_settings_errors_belong_to_the_hierarchy() -> None:
    error = ConfigurationError("bad thing", fix="do the other thing")
    assert isinstance(error, ReactomeAnswersError)
    assert str(error) == "bad thing; do the other thing"
    assert error.code == "bad_config"


def test_empty_variables_mean_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_HOME", "")
    monkeypatch.setenv("CHROMA_HOST", "")
    settings = load_settings()
    assert settings.home == default_home()
    assert settings.uses_chroma_server is False


def test_empty_home_option_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="--home has an unusable value: is empty"):
        load_settings(home="")


def test_home_of_an_unknown_user_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_HOME", "~no-such-user-here/x")
    with pytest.raises(ConfigurationError, match="cannot be expanded"):
        load_settings()


def test_relative_xdg_data_home_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", "relative/data")
    assert default_home() == Path.home() / ".local" / "share" / "reactome-answers"


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0"])
def test_timeouts_must_be_finite_and_positive(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_MODEL_TIMEOUT_S", value)
    with pytest.raises(ConfigurationError, match="REACTOME_ANSWERS_MODEL_TIMEOUT_S"):
        load_settings()


def test_a_misspelt_variable_is_not_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_CITEURLS", "true")
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    assert "REACTOME_ANSWERS_CITEURLS" in str(caught.value)
    assert "REACTOME_ANSWERS_CITE_URLS" in str(caught.value)


@pytest.mark.slow  # a Python subprocess per variable
@pytest.mark.parametrize("variable", ["REACTOME_ANSWERS_API_KEYS", "REACTOME_ANSWERS_CITEURLS"])
def test_a_program_using_the_pipeline_alone_is_told_of_a_variable_it_does_not_read(
    variable: str,
) -> None:
    # Without app imported, the server's variables are unknown: a Python program beside a
    # server (one environment for both) is warned, not stopped, and a typo is still named.
    probe = (
        "import warnings\n"
        "import pipelines.pipeline\n"
        "from pipelines.core.settings import load_settings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    load_settings()\n"
        "print('|'.join(str(w.message) for w in seen))\n"
    )
    env = {**os.environ, variable: "x"}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"unknown environment variable(s) {variable}" in done.stdout


def test_error_names_the_variable_the_user_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_CHROMA_PORT", "x")
    with pytest.raises(ConfigurationError, match="REACTOME_ANSWERS_CHROMA_PORT"):
        load_settings()


# --- the HTTP server's settings -----------------------------------------------------------------

SERVER_VARIABLES = {
    "REACTOME_ANSWERS_MAX_BODY_BYTES": ("max_body_bytes", "131072", 131_072, 65_536),
    "REACTOME_ANSWERS_HEADER_TIMEOUT_S": ("header_timeout_s", "20", 20.0, 10.0),
    "REACTOME_ANSWERS_BODY_TIMEOUT_S": ("body_timeout_s", "40", 40.0, 30.0),
    "REACTOME_ANSWERS_KEEP_ALIVE_S": ("keep_alive_s", "7", 7, 5),
    "REACTOME_ANSWERS_MAX_CONNECTIONS": ("max_connections", "50", 50, 1000),
    "REACTOME_ANSWERS_CORS_ORIGINS": ("cors_origins", "https://a.example", "https://a.example", ""),
    "REACTOME_ANSWERS_MAX_CONCURRENT_ANSWERS": ("max_concurrent_answers", "8", 8, 0),
    "REACTOME_ANSWERS_RATE_LIMIT": ("rate_limit", "60", 60, 0),
    "REACTOME_ANSWERS_AUTH_FAILURES_PER_MINUTE": ("auth_failures_per_minute", "5", 5, 30),
    "REACTOME_ANSWERS_FORWARDED_ALLOW_IPS": ("forwarded_allow_ips", "10.0.0.1", "10.0.0.1", ""),
    "REACTOME_ANSWERS_OPENAI_SOURCES": ("openai_sources", "false", False, True),
}


def test_the_servers_settings_keep_their_variables_and_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    defaults = load_server_settings()
    assert defaults.api_key_set == frozenset()
    for name, (field, text, _value, default) in SERVER_VARIABLES.items():
        assert env_var_for(field, ServerSettings) == name
        assert getattr(defaults, field) == default, name
        monkeypatch.setenv(name, text)
    monkeypatch.setenv("REACTOME_ANSWERS_API_KEYS", "first-key-7f3a9c,second-key-41be02")
    server = load_server_settings()
    for name, (field, _text, value, _default) in SERVER_VARIABLES.items():
        assert getattr(server, field) == value, name
    assert server.api_key_set == {"first-key-7f3a9c", "second-key-41be02"}
    # The pipeline's settings carry none of them, and do not take them for typos.
    assert not set(Settings.model_fields) & set(ServerSettings.model_fields)
    assert load_settings().max_question_chars == 2000


def test_a_bad_server_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_MAX_BODY_BYTES", "12")
    with pytest.raises(ConfigurationError, match="REACTOME_ANSWERS_MAX_BODY_BYTES"):
        load_server_settings()
    monkeypatch.setenv("REACTOME_ANSWERS_RATELIMIT", "60")
    for load in (load_settings, load_server_settings):
        with pytest.raises(ConfigurationError, match="REACTOME_ANSWERS_RATELIMIT"):
            load()


@pytest.mark.slow  # the installed command
def test_every_command_reports_a_bad_server_setting_and_config_shows_them(
    isolated_home: Path,
) -> None:
    refused = cli(isolated_home, "ask", "Hi?", env={"REACTOME_ANSWERS_RATE_LIMIT": "many"})
    assert refused.returncode == 1
    assert "REACTOME_ANSWERS_RATE_LIMIT" in refused.stderr
    shown = json.loads(
        cli(isolated_home, "config", env={"REACTOME_ANSWERS_RATE_LIMIT": "60"}).stdout
    )
    assert (shown["rate_limit"], shown["llm"]) == (60, "extractive")
