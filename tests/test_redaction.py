"""Credentials never reach a message, an event or a log."""

from __future__ import annotations

import pytest

from pipelines.redaction import one_line, redact_secrets


@pytest.mark.parametrize(
    "text",
    [
        "auth failed for sk-proj-abcdefghijklmnop",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "cannot reach https://alice:hunter2secret@models.example/v1",
        "GET /v1/models?api_key=abc123secret&x=1",
    ],
)
def test_credentials_shaped_like_credentials_are_redacted(text: str) -> None:
    redacted = redact_secrets(text)
    assert "[redacted]" in redacted
    for secret in ("abcdefghijklmnop", "eyJhbGci", "dXNlcjpw", "hunter2secret", "abc123secret"):
        assert secret not in redacted


def test_values_of_credential_variables_are_redacted_even_across_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "line-one-secret\nline-two-secret")
    monkeypatch.setenv("SOME_TOKEN", "plainvalue42")
    error = RuntimeError("server said:\nline-one-secret\nline-two-secret and plainvalue42")
    text = one_line(error)
    assert "secret" not in text
    assert "plainvalue42" not in text
    assert "\n" not in text
    assert text.startswith("RuntimeError: server said:")


def test_ordinary_text_is_left_alone() -> None:
    text = "ABCA1 exports cholesterol [1]; see https://reactome.org/content/detail/R-HSA-5682113"
    assert redact_secrets(text) == text
