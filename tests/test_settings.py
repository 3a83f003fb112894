"""Settings come from the environment, options override them, and bad values say how to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.core.errors import ConfigurationError, ReactomeAnswersError
from pipelines.core.settings import Settings, default_home, env_var_for, load_settings


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


def test_error_names_the_variable_the_user_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOME_ANSWERS_CHROMA_PORT", "x")
    with pytest.raises(ConfigurationError, match="REACTOME_ANSWERS_CHROMA_PORT"):
        load_settings()
